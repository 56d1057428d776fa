#!/usr/bin/env python3
"""A console of many agents under load: key-to-screen, memory, every run counted, the fleet view's
counts current. Printed, not asserted.

`--agents` real engines (`python -m engine serve`, EVOLVE_DEBUG_LOAD=1) on fresh example workspaces
in a temporary directory, the real console of all of them (`EvolveConsole([...]).run_test(size=
(160, 50))`, headless, in this process) on its fleet view, and one load generator (a separate
process) that POSTs `/v1/debug/load` to every engine in turn on a fixed schedule: `--rate` hook runs
per second in total (default 1,000: 50 per engine with 20), for `--seconds` (default 60). Each of those
runs goes through an engine's real journal and event stream (every 17th one fails).

- **Key-to-screen**: `down` and `up` in the fleet view, a press every 0.5 s; from just before
  `pilot.press` until the first frame handed to the (headless) driver (`App._display`) after the
  fleet table's cursor is on the row the key moved it to. Target: p95 under 50 ms.
- **Memory**: VmRSS of this process (the console and a little bench code; the engines and the
  generator are processes of their own). Target: under 150 MB.
- **Every run counted**: once the load ends, the runs the console received live, over every agent,
  against what the generator was told was recorded; and the journals' `load` runs (their SQLite
  files) against the same.
- **Counts current**: sampled at each key press during the load, how far the runs the console has
  applied lag the generator's schedule, in seconds of load; and after the last batch, how long until
  the fleet view's totals line shows every failed run the journals hold. Target: within 1 s.

The web console's key-to-frame is not measured here: in a browser the frame is drawn by xterm.js from
the bytes of the same console process, so this figure plus the WebSocket's round trip is what a
browser sees (tests/console/test_web.py checks that it works).

Run:  .venv/bin/python bench/fleet.py [--agents 20] [--rate 1000] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/support is not an installed package

from bench.console_load import cpu_s, percentile, rss_mb  # noqa: E402
from engine.protocol import calls  # noqa: E402
from tests.support.engine_process import EngineProcess  # noqa: E402

TARGET_P95_MS = 50.0
TARGET_RSS_MB = 150.0
TARGET_CURRENT_S = 1.0
FAILED_RE = re.compile(r"([\d,]+) failed runs")


def generate(engines: list[tuple[str, str]], rate: float, seconds: float, interval: float) -> None:
    """POST /v1/debug/load to each engine in turn, on a fixed schedule; print one JSON line."""
    per_post = max(1, round(rate * interval / len(engines)))
    rounds = max(1, round(seconds / interval))
    recorded, errors, late = 0, 0, 0.0
    load = calls.debug_load(per_post, 200)
    clients = [
        httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30)
        for url, token in engines
    ]
    print(json.dumps({"starting": True}), flush=True)
    start = time.monotonic()
    for i in range(rounds):
        pause = start + i * interval - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        else:
            late = max(late, -pause)
        for client in clients:
            try:
                resp = client.request(load.method, load.path, json=load.body)
                resp.raise_for_status()
                recorded += load.decode(resp.json()).recorded
            except (httpx.HTTPError, ValueError):
                errors += 1
    elapsed = time.monotonic() - start
    for client in clients:
        client.close()
    print(
        json.dumps({"recorded": recorded, "elapsed": elapsed, "errors": errors, "max_late_s": late}),
        flush=True,
    )


def load_runs(workspace: Path) -> tuple[int, int]:
    """(runs, failed) of the `load` stage, from the journal's SQLite file (read-only)."""
    conn = sqlite3.connect(f"file:{workspace / 'state' / 'journal.sqlite3'}?mode=ro", uri=True, timeout=10)
    try:
        n, failed = conn.execute("SELECT COUNT(*), SUM(ok = 0) FROM runs WHERE stage = 'load'").fetchone()
    finally:
        conn.close()
    return int(n), int(failed or 0)


