#!/usr/bin/env python3
"""How long a replay of 20, 100 and 200 recorded mutate_request inputs takes with the example Python hook,
against its CPU floor.

Builds the example workspace in a temporary directory, starts a real Engine (journal on, as in
production), records 20 system prompt requests from 20 sessions (each with a short history), edits
prompts/chat.md through the agent's own tool (a commit), then replays that commit `--n` times per size N (`--sizes`, default 20,100,200), the sizes interleaved:

  engine.replays.replay(change, ["mutate_request"], limit=N)

Each replay copies the workspace three times (before, before again, after), runs discover in each
copy and dispatches the N inputs with each version: 3N + 3 hook runs, at most one per core at a time.
The progress events tell how long the preparation (copies and discover) took.

Prints per N the median, min and max, the CPU time the hook processes and the engine took per replay
(what the load cannot change) and the floor it sets (that CPU / cores: no replay can be faster), the
time as a multiple of that floor and of N=20's; the load average before and after; and a final line
for N=20 against the targets (< 3 s, within 1.3x of its floor).
Figures only: nothing fails on timing.

Run: .venv/bin/python bench/replay_speed.py [--n 3] [--sizes 20,100,200] [--keep-shims]
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
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/support is not an installed package

from engine.protocol.events import Event, EventKind  # noqa: E402
from engine.runtime import Engine  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

TARGET_S = 3.0
FLOOR_RATIO = 1.3  # a replay of 20 inputs within 1.3x of what its CPU needs on the cores there are
EXAMPLE = REPO / "engine" / "example"


def history(i: int) -> list[dict[str, object]]:
    """A short conversation, as the shim sends it ({info, parts})."""
    return [
        {"info": {"role": "user", "agent": "build"}, "parts": [{"type": "text", "text": f"question {i}"}]},
        {"info": {"role": "assistant", "agent": "build"}, "parts": [{"type": "text", "text": "an answer"}]},
    ]


@dataclass
class Sized:
    """The replays of one number of inputs."""

    times: list[float] = field(default_factory=list)
    preparing: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the hooks' and this process's (the engine's) CPU

    def floor(self, cores: int) -> float:
        """The least time the replay's CPU allows on `cores` idle cores."""
        return statistics.median(self.cpu) / cores


def cpu_s() -> float:
    """CPU time of this process (the engine) and its reaped children (the hook processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def bench(n: int, sizes: list[int], env: dict[str, str], python: str, base: Path) -> None:
    root = base / "ws"
    shutil.copytree(EXAMPLE, root)
    engine = Engine(root, env=env)
    await engine.start()
    marks: list[tuple[float, str]] = []

    def listen(event: Event) -> None:
        if event.kind == EventKind.REPLAY_PROGRESS:
            marks.append((time.perf_counter(), str(event.data.get("message"))))

    engine.bus.listen(listen)
    measured = {size: Sized() for size in sizes}
    try:
        for i in range(max(sizes)):
            sid = f"ses_{i:03d}"
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
        await engine.replays.replay(change, ["mutate_request"], min(sizes))  # warm-up (page cache)
        load_before = os.getloadavg()
        for rep in range(n):  # the sizes interleaved, their order rotating, so that drift hits them alike
            for size in sizes[rep % len(sizes) :] + sizes[: rep % len(sizes)]:
                m = measured[size]
                marks.clear()
                cpu0 = cpu_s()
                started = time.perf_counter()
                result = await engine.replays.replay(change, ["mutate_request"], size)
                m.times.append(time.perf_counter() - started)
                m.cpu.append(cpu_s() - cpu0)
                replaying = next((t for t, msg in marks if msg.startswith("replaying")), started)
                m.preparing.append(replaying - started)
                found = result.stages[0]
                if result.state != "done" or found.inputs != size or found.changed != size:
                    raise RuntimeError(f"unexpected replay: {result.state} {result.error} {found}")
        load_after = os.getloadavg()
    finally:
        await engine.close()
    cores = len(os.sched_getaffinity(0))
    print(f"cores: {cores}; the hook's python3: {python}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}")
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in load_after)}")
    print(
        f"replays: {n} per size, sizes interleaved; each replay runs 3 versions x N inputs + 3 discover runs"
    )
    first = sizes[0]
    base_median = statistics.median(measured[first].times)
    for size in sizes:
        m = measured[size]
        median = statistics.median(m.times)
        floor = m.floor(cores)
        print(
            f"N={size:4}: median {median:6.2f} s (min {min(m.times):.2f}, max {max(m.times):.2f}); preparation "
            f"{statistics.median(m.preparing):.2f} s; CPU (hooks + engine) {statistics.median(m.cpu):.2f} s, "
            f"floor on {cores} cores {floor:.2f} s: {median / floor:.2f}x the floor; "
            f"{median / size * 1000:.1f} ms per input; {median / base_median:.2f}x N={first} for "
            f"{size / first:.1f}x the inputs"
        )
    m = measured[first]
    median, floor = statistics.median(m.times), m.floor(cores)
    verdict = "meets" if median < TARGET_S and median <= FLOOR_RATIO * floor else "MISSES"
    print(
        f"replay of {first} mutate_request inputs: median {median:.2f} s, {median / floor:.2f}x its CPU floor "
        f"{floor:.2f} s (targets < {TARGET_S:.0f} s, <= {FLOOR_RATIO}x the floor) {verdict}; load average "
        f"{load_before[0]:.2f}-{load_after[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3, help="replays measured per size (after one warm-up)")
    parser.add_argument(
        "--sizes",
        default="20,100,200",
        help="numbers of recorded inputs replayed, comma-separated (default 20,100,200)",
    )
    parser.add_argument("--keep-shims", action="store_true", help="keep version-manager shims on PATH")
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("OPENCODE_EVOLVE_WORKSPACE", None)
    python = shutil.which("python3", path=env.get("PATH")) if args.keep_shims else drop_shims(env)
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-replay-"))
    try:
        sizes = sorted({int(x) for x in args.sizes.split(",")})
        asyncio.run(bench(args.n, sizes, env, python or "?", base))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
