#!/usr/bin/env python3
"""A hook run through the engine versus spawning the same hook directly, warm and cold.

For each hook kind (python3, sh) and hook count (1, 4) this builds a temporary workspace (the
example prompts and config, plus N tiny hooks), starts a real Engine with its journal enabled
(as in production), and then, after a warm-up, measures interleaved iterations of

  (a) direct: spawn each hook with asyncio (argv = stage, the same JSON document on stdin,
      cwd = workspace, stdout read to EOF), one after the other, as the engine does;
  (b) warm (python3 hooks): `await engine.stages.dispatch("mutate_request", ctx, session=...)` with
      hook_warm_start on: every hook run forked from a ready interpreter (engine/warm/starts.py);
  (c) cold: the same dispatch on the same engine with hook_warm_start off: every hook spawned
      (what the engine did before warm starts, and what it does for sh hooks);
  (d) for sh hooks (--setsid): like (a) but with start_new_session=True, the cost of a new session
      per hook (engine/hooks/runner.py gives each hook its own process group, not its own session).

The order of the measurements rotates every iteration, so drift and noise hit all alike. Between
iterations, outside the timed sections, the engine is allowed to settle (its background commit
check and journal writes finish), so that one measurement's background work does not land in the
next one; the time that background work takes is reported separately.

CPU per hook run: of this process (the engine, its journal thread) during the dispatch, plus the
hook processes: reaped children (RUSAGE_CHILDREN) for cold and direct runs, and for warm runs the
ready interpreters' own CPU and their reaped children's (/proc/<pid>/stat, summed over the case:
clock ticks are 10 ms); for warm runs the line also splits it into the engine's part and that of the
ready interpreter and its child. Ratio = median warm dispatch / median direct spawns.
Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/dispatch_overhead.py [--n 200] [--warmup 10] [--kinds python,sh]
     [--setsid sh] [--max-seconds 105]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from engine.hooks.dispatch import build_input  # noqa: E402
from engine.runtime import Engine  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

TARGET_MS = 5.0  # a trivial python3 hook through the engine: median wall, and CPU per run
TARGET_RATIO = 1 / 3  # of spawning it directly
MIN_N = 30  # iterations measured even when a case's share of --max-seconds has run out
EXAMPLE = REPO / "engine" / "example"

HOOKS = {
    "python": (
        "#!/usr/bin/env python3\n"
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        "if sys.argv[1:] == ['discover']:\n"
        "    print(json.dumps({'name': 'h{i}'}))\n"
        "else:\n"
        "    print(json.dumps({'system': ['from h{i}']}))\n"
    ),
    "sh": (
        "#!/bin/sh\n"
        "cat >/dev/null\n"
        'if [ "$1" = discover ]; then echo \'{"name": "h{i}"}\'; '
        'else echo \'{"system": ["from h{i}"]}\'; fi\n'
    ),
}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def hook_env(keep_shims: bool = False) -> tuple[dict[str, str], str]:
    """The environment for hooks (direct and engine alike): PATH without version-manager shims, and
    the python3 the hooks get (see drop_shims)."""
    env = dict(os.environ)
    if keep_shims:
        return env, shutil.which("python3", path=env.get("PATH")) or "?"
    return env, drop_shims(env)


def make_workspace(base: Path, kind: str, count: int) -> Path:
    root = base / f"ws-{kind}-{count}"
    (root / "hooks").mkdir(parents=True)
    shutil.copytree(EXAMPLE / "prompts", root / "prompts")
    shutil.copytree(EXAMPLE / "config", root / "config")
    for i in range(1, count + 1):
        path = root / "hooks" / f"h{i}.{'py' if kind == 'python' else 'sh'}"
        path.write_text(HOOKS[kind].replace("{i}", str(i)))
        path.chmod(0o755)
    return root


async def run_direct(
    paths: list[Path], stage: str, stdin: bytes, cwd: Path, env: dict[str, str], new_session: bool = False
) -> None:
    for path in paths:
        proc = await asyncio.create_subprocess_exec(
            str(path),
            stage,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd),
            env=env,
            start_new_session=new_session,
        )
        out, _err = await proc.communicate(stdin)
        if proc.returncode != 0 or not out.strip():
            raise RuntimeError(f"direct run of {path.name} failed: exit {proc.returncode}")
        json.loads(out.splitlines()[0])


async def settle(engine: Engine, deadline_s: float = 30.0) -> float:
    """Wait (polling) until the engine's background work is done; returns how long that took."""
    started = time.perf_counter()
    limit = started + deadline_s
    while engine.activity.busy and time.perf_counter() < limit:
        await asyncio.sleep(0.001)
    waited = time.perf_counter() - started
    if engine.journal is not None:
        await asyncio.to_thread(engine.journal.flush)
    return waited * 1000


