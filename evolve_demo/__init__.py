"""evolve's offline demo and the opencode it runs: the pinned opencode release and its install
(`opencode_setup`), a scripted model server that stands in for an LLM (`scripted_model`), the demo's
conversation (`story`) and the `evolve demo` and `evolve opencode` commands (`command`, `demo`).

The engine never imports this package; it imports the engine and the console."""
