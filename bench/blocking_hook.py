#!/usr/bin/env python3
"""What a blocking hook costs opencode per tool call, against the hook's own warm run.

A hook that handles `before_tool` (or `after_tool`) is on opencode's path at every tool call: the
shim sends `/v1/opencode/tool-before` (or `tool-after`) with `wait: true` and opencode waits for the
answer. This script measures that wait from outside, over HTTP, on a warm `evolve serve` with the
example workspace (`evolve init`) plus `hooks/guard.py`, an hcp hook that handles the one stage and
allows every call (it reads its input and exits). The shim's three requests per call are sent as
in bench/shim_traffic.py (tool-before, tool-after, the finished response), one call every `--gap` ms;
only the awaited one is timed.

The reference, in the same run and interleaved call by call: the same hook with the same stdin (the
bytes the engine sent it, captured by the hook on its first run) forked from a ready interpreter of
the engine's own kind (`engine.warm.WarmStarts`, in this process: no engine, no HTTP, no journal),
timed from the request to fork until its exit and the end of its output. "Added" is the median of
the paired differences (engine wait - direct warm run); the target is at most +3 ms.

With `--baseline DIR` (a checkout of an earlier commit with its own .venv: `git worktree add --detach
DIR COMMIT`, then ./scripts/bootstrap.sh there) that checkout's engine gets the same calls too, on a
workspace its own `evolve init` made, interleaved with the others.

Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/blocking_hook.py [--calls 100] [--gap 40] [--stages before_tool,after_tool]
     [--baseline DIR] [--keep-shims]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/support is not an installed package

from shim_traffic import (  # noqa: E402  (bench/shim_traffic.py)
    SESSION,
    _describe,
    baseline_command,
    call_requests,
    connect,
    make_workspace,
    sent,
    wait_idle,
)

from engine.protocol.calls import Call  # noqa: E402
from engine.warm.starts import WarmStarts  # noqa: E402
from tests.support.engine_process import EngineProcess  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

TARGET_ADDED_MS = 3.0

# An hcp hook (it declares an hcp stage) that allows every call. On its first run of the stage it
# keeps its stdin where BENCH_CAPTURE says, so that the direct runs get the very bytes the engine sends.
GUARD = """#!/usr/bin/env python3
import json, os, sys

if sys.argv[1] == "discover":
    print(json.dumps({"name": "guard", "stages": ["@STAGE@"]}))
elif sys.argv[1] == "@STAGE@":
    data = sys.stdin.buffer.read()
    json.loads(data)
    capture = os.environ.get("BENCH_CAPTURE")
    if capture and not os.path.exists(capture):
        with open(capture, "wb") as f:
            f.write(data)
"""


@dataclass
class Series:
    waits: list[float] = field(default_factory=list)  # ms, one per call


class Sink:
    """A warm run's output, kept until both pipes end."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.open = 2
        self.done = asyncio.get_running_loop().create_future()

    def received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self.out += data

    def closed(self, fd: int) -> None:
        self.open -= 1
        if self.open == 0 and not self.done.done():
            self.done.set_result(None)


async def direct_run(
    warm: WarmStarts, hook: Path, stage: str, cwd: str, env: dict[str, str], stdin: bytes
) -> float:
    """One run of the hook forked from the ready interpreter, request to exit and end of output, in ms."""
    sink = Sink()
    t0 = time.perf_counter()
    proc = await warm.spawn([str(hook), stage], cwd=cwd, env=env, stdin=stdin, output=sink)
    if proc is None:
        raise RuntimeError("the direct run did not start warm")
    status = await proc.wait()
    await sink.done
    took = (time.perf_counter() - t0) * 1000
    proc.close()
    if status != 0:
        raise RuntimeError(f"the direct run exited {status}")
    return took


def awaited(calls: list[Call[Any]], stage: str) -> list[Call[Any]]:
    """The shim's requests for a call, the one for `stage` with `wait: true` as the shim sends it then."""
    path = "/v1/opencode/tool-before" if stage == "before_tool" else "/v1/opencode/tool-after"
    out = []
    for call in calls:
        if call.path == path:
            body = dict(call.body or {})
            body["wait"] = True
            if stage == "after_tool":
                body["args"] = {"filePath": "small.txt"}
            call = dataclasses.replace(call, body=body)
        out.append(call)
    return out


def engine_call(client: httpx.Client, step: int, stage: str) -> float:
    """The shim's requests for tool call `step`; the wait of the awaited one, in ms."""
    took = -1.0
    for call in awaited(call_requests(step, events=False), stage):
        wait = call.body is not None and call.body.get("wait") is True
        t0 = time.perf_counter()
        response = sent(client, call)
        if wait:
            took = (time.perf_counter() - t0) * 1000
        if response.status_code >= 300:
            raise RuntimeError(f"{call.path}: {response.status_code} {response.text}")
        if wait and "deny" in response.json():
            raise RuntimeError(f"the guard refused the call: {response.text}")
    return took