async def bench_case(
    base: Path,
    kind: str,
    count: int,
    n: int,
    warmup: int,
    env: dict[str, str],
    setsid: bool,
    deadline: float,
) -> dict[str, float]:
    root = make_workspace(base, kind, count)
    engine = Engine(root, env=env)  # journal enabled, as in production
    await engine.start()
    warm_config = replace(engine.config, hook_warm_start=True)
    cold_config = replace(engine.config, hook_warm_start=False)
    try:
        failures = [r.file.name for r in engine.registry.registrations.values() if r.problems]
        if len(engine.registry.hooks) != count or failures:
            raise RuntimeError(f"discovery went wrong: hooks={engine.registry.hooks} problems={failures}")
        session = "ses_bench"
        context = {"session": {"id": session}, "system": ["You are a benchmark."]}
        stage = "mutate_request"
        # The same stdin document the engine builds (prompts read once here; the engine reads them
        # on every dispatch, which is part of its overhead).
        payload = build_input(
            stage, engine.workspace.read_prompts(), context, engine.sessions.history(session)
        )
        stdin = json.dumps(payload, ensure_ascii=False).encode()
        paths = [h.path for h in engine.registry.hooks]
        if kind == "python" and engine.warm is not None:
            for path in paths:
                if not await engine.warm.prepare(str(path), cwd=str(root), env=env):
                    raise RuntimeError(f"no warm start for {path.name} (see the log)")

        kinds = ["direct", "warm", "cold"] if kind == "python" else ["direct", "cold"]
        if setsid:
            kinds.append("setsid")
        samples: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, list[float]] = {k: [] for k in kinds}
        background: list[float] = []
        servers = {"cpu": 0.0, "runs": 0.0}

        async def measure(which: str) -> None:
            own0, children0 = time.process_time(), children_cpu_ms()
            servers0 = servers_cpu_ms(engine) if which == "warm" else 0.0
            warm_runs0 = engine.warm.warm_runs if engine.warm is not None else 0
            t0 = time.perf_counter()
            if which in ("warm", "cold"):
                engine.config = warm_config if which == "warm" else cold_config
                result = await engine.stages.dispatch(stage, context, session=session)
                elapsed = (time.perf_counter() - t0) * 1000
                if result.failed or len(result.merged.get("system", [])) != count:
                    raise RuntimeError(f"dispatch failed: {result.failed} {result.merged}")
            else:
                await run_direct(paths, stage, stdin, root, env, new_session=which == "setsid")
                elapsed = (time.perf_counter() - t0) * 1000
            spent = (time.process_time() - own0) * 1000 + children_cpu_ms() - children0
            if which == "warm":
                assert engine.warm is not None
                if engine.warm.warm_runs != warm_runs0 + count:
                    raise RuntimeError("a hook run of the warm dispatch started cold (see the log)")
                servers["cpu"] += servers_cpu_ms(engine) - servers0
                servers["runs"] += count
            samples[which].append(elapsed)
            cpu[which].append(spent / count)
            if which in ("warm", "cold"):
                background.append(await settle(engine))

        for _ in range(warmup):
            for which in kinds:
                await measure(which)
        for which in kinds:
            samples[which].clear()
            cpu[which].clear()
        background.clear()
        servers.update(cpu=0.0, runs=0.0)
        for i in range(n):
            if i >= MIN_N and time.perf_counter() > deadline:
                break  # out of this case's share of --max-seconds; `n` in the output says so
            shift = i % len(kinds)  # rotate the order every iteration
            for which in kinds[shift:] + kinds[:shift]:
                await measure(which)

        direct, cold = samples["direct"], samples["cold"]
        diffs = [(b - a) / count for a, b in zip(direct, cold, strict=True)]
        out = {
            "n": len(direct),
            "direct_med": statistics.median(direct),
            "direct_p95": pct(direct, 0.95),
            "direct_cpu": statistics.mean(cpu["direct"]),
            "cold_med": statistics.median(cold),
            "cold_p95": pct(cold, 0.95),
            "cold_cpu": statistics.mean(cpu["cold"]),
            "overhead_med": statistics.median(diffs),
            "overhead_p95": pct(diffs, 0.95),
            "background_med": statistics.median(background),
        }
        if "warm" in samples:
            warm = samples["warm"]
            engine_cpu = statistics.mean(cpu["warm"])
            servers_cpu = servers["cpu"] / max(servers["runs"], 1)
            out.update(
                warm_med=statistics.median(warm),
                warm_p95=pct(warm, 0.95),
                warm_cpu=engine_cpu + servers_cpu,
                warm_engine_cpu=engine_cpu,
                warm_servers_cpu=servers_cpu,
                warm_ratio=statistics.median(warm) / statistics.median(direct),
                cold_ratio=statistics.median(cold) / statistics.median(direct),
            )
        if setsid:
            ss = samples["setsid"]
            out["setsid_med"] = statistics.median(ss)
            out["setsid_cost_med"] = statistics.median(
                [(c - a) / count for a, c in zip(direct, ss, strict=True)]
            )
            out["rest_med"] = statistics.median([(b - c) / count for c, b in zip(ss, cold, strict=True)])
        return out
    finally:
        await engine.close()


