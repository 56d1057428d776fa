#!/usr/bin/env python3
"""How long a replay of 20 recorded mutate_request inputs takes with the example Python hook.

Builds the example workspace in a temporary directory, starts a real Engine (journal on, as in
production), records 20 system prompt requests from 20 sessions (each with a short history), edits
prompts/chat.md through the agent's own tool (a commit), then replays that commit `--n` times:

  engine.replays.replay(change, ["mutate_request"], limit=20)

Each replay copies the workspace three times (before, before again, after), runs discover in each
copy and dispatches the 20 inputs with each version: 63 hook runs, at most one per core at a time.
The progress events tell how long the preparation (copies and discover) took.

Prints the median, min and max, the load average before and after, the CPU time the hook processes
took per replay (what the load cannot change), and a final line against the target (< 3 s).
Figures only: nothing fails on timing.

Run: .venv/bin/python bench/replay_speed.py [--n 7] [--inputs 20] [--keep-shims]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/support is not an installed package

from engine.protocol.events import Event, EventKind  # noqa: E402
from engine.runtime import Engine  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

TARGET_S = 3.0
EXAMPLE = REPO / "engine" / "example"


def history(i: int) -> list[dict[str, object]]:
    """A short conversation, as the shim sends it ({info, parts})."""
    return [
        {"info": {"role": "user", "agent": "build"}, "parts": [{"type": "text", "text": f"question {i}"}]},
        {"info": {"role": "assistant", "agent": "build"}, "parts": [{"type": "text", "text": "an answer"}]},
    ]


async def bench(n: int, inputs: int, env: dict[str, str], python: str, base: Path) -> None:
    root = base / "ws"
    shutil.copytree(EXAMPLE, root)
    engine = Engine(root, env=env)
    await engine.start()
    marks: list[tuple[float, str]] = []

    def listen(event: Event) -> None:
        if event.kind == EventKind.REPLAY_PROGRESS:
            marks.append((time.perf_counter(), str(event.data.get("message"))))

    engine.bus.listen(listen)
    try:
        for i in range(inputs):
            sid = f"ses_{i:02d}"
            engine.sessions.set_history(sid, history(i))
            await engine.stages.dispatch(
                "mutate_request", {"session": {"id": sid}, "system": ["You are opencode."]}, session=sid
            )
        done = await engine.tools.call(
            "evolve_prompt_edit",
            {"prompt": "chat.md", "oldString": "Answer plainly", "newString": "Answer tersely"},
            origin="operator",
        )
        if done.error:
            raise RuntimeError(f"the edit failed: {done.output}")
        head = engine.git.head()
        assert head is not None
        change = await engine.replays.commit(head)
        await engine.replays.replay(change, ["mutate_request"], inputs)  # warm-up (page cache)
        load_before = os.getloadavg()
        times: list[float] = []
        preparing: list[float] = []
        cpu: list[float] = []
        for _ in range(n):
            marks.clear()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            result = await engine.replays.replay(change, ["mutate_request"], inputs)
            times.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime)
            replaying = next((t for t, m in marks if m.startswith("replaying")), started)
            preparing.append(replaying - started)
            found = result.stages[0]
            if result.state != "done" or found.inputs != inputs or found.changed != inputs:
                raise RuntimeError(f"unexpected replay: {result.state} {result.error} {found}")
        load_after = os.getloadavg()
    finally:
        await engine.close()
    median = statistics.median(times)
    print(f"cores: {os.cpu_count()}; the hook's python3: {python}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}")
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in load_after)}")
    print(f"replays: {n}; inputs per replay: {inputs} (x3 versions = {3 * inputs} runs, + 3 discover runs)")
    print(f"replay time: median {median:.2f} s, min {min(times):.2f} s, max {max(times):.2f} s")
    print(f"of which preparation (3 copies + discover): median {statistics.median(preparing):.2f} s")
    cores = os.cpu_count() or 1
    print(
        f"CPU time of the hook processes per replay: median {statistics.median(cpu):.2f} s "
        f"(on {cores} idle cores no replay can take less than {statistics.median(cpu) / cores:.2f} s)"
    )
    verdict = "meets" if median < TARGET_S else "MISSES"
    print(
        f"replay of {inputs} mutate_request inputs: median {median:.2f} s "
        f"(target < {TARGET_S:.0f} s) {verdict} target"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=7, help="replays measured (after one warm-up)")
    parser.add_argument("--inputs", type=int, default=20, help="recorded inputs (sessions)")
    parser.add_argument("--keep-shims", action="store_true", help="keep version-manager shims on PATH")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("OPENCODE_EVOLVE_WORKSPACE", None)
    python = shutil.which("python3", path=env.get("PATH")) if args.keep_shims else drop_shims(env)
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-replay-"))
    try:
        asyncio.run(bench(args.n, args.inputs, env, python or "?", base))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
