#!/usr/bin/env python3
"""The engine's instructions per tool call from the shim's traffic, counted by callgrind: a figure
the machine's load does not move.

bench/shim_traffic.py reads the engine's CPU time, which on a shared 2-core machine moves by a tenth
from block to block. This script runs the engine under valgrind's callgrind (instrumentation off
while it starts and warms up, on for the measured calls only), sends it shim_traffic's requests for
`--calls` tool calls (one tool-before with the session's history, one tool-after, one finished
response; the example workspace as `evolve init` makes it, whose hook observes each response) and
prints the instructions the engine executed per call: its own threads only (the hook runs in a
process forked by its warm-start server, which callgrind does not follow). With `--baseline DIR`
(a checkout of an earlier commit with its own .venv) that checkout's engine gets the same traffic
under callgrind at the same time, and the last line gives the ratio. `--only before|after|assistant`
sends one of the three requests per call (the others not at all), to see what each costs.

The engine runs ~50x slower under callgrind; the figures vary by a few percent from run to run (how
the journal's writer batches, how often the idle check polls); `--repeat` runs it again.

Needs valgrind (`callgrind_control` on PATH). Prints figures only; never asserts.

Run: .venv/bin/python bench/shim_instructions.py [--calls 40] [--baseline DIR] [--repeat 1] [--only ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/support is not an installed package

from shim_traffic import SESSION, call_requests, connect, make_workspace, sent, wait_idle  # noqa: E402

from tests.support.engine_process import EngineProcess  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

WARMUP = 10
STEP_S = 0.05  # between tool calls: the engine is idle again before the next (as at the model's pace)
ONLY = {"before": 0, "after": 1, "assistant": 2}


def measure(
    checkout: Path, python: str, base: Path, env: dict[str, str], calls: int, only: str | None
) -> float:
    """Instructions (millions) the engine of `checkout` executed per tool call."""
    base.mkdir(parents=True)
    env = {**env, "PYTHONPATH": str(checkout)}
    workspace = make_workspace(base, env, [python, "-m", "engine"], False, False)
    out = base / "callgrind.out"
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        python,
        "-m",
        "engine",
    ]
    engine = EngineProcess(workspace, env, base / "engine.log", command=command).start(timeout=600)
    try:
        client = connect(engine, base)
        client.timeout = 300
        for step in range(WARMUP):
            for call in call_requests(step, events=False):
                sent(client, call)
            time.sleep(STEP_S)
        wait_idle(client)
        subprocess.run(["callgrind_control", "-i", "on", str(engine.pid)], check=True, capture_output=True)
        for step in range(WARMUP, WARMUP + calls):
            requests = call_requests(step, events=False)
            for call in requests if only is None else [requests[ONLY[only]]]:
                response = sent(client, call)
                if response.status_code >= 300:
                    raise RuntimeError(f"{call.path}: {response.status_code} {response.text}")
            time.sleep(STEP_S)
        wait_idle(client)
        time.sleep(1)  # the journal's writer and the session's flush
        subprocess.run(["callgrind_control", "-i", "off", str(engine.pid)], check=True, capture_output=True)
        client.close()
    finally:
        engine.stop()
    total = 0
    for path in base.glob("callgrind.out*"):
        for line in path.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total / calls / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=40, help="measured tool calls (default 40)")
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit with its own .venv")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    parser.add_argument("--only", choices=sorted(ONLY), help="one of the three requests per call")
    parser.add_argument("--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH")
    args = parser.parse_args()
    if shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind (callgrind_control not found on PATH)")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_EVOLVE", "EVOLVE_"))}
    if not args.keep_shims:
        drop_shims(env)
    arms = {"now": (REPO, sys.executable)}
    if args.baseline is not None:
        checkout = args.baseline.resolve()
        python = checkout / ".venv" / "bin" / "python"
        if not python.exists():
            raise SystemExit(f"{python} is missing: run ./scripts/bootstrap.sh in {checkout} first")
        arms["baseline"] = (checkout, str(python))
    figures: dict[str, list[float]] = {name: [] for name in arms}
    root = Path(tempfile.mkdtemp(prefix="evolve-bench-instr-"))
    load0 = os.getloadavg()[0]
    errors: list[BaseException] = []
    try:
        for rep in range(args.repeat):

            def run(name: str, rep: int = rep) -> None:
                checkout, python = arms[name]
                try:
                    figures[name].append(
                        measure(checkout, python, root / f"{name}-{rep}", env, args.calls, args.only)
                    )
                except BaseException as exc:  # reported below, after the other arm
                    errors.append(exc)

            # Both arms at once: instruction counts do not depend on the other's load.
            threads = [threading.Thread(target=run, args=(name,)) for name in arms]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    what = f"only {args.only}" if args.only else "tool-before, tool-after and the finished response"
    print(
        f"{args.calls} tool calls ({what}; session {SESSION}), load average {load0:.2f}-{os.getloadavg()[0]:.2f}"
    )
    for name, values in figures.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"   {name:9} {min(values):.2f} M instructions per tool call (runs: {shown})")
    if "baseline" in figures:
        now, was = min(figures["now"]), min(figures["baseline"])
        print(
            f"\nthe engine's instructions per tool call: {now:.2f} M against the baseline's {was:.2f} M: {now / was:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