def guarded_engine(base: Path, env: dict[str, str], command: list[str], stage: str) -> EngineProcess:
    """An engine on the example workspace its checkout's `evolve init` makes, plus hooks/guard.py."""
    base.mkdir(parents=True)
    ws = make_workspace(base, env, command, tool_hook=False, cold=False)
    hook = ws / "hooks" / "guard.py"
    hook.write_text(GUARD.replace("@STAGE@", stage))
    hook.chmod(0o755)
    return EngineProcess(ws, env, base / "engine.log", command=command).start()


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 2 else float("nan")


async def bench_stage(
    args: argparse.Namespace, env: dict[str, str], base: Path, stage: str
) -> dict[str, float]:
    arms: dict[str, tuple[EngineProcess, httpx.Client]] = {}
    warm = WarmStarts(base / "scratch")
    (base / "scratch").mkdir(parents=True, exist_ok=True)
    try:
        capture = base / f"{stage}.stdin"
        this_env = {**env, "BENCH_CAPTURE": str(capture)}
        engine = guarded_engine(base / "now", this_env, [sys.executable, "-m", "engine"], stage)
        arms["now"] = (engine, connect(engine, base))
        if args.baseline is not None:
            command, extra = baseline_command(args.baseline.resolve())
            other = guarded_engine(base / "baseline", {**env, **extra}, command, stage)
            arms["baseline"] = (other, connect(other, base))
        step = 0
        for _engine, client in arms.values():  # warm-up: the servers started, the code paths run once
            for _ in range(args.warmup):
                engine_call(client, step, stage)
                step += 1
                time.sleep(args.gap / 1000)
            wait_idle(client)
        if not capture.exists():
            raise RuntimeError(f"the guard never ran {stage}: is it handled? {engine.log_tail()}")
        stdin = capture.read_bytes()
        hook = engine.workspace / "hooks" / "guard.py"
        hook_env = {**this_env, "OPENCODE_EVOLVE_WORKSPACE": str(engine.workspace)}
        cwd = str(engine.workspace)
        if not await warm.prepare(str(hook), cwd=cwd, env=hook_env):
            raise RuntimeError("no ready interpreter for the direct runs")
        for _ in range(args.warmup):
            await direct_run(warm, hook, stage, cwd, hook_env, stdin)
        series = {name: Series() for name in [*arms, "direct"]}
        names = list(series)
        for i in range(args.calls):  # rotating order, so that drift and the one before hit each alike
            for name in names[i % len(names) :] + names[: i % len(names)]:
                if name == "direct":
                    series[name].waits.append(await direct_run(warm, hook, stage, cwd, hook_env, stdin))
                else:
                    series[name].waits.append(engine_call(arms[name][1], step, stage))
                    step += 1
                time.sleep(args.gap / 1000)
    finally:
        await warm.close()
        for engine, client in arms.values():
            client.close()
            engine.stop()

    direct = series["direct"].waits
    print(f"\n{stage}: hooks/guard.py handles it and allows every call; {args.calls} calls per series")
    print(f"   {'series':<44} {'median':>8} {'p95':>8} {'added (paired median)':>22}")
    print(f"   {'the hook forked from a ready interpreter':<44} {med(direct):6.2f}ms {p95(direct):6.2f}ms")
    figures: dict[str, float] = {"direct": med(direct)}
    for name in arms:
        waits = series[name].waits
        added = med([w - d for w, d in zip(waits, direct, strict=True)])
        figures[name] = added
        label = "the plugin's wait, this engine" if name == "now" else "the plugin's wait, baseline engine"
        print(f"   {label:<44} {med(waits):6.2f}ms {p95(waits):6.2f}ms {added:+20.2f}ms")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100, help="calls per series (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="calls first, not measured (default 10)")
    parser.add_argument("--gap", type=float, default=40.0, help="ms between calls (default 40)")
    parser.add_argument("--stages", default="before_tool,after_tool", help="the hooks' stages (default both)")
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit with its own .venv")
    parser.add_argument("--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_EVOLVE", "EVOLVE_"))}
    python3 = "(PATH unchanged)" if args.keep_shims else drop_shims(env)
    env["PYTHONPATH"] = str(REPO)
    load0 = os.getloadavg()[0]
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-blocking-"))
    results: dict[str, dict[str, float]] = {}
    try:
        for stage in args.stages.split(","):
            results[stage] = asyncio.run(bench_stage(args, env, base / stage, stage))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load1 = os.getloadavg()[0]
    print(
        f"\nhooks' python3: {python3}; session {SESSION}; load average {load0:.2f} at the start, {load1:.2f} at the end"
    )
    if args.baseline is not None:
        print(f"baseline: {args.baseline} ({_describe(args.baseline)})")
    parts = []
    for stage, f in results.items():
        verdict = "meets" if f["now"] <= TARGET_ADDED_MS else "MISSES"
        text = f"{stage} {f['now']:+.1f} ms beyond the hook's own warm run ({f['direct']:.1f} ms) {verdict}"
        if "baseline" in f:
            text += f" (baseline {f['baseline']:+.1f} ms)"
        parts.append(text)
    print(
        f"a blocking hook, the plugin's wait per call: {'; '.join(parts)}; target <= +{TARGET_ADDED_MS:g} ms; "
        f"load average {load0:.2f}-{load1:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