async def measure(engines: list[EngineProcess], args: argparse.Namespace) -> dict[str, Any]:
    from evolve_console.app import EvolveConsole
    from evolve_console.fleet import FleetScreen

    app = EvolveConsole([(f"agent-{n:02d}", e.target) for n, e in enumerate(engines)], bell=False)
    frames: list[tuple[float, int | None]] = []  # (time, the fleet table's cursor row in that frame)
    original_display = app._display

    def display(screen: Any, renderable: Any) -> None:
        if renderable is not None:
            cursor = screen.table.cursor_row if isinstance(screen, FleetScreen) else None
            frames.append((time.perf_counter(), cursor))
            del frames[:-200]
        original_display(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    figures: dict[str, Any] = {"key_ms": [], "idle_ms": [], "lag_s": [], "timeouts": 0}
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 120
        while not all(a.first_load.is_set() for a in app.agents):
            assert time.monotonic() < deadline, "not every agent loaded in 120 s"
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        assert app.fleet is not None
        table = app.fleet.table
        figures["rss_start_mb"] = rss_mb()[0]
        max_rss = figures["rss_start_mb"]
        received0 = sum(a.model.events_seen["hook_run"] for a in app.agents)

        async def probe() -> float | None:
            key = "down" if table.cursor_row < len(app.agents) - 1 else "up"
            want = table.cursor_row + (1 if key == "down" else -1)
            t0 = time.perf_counter()
            await pilot.press(key)
            while time.perf_counter() - t0 < 30:
                drawn = [at for at, row in frames if at >= t0 and row == want]
                if drawn:
                    return (drawn[0] - t0) * 1000
                await asyncio.sleep(0.001)
            return None

        for _ in range(10):
            ms = await probe()
            if ms is not None:
                figures["idle_ms"].append(ms)
            await asyncio.sleep(0.3)

        spec = json.dumps(
            {
                "engines": [(e.url, e.token) for e in engines],
                "rate": args.rate,
                "seconds": args.seconds,
                "interval": 0.25,
            }
        )
        cpu0 = cpu_s()
        gen = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__).resolve()),
            "_generate",
            spec,
            stdout=asyncio.subprocess.PIPE,
            cwd=ROOT,
        )
        assert gen.stdout is not None
        await gen.stdout.readline()
        started = time.monotonic()
        done = asyncio.create_task(gen.communicate())
        while not done.done():
            await asyncio.sleep(0.5)
            ms = await probe()
            if ms is None:
                figures["timeouts"] += 1
            else:
                figures["key_ms"].append(ms)
            max_rss = max(max_rss, rss_mb()[0])
            received = sum(a.model.events_seen["hook_run"] for a in app.agents) - received0
            expected = min(args.rate * (time.monotonic() - started), args.rate * args.seconds)
            figures["lag_s"].append(max(expected - received, 0) / args.rate)
        out, _ = await done
        ended = time.monotonic()
        figures["console_cpu_s"] = cpu_s() - cpu0
        figures["generator"] = json.loads(out.decode().strip().splitlines()[-1])
        journals = await asyncio.to_thread(lambda: [load_runs(e.workspace) for e in engines])
        figures["journal_runs"] = sum(n for n, _ in journals)
        failed = sum(f for _, f in journals)
        settle_deadline = ended + 60
        while True:
            shown = FAILED_RE.search(str(app.fleet.totals.render()))
            if shown and int(shown[1].replace(",", "")) >= failed:
                figures["current_after_s"] = time.monotonic() - ended
                break
            if time.monotonic() > settle_deadline:
                figures["current_after_s"] = None
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.0)
        figures["received"] = sum(a.model.events_seen["hook_run"] for a in app.agents) - received0
        figures["failed_journal"] = failed
        figures["rss_max_mb"] = max(max_rss, rss_mb()[0])
        app.exit()
    return figures


def report(figures: dict[str, Any], args: argparse.Namespace) -> str:
    key, idle, lag = figures["key_ms"], figures["idle_ms"], figures["lag_s"]
    gen = figures["generator"]
    p95 = percentile(key, 0.95)
    lines = [
        f"agents {args.agents}; load {args.rate:,.0f} runs/s in total for {args.seconds:g} s "
        f"(generator: {gen['recorded']:,} recorded in {gen['elapsed']:.1f} s, {gen['errors']} errors, "
        f"at most {gen['max_late_s']:.2f} s late)",
        f"key-to-screen (fleet view, down/up): idle p50 {percentile(idle, 0.5):.1f} ms; under load "
        f"p50 {percentile(key, 0.5):.1f} ms, p95 {p95:.1f} ms, max {max(key, default=float('nan')):.1f} ms "
        f"({len(key)} presses, {figures['timeouts']} not drawn in 30 s)  target p95 < {TARGET_P95_MS:.0f} ms",
        f"console RSS: {figures['rss_start_mb']:.0f} MB at start, {figures['rss_max_mb']:.0f} MB at most  "
        f"target < {TARGET_RSS_MB:.0f} MB; console CPU {figures['console_cpu_s']:.1f} s during the load",
        f"runs: generated {gen['recorded']:,}, in the journals {figures['journal_runs']:,}, received live by the "
        f"console {figures['received']:,}",
        f"counts current: the console's runs behind the schedule by p50 {statistics.median(lag) if lag else 0:.2f} s, "
        f"max {max(lag, default=0):.2f} s during the load; every failed run ({figures['failed_journal']:,}) in the "
        f"fleet view's totals {figures['current_after_s'] if figures['current_after_s'] is None else round(figures['current_after_s'], 2)} s "
        f"after the last batch  target within {TARGET_CURRENT_S:.0f} s",
    ]
    misses = []
    if not p95 < TARGET_P95_MS:
        misses.append("key p95")
    if not figures["rss_max_mb"] < TARGET_RSS_MB:
        misses.append("RSS")
    if not (gen["recorded"] == figures["journal_runs"] == figures["received"]):
        misses.append("COUNT MISMATCH")
    if figures["current_after_s"] is None or figures["current_after_s"] > TARGET_CURRENT_S:
        misses.append("counts current")
    lines.append("MISSES: " + ", ".join(misses) if misses else "all targets met")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "_generate":
        spec = json.loads(sys.argv[2])
        generate([tuple(e) for e in spec["engines"]], spec["rate"], spec["seconds"], spec["interval"])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=20, help="engines (default 20)")
    parser.add_argument(
        "--rate", type=float, default=1000.0, help="hook runs per second in total (default 1000)"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load lasts (default 60)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-fleet-"))
    env = {
        **os.environ,
        "HOME": str(base / "home"),
        "EVOLVE_DEBUG_LOAD": "1",
        "EVOLVE_JOURNAL_MAX_RUNS": str(int(args.rate * args.seconds) + 100_000),
    }
    print(f"{args.agents} engines in {base}; load average {os.getloadavg()[0]:.2f}", flush=True)
    engines: list[EngineProcess] = []
    try:
        for n in range(args.agents):
            ws = base / f"ws-{n:02d}"
            subprocess.run(
                [sys.executable, "-m", "engine", "init", str(ws)],
                check=True,
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
            )
            engines.append(EngineProcess(ws, env, base / f"engine-{n:02d}.log", cwd=ROOT, own_session=True))
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda e: e.start(timeout=120), engines))
        figures = asyncio.run(measure(engines, args))
    finally:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda e: e.stop(wait=20), engines))
        shutil.rmtree(base, ignore_errors=True)
    print(report(figures, args))
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
