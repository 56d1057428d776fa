"""evolve's operator console (Textual). Talks to the engine only over its HTTP API and event stream."""
