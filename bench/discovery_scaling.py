#!/usr/bin/env python3
"""Discovery of 8 hooks versus 1: `await engine.registry.discover()` on two workspaces, warm and cold.

Both workspaces hold the example prompts, config and test; one has hooks/notes.py, the other has
eight copies of it (notes1.py ... notes8.py, each registering its own name, so each brings its
four tools). Both engines are started once (git init, initial commit, journal on, as in
production); then, after a warm-up, `discover()` is timed on each, with hook_warm_start on (every
hook forked from a ready interpreter, engine/warm/starts.py) and off (every hook spawned: the engine
before warm starts). As a baseline, the same hooks' `discover` is also timed when spawned directly,
all at once with asyncio (no engine). The order of the measurements rotates every round.

Besides wall time it reports the CPU time per discover: of the hook processes (RUSAGE_CHILDREN for
spawned ones; for warm ones, the ready interpreters' own CPU and their reaped children's, from
/proc/<pid>/stat, averaged over the rounds: clock ticks are 10 ms) and of the engine process
itself (all its threads). On a machine with C cores, eight hooks that each need t ms of CPU cannot
finish faster than 8*t/C ms however parallel the engine is; that floor is printed next to the ratio.
Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/discovery_scaling.py [--reps 30] [--warmup 3] [--keep-shims]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from cputime import children_cpu_ms, servers_cpu_ms  # bench/cputime.py

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


async def timed_discover(engine: Engine, hooks: int, warm: bool) -> tuple[float, float, float]:
    """(wall ms, hook processes' CPU ms, engine process CPU ms) of one discover(), warm or cold.
    A warm one's hook CPU here is what was reaped directly (none); its servers' is added up apart."""
    if engine.journal is not None:
        await asyncio.to_thread(engine.journal.flush)
    engine.config = replace(engine.config, hook_warm_start=warm)
    runs0 = engine.warm.warm_runs if engine.warm is not None else 0
    child0, self0 = children_cpu_ms(), time.process_time()
    t0 = time.perf_counter()
    await engine.registry.discover()
    wall = (time.perf_counter() - t0) * 1000
    self_cpu = (time.process_time() - self0) * 1000
    child_cpu = children_cpu_ms() - child0
    if warm and engine.warm is not None and engine.warm.warm_runs != runs0 + hooks:
        raise RuntimeError("a hook of the warm discover started cold (see the log)")
    tools = sum(len(r.tools) for r in engine.registry.registrations.values())
    problems = [p for r in engine.registry.registrations.values() for p in r.problems]
    if len(engine.registry.registrations) != hooks or tools != 4 * hooks or problems:
        raise RuntimeError(
            f"discovery went wrong: {len(engine.registry.registrations)} hooks, {tools} tools, {problems}"
        )
    return wall, child_cpu, self_cpu


async def direct_discover(paths: list[Path], cwd: Path) -> tuple[float, float, float]:
    """The same hooks' `discover` spawned directly, all at once (no engine): the baseline.

    Spawned as engine/hooks/runner.py spawns hooks, each in a new session (start_new_session=True): with
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

        for engine in engines.values():  # the warm runs must be warm from the first
            for hook in engine.registry.hooks:
                if engine.warm is None or not await engine.warm.prepare(
                    str(hook.path), cwd=str(engine.workspace.root), env=engine.env
                ):
                    raise RuntimeError(f"no warm start for {hook.name} (see the log)")

        servers = {hooks: 0.0 for hooks in engines}

        async def measure(kind: str, hooks: int) -> tuple[float, float, float]:
            engine = engines[hooks]
            if kind == "direct":
                return await direct_discover([h.path for h in engine.registry.hooks], engine.workspace.root)
            before = servers_cpu_ms(engine)
            found = await timed_discover(engine, hooks, warm=kind == "warm")
            if kind == "warm":
                servers[hooks] += servers_cpu_ms(engine) - before
            return found

        jobs = [(kind, hooks) for kind in ("warm", "cold", "direct") for hooks in (1, 8)]
        samples: dict[tuple[str, int], list[tuple[float, float, float]]] = {j: [] for j in jobs}
        for _ in range(args.warmup):
            for job in jobs:
                await measure(*job)
        servers = {hooks: 0.0 for hooks in engines}
        for i in range(args.reps):
            shift = i % len(jobs)  # rotate the order every round
            for job in jobs[shift:] + jobs[:shift]:
                samples[job].append(await measure(*job))
    finally:
        for engine in engines.values():
            await engine.close()
        shutil.rmtree(base, ignore_errors=True)

    med: dict[tuple[str, int], tuple[float, float, float]] = {}
    what = {"warm": "discover(), warm", "cold": "discover(), cold", "direct": "direct parallel spawn"}
    for job, values in samples.items():
        walls, childs, selfs = zip(*values, strict=True)
        hook_cpu = statistics.median(childs)
        if job[0] == "warm":
            hook_cpu = servers[job[1]] / len(values)  # a mean: the servers' CPU is counted in ticks
        med[job] = (statistics.median(walls), hook_cpu, statistics.median(selfs))
        print(
            f"{job[1]} hook(s), {what[job[0]]:21}: median {med[job][0]:6.1f} ms "
            f"(min {min(walls):6.1f}, max {max(walls):6.1f}) | "
            f"hook processes CPU {med[job][1]:6.1f} ms | this process CPU {med[job][2]:5.1f} ms"
        )
    ratios = {kind: med[(kind, 8)][0] / med[(kind, 1)][0] for kind in ("warm", "cold", "direct")}
    for kind in ("warm", "cold"):
        one, eight = med[(kind, 1)], med[(kind, 8)]
        # With every hook needing the CPU of the single one, 8 of them on `cores` cores take at least:
        floor = max(one[0], (eight[1] + eight[2]) / min(cores, 8))
        print(
            f"{kind}: CPU-bound floor for 8 hooks on {cores} core(s): {floor:.1f} ms (= {floor / one[0]:.2f}x the "
            f"1-hook time: 8 hooks need {eight[1] + eight[2]:.0f} ms of CPU, hooks and engine); one after "
            f"another they would take about {8 * one[0]:.0f} ms (8x)"
        )
    print(
        f"ratio 8/1: warm {ratios['warm']:.2f}x, cold {ratios['cold']:.2f}x, hooks spawned directly in parallel "
        f"{ratios['direct']:.2f}x; load average at end: {os.getloadavg()[0]:.2f}"
    )
    w1, w8 = med[("warm", 1)][0], med[("warm", 8)][0]
    verdict = "MEETS" if ratios["warm"] < TARGET_RATIO else "MISSES"
    print(
        f"discovery scaling: 8 hooks {w8:.0f} ms vs 1 hook {w1:.0f} ms warm, ratio {ratios['warm']:.2f}x "
        f"(target < {TARGET_RATIO:g}x; {verdict} target); before (warm starts off): {med[('cold', 8)][0]:.0f} ms "
        f"vs {med[('cold', 1)][0]:.0f} ms, {ratios['cold']:.2f}x; the hooks alone, spawned: {ratios['direct']:.2f}x"
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
