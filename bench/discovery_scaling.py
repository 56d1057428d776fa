#!/usr/bin/env python3
"""Start-up discovery of 8 hooks versus 1: `await Engine.discover()` on two workspaces.

Both workspaces hold the example prompts, config and test; one has hooks/notes.py, the other has
eight copies of it (notes1.py ... notes8.py, each registering its own name, so each brings its
four tools). Both engines are started once (git init, initial commit, journal on, as in
production); then, after a warm-up, `discover()` is timed on each. As a baseline, the same hooks'
`discover` is also timed when spawned directly, all at once with asyncio (no engine; each in a
new session, as the engine spawns hooks). The order
of the four measurements rotates every round.

Besides wall time it reports the CPU time per discover: of the hook processes (RUSAGE_CHILDREN)
and of the engine process itself (all its threads). On a machine with C cores, eight hooks that
each need t ms of CPU cannot finish faster than 8*t/C ms however parallel the engine is; that
floor is printed next to the ratio.
Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/discovery_scaling.py [--reps 30] [--warmup 3] [--keep-shims]
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

from engine.runtime import Engine  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

TARGET_RATIO = 1.5
EXAMPLE = REPO / "engine" / "example"


def make_workspace(base: Path, name: str, hooks: int) -> Path:
    root = base / name
    root.mkdir(parents=True)
    for sub in ("prompts", "config", "tests"):
        shutil.copytree(EXAMPLE / sub, root / sub)
    (root / "hooks").mkdir()
    source = (EXAMPLE / "hooks" / "notes.py").read_text()
    if 'NAME = "notes"' not in source:
        raise RuntimeError('engine/example/hooks/notes.py no longer has NAME = "notes"')
    for i in range(1, hooks + 1):
        stem = "notes" if hooks == 1 else f"notes{i}"
        path = root / "hooks" / f"{stem}.py"
        path.write_text(source.replace('NAME = "notes"', f'NAME = "{stem}"', 1))
        path.chmod(0o755)
    return root


def children_cpu_ms() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000


async def timed_discover(engine: Engine, hooks: int) -> tuple[float, float, float]:
    """(wall ms, hook processes' CPU ms, engine process CPU ms) of one discover()."""
    if engine.journal is not None:
        await asyncio.to_thread(engine.journal.flush)
    child0, self0 = children_cpu_ms(), time.process_time()
    t0 = time.perf_counter()
    await engine.registry.discover()
    wall = (time.perf_counter() - t0) * 1000
    self_cpu = (time.process_time() - self0) * 1000
    child_cpu = children_cpu_ms() - child0
    tools = sum(len(r.tools) for r in engine.registry.registrations.values())
    problems = [p for r in engine.registry.registrations.values() for p in r.problems]
    if len(engine.registry.registrations) != hooks or tools != 4 * hooks or problems:
        raise RuntimeError(
            f"discovery went wrong: {len(engine.registry.registrations)} hooks, {tools} tools, {problems}"
        )
    return wall, child_cpu, self_cpu


async def direct_discover(paths: list[Path], cwd: Path) -> tuple[float, float, float]:
    """The same hooks' `discover` spawned directly, all at once (no engine): the baseline.

    Spawned as engine/runner.py spawns hooks, each in a new session (start_new_session=True): with
    the kernel's autogroup scheduling a new session is also a new CPU-share group, which changes
    how much CPU parallel hooks get on a busy machine, so the baseline must do the same."""

    async def one(path: Path) -> None:
        proc = await asyncio.create_subprocess_exec(
            str(path),
            "discover",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd),
            start_new_session=True,
        )
        out, _ = await proc.communicate(b'{"hook": "discover"}')
        if proc.returncode != 0 or b'"tools"' not in out:
            raise RuntimeError(f"direct discover of {path.name} failed: exit {proc.returncode}")

    child0, self0 = children_cpu_ms(), time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(p) for p in paths))
    wall = (time.perf_counter() - t0) * 1000
    return wall, children_cpu_ms() - child0, (time.process_time() - self0) * 1000


async def main_async(args: argparse.Namespace) -> int:
    python3 = "(PATH unchanged)" if args.keep_shims else drop_shims(os.environ)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"hooks' python3: {python3}; cores: {cores}; load average at start: {os.getloadavg()[0]:.2f}")
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-discovery-"))
    engines: dict[int, Engine] = {}
    try:
        for hooks in (1, 8):
            engine = Engine(make_workspace(base, f"ws{hooks}", hooks))  # journal on, as in production
            await engine.start()
            engines[hooks] = engine

        async def measure(kind: str, hooks: int) -> tuple[float, float, float]:
            engine = engines[hooks]
            if kind == "engine":
                return await timed_discover(engine, hooks)
            return await direct_discover([h.path for h in engine.registry.hooks], engine.workspace.root)

        jobs = [("engine", 1), ("engine", 8), ("direct", 1), ("direct", 8)]
        samples: dict[tuple[str, int], list[tuple[float, float, float]]] = {j: [] for j in jobs}
        for _ in range(args.warmup):
            for job in jobs:
                await measure(*job)
        for i in range(args.reps):
            shift = i % len(jobs)  # rotate the order every round
            for job in jobs[shift:] + jobs[:shift]:
                samples[job].append(await measure(*job))
    finally:
        for engine in engines.values():
            await engine.close()
        shutil.rmtree(base, ignore_errors=True)

    med: dict[tuple[str, int], tuple[float, float, float]] = {}
    for job, values in samples.items():
        walls, childs, selfs = zip(*values, strict=True)
        med[job] = (statistics.median(walls), statistics.median(childs), statistics.median(selfs))
        what = "Engine.discover()" if job[0] == "engine" else "direct parallel spawn"
        print(
            f"{job[1]} hook(s), {what:21}: median {med[job][0]:6.1f} ms "
            f"(min {min(walls):6.1f}, max {max(walls):6.1f}) | "
            f"hook processes CPU {med[job][1]:6.1f} ms | this process CPU {med[job][2]:5.1f} ms"
        )
    e1, e8 = med[("engine", 1)][0], med[("engine", 8)][0]
    d1, d8 = med[("direct", 1)][0], med[("direct", 8)][0]
    ratio, direct_ratio = e8 / e1, d8 / d1
    # With every hook needing the CPU of the single one, 8 of them on `cores` cores take at least:
    floor = max(e1, med[("engine", 8)][1] / min(cores, 8))
    print(
        f"CPU-bound floor for 8 hooks on {cores} core(s): {floor:.1f} ms (= {floor / e1:.2f}x the 1-hook "
        f"time); one after another they would take about {8 * e1:.0f} ms (8x)"
    )
    print(
        f"ratio 8/1: engine {ratio:.2f}x, hooks spawned directly in parallel {direct_ratio:.2f}x; "
        f"engine minus direct: {e1 - d1:+.1f} ms with 1 hook, {e8 - d8:+.1f} ms with 8; "
        f"load average at end: {os.getloadavg()[0]:.2f}"
    )
    verdict = "meets" if ratio < TARGET_RATIO else "MISSES"
    print(
        f"discovery scaling: 8 hooks {e8:.0f} ms vs 1 hook {e1:.0f} ms, ratio {ratio:.2f}x "
        f"(target < {TARGET_RATIO:g}x; {verdict} target; the hooks alone, without the engine: "
        f"{direct_ratio:.2f}x)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=30, help="measured rounds (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up discovers per workspace (default 3)")
    parser.add_argument(
        "--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH (slow python3 starts)"
    )
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