async def main_async(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-dispatch-"))
    results: dict[tuple[str, int], dict[str, float]] = {}
    started = time.perf_counter()
    env, python3 = hook_env(args.keep_shims)
    print(
        f"hooks' python3: {python3}; sh: {shutil.which('sh', path=env['PATH'])}; "
        f"load average at start: {os.getloadavg()[0]:.2f}"
    )
    try:
        cases = [(kind, count) for kind in args.kinds for count in (1, 4)]
        # Rough cost of one iteration of each case in ms (a cold python3 start ~30 ms, twice: direct
        # and cold dispatch; a warm one ~5 ms; sh ~4 ms), to share --max-seconds out between cases.
        weight = {
            c: 10.0
            + c[1]
            * (
                (65.0 if c[0] == "python" else 8.0)
                + (c[0] in args.setsid) * (30.0 if c[0] == "python" else 4.0)
            )
            for c in cases
        }
        budget_end = started + args.max_seconds
        for index, (kind, count) in enumerate(cases):
            now = time.perf_counter()
            share = weight[(kind, count)] / sum(weight[c] for c in cases[index:])
            deadline = now + max(budget_end - now, 0) * share
            r = await bench_case(base, kind, count, args.n, args.warmup, env, kind in args.setsid, deadline)
            results[(kind, count)] = r
            line = (
                f"{kind:6} hooks={count}  n={r['n']:.0f}  direct median {r['direct_med']:7.2f} ms "
                f"(p95 {r['direct_p95']:7.2f}, CPU/run {r['direct_cpu']:5.2f}) | "
            )
            if "warm_med" in r:
                line += (
                    f"warm dispatch median {r['warm_med']:6.2f} ms (p95 {r['warm_p95']:6.2f}, CPU/run "
                    f"{r['warm_cpu']:5.2f}: engine {r['warm_engine_cpu']:4.2f}, ready interpreter and hook "
                    f"{r['warm_servers_cpu']:4.2f}; {r['warm_ratio']:.2f}x direct) | "
                )
            line += (
                f"cold dispatch median {r['cold_med']:7.2f} ms (p95 {r['cold_p95']:7.2f}, CPU/run "
                f"{r['cold_cpu']:5.2f}; overhead/run {r['overhead_med']:5.2f} ms) | "
                f"background settle median {r['background_med']:6.2f} ms"
            )
            print(line, flush=True)
            if "setsid_med" in r:
                print(
                    f"{'':6} hooks={count}  direct with start_new_session=True median "
                    f"{r['setsid_med']:7.2f} ms: per hook run, the new session costs "
                    f"{r['setsid_cost_med']:5.2f} ms and the rest of the engine {r['rest_med']:5.2f} ms "
                    "(medians of paired differences)",
                    flush=True,
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"(total bench time {time.perf_counter() - started:.1f} s; "
        f"load average at end: {os.getloadavg()[0]:.2f})"
    )
    if "python" not in args.kinds:
        one, four = results[(args.kinds[0], 1)], results[(args.kinds[0], 4)]
        print(
            f"dispatch: {args.kinds[0]} hooks, cold: engine overhead {one['overhead_med']:.1f} ms per run "
            f"with 1 hook, {four['overhead_med']:.1f} ms with 4 (no warm starts for them)"
        )
        return 0
    # The headline: one trivial python3 hook, warm; the same with warm starts off is the "before".
    one, four = results[("python", 1)], results[("python", 4)]
    meets = one["warm_med"] < TARGET_MS and one["warm_cpu"] < TARGET_MS and one["warm_ratio"] <= TARGET_RATIO
    sh = f"; sh hooks (cold): {results[('sh', 1)]['cold_med']:.1f} ms" if ("sh", 1) in results else ""
    print(
        f"dispatch: a trivial python3 hook through the engine, warm: median {one['warm_med']:.1f} ms "
        f"(target < {TARGET_MS:g}), CPU {one['warm_cpu']:.1f} ms (target < {TARGET_MS:g}), "
        f"{one['warm_ratio']:.2f}x spawning it directly (target <= {TARGET_RATIO:.2f}x; 4 hooks: "
        f"{four['warm_med'] / 4:.1f} ms, {four['warm_cpu']:.1f} ms CPU per run): "
        f"{'MEETS' if meets else 'MISSES'} target; before (warm starts off): median {one['cold_med']:.1f} ms, "
        f"CPU {one['cold_cpu']:.1f} ms, {one['cold_ratio']:.2f}x{sh}"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200, help="measured iterations per case (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up iterations per case (default 10)")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=105.0,
        help="time budget for all cases; on a busy machine a case stops before --n iterations when "
        "its share runs out, and prints the n it reached (default 105)",
    )
    parser.add_argument(
        "--kinds", default="python,sh", help="hook kinds, comma-separated: python,sh (default both)"
    )
    parser.add_argument(
        "--setsid",
        default="sh",
        help="hook kinds for which also to time direct spawns with start_new_session=True, the way "
        "the engine spawns hooks (default sh; 'python,sh' for both, '' for none; python adds ~40 s)",
    )
    parser.add_argument(
        "--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH (slow python3 starts)"
    )
    args = parser.parse_args()
    args.kinds = [k for k in args.kinds.split(",") if k]
    args.setsid = [k for k in args.setsid.split(",") if k]
    unknown = [k for k in args.kinds if k not in HOOKS]
    if unknown:
        parser.error(f"unknown hook kind(s): {unknown}")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
