#!/usr/bin/env python3
"""The operator console under a flood of hook runs: key latency, memory, and whether it loses count.

A real engine (`python -m engine serve`, started with EVOLVE_DEBUG_LOAD=1) on a fresh example
workspace in a temporary directory, the real console attached to it, and a load generator (a
separate process) that POSTs `/v1/debug/load {"count": N, "stdout_bytes": B}` on a fixed schedule:
by default 1,000 synthetic hook runs every 0.1 s (10,000 runs/s, a fleet of agents) with ~500-byte stdout lines, for
60 s. Each of those runs goes through the engine's real journal and event stream exactly as a real
hook run does (every 17th one is a failure).

Two ways to run the console (`--mode`):

* ``tmux`` (default when tmux is installed): the real command
  ``python -m engine console --attach URL --token T`` in a detached tmux session of 140x40.
  **Key latency** = from just before ``tmux send-keys`` until the first ``tmux capture-pane`` of
  the screen (a capture every ~10 ms: ~4 ms each plus a `--poll-ms` pause) that shows the key's
  effect. The keys, in turn: ``2`` (stage results) is seen when the stages table header
  (``hooks … failed … recover``) is on screen, ``1`` (hook runs) when the ``runs in the journal``
  status line is; ``up`` when the runs table's cursor (the one row drawn in the cursor's colours,
  found with ``capture-pane -e``) is one line higher than before the press, and ``g`` (follow)
  when it is on the table's last line again. ``--keys views`` presses only ``2`` and ``1``. This
  is what tmux, as the terminal, has drawn: key through the pty, the console's handling, its
  render, its output parsed by tmux. The polling adds up to one capture interval (printed). **Memory** = VmRSS of the console process
  (the pane's process, which execs python) from /proc, sampled every 0.5 s; VmHWM is its peak.
* ``inprocess``: ``EvolveConsole(target).run_test(size=(140, 40))`` in this process (headless).
  **Key latency** = from just before ``pilot.press(key)`` until the first compositor update handed
  to the (headless) driver, i.e. a call of ``App._display``, in which the newly active tab's table
  is among the visible widgets. **Memory** = VmRSS of this process (console plus a little bench
  code; the load generator is a separate process).

The inprocess mode presses only ``2`` and ``1``. A key is pressed every ``--key-interval`` s
(0.5 s): first ``--idle-probes`` presses with no load (a baseline; 200 runs are recorded before the
console starts, so the table has rows to move over), then presses throughout the load on a 0.5 s
schedule (at once when the previous one took longer). A press not on screen within `--key-timeout` s (30) is counted apart,
not as a sample. Target: p95 < 50 ms under load; the idle presses of the same run are its reference.

After the load, the engine's journal must hold every generated run: the journal's `stage = 'load'`
rows (read from its SQLite file) must equal what the generator was told was recorded, and
`/v1/runs` counts must equal the count before the load plus those plus any other runs (e.g. a
re-discovery) made meanwhile. Then the console's shown count ("N runs in the journal", read from
the screen) must equal the engine's count exactly; the bench waits up to `--settle-timeout` s for it,
and calls the missing runs lost once neither the console's count nor its CPU time (< 20% of a core)
has moved for `--stuck-after` s.

The journal keeps `journal_max_runs` runs (default 20,000), fewer than a 60 s load makes; the
engine is started with EVOLVE_JOURNAL_MAX_RUNS = generated + 100,000 (and EVOLVE_JOURNAL_MAX_BYTES
large enough for them) so that "keeps every event" is checkable (`--journal-max-runs` overrides it, e.g. to see what the console shows once the
journal trims).

Also printed: the CPU seconds the console and the engine used during the load, and how far the
console's live count ("received live" on screen) fell behind the generator's schedule, sampled at
the key presses of the runs tab. The key presses never move the focus off the tab bar, so every
press is a view switch the console should make.

Memory target: < 100 MB RSS for the console process. Prints figures; a missed target or a count
that does not match shows up as MISSES / MISMATCH in the final line (exit status 0 either way,
non-zero only if the bench itself failed).

Run:  .venv/bin/python bench/console_load.py [--rate 10000] [--seconds 60] [--mode tmux|inprocess]
      .venv/bin/python bench/console_load.py --seconds 10      # a short run
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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests/support is not an installed package

from engine.protocol import calls  # noqa: E402
from tests.support.engine_process import EngineProcess  # noqa: E402
from tests.support.terminal import Terminal  # noqa: E402

TARGET_P95_MS = 50.0
TARGET_RSS_MB = 100.0
COUNT_RE = re.compile(r"([\d,]+) runs in the journal · ([\d,]+) failed · ([\d,]+) received live")


# ---- the engine ---------------------------------------------------------------------------------


def journal_counts(engine: EngineProcess) -> dict[str, int]:
    """The journal's counts (runs, failed, ...) as /v1/runs reports them."""
    listed = calls.runs(limit=1)
    with engine.client() as c:
        resp = c.request(listed.method, listed.path, params=listed.query)
        resp.raise_for_status()
        return listed.decode(resp.json()).counts


def stable_counts(engine: EngineProcess, timeout: float = 30.0) -> dict[str, int]:
    """The journal's counts once they stop moving (the writer commits in batches)."""
    deadline = time.monotonic() + timeout
    last = journal_counts(engine)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = journal_counts(engine)
        if now == last:
            return now
        last = now
    return last


def journal_runs_by_stage(workspace: Path) -> dict[str, tuple[int, int]]:
    """{stage: (runs, failed)} straight from the journal's SQLite file (read-only)."""
    path = workspace / "state" / "journal.sqlite3"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    try:
        rows = conn.execute(
            "SELECT COALESCE(stage, ''), COUNT(*), SUM(ok = 0) FROM runs GROUP BY stage"
        ).fetchall()
    finally:
        conn.close()
    return {str(stage): (int(n), int(failed or 0)) for stage, n, failed in rows}


# ---- the load generator (a separate process) ---------------------------------------------------


def generate(url: str, token: str, rate: float, seconds: float, stdout_bytes: int, interval: float) -> None:
    """POST /v1/debug/load on a fixed schedule; print one JSON line with what was recorded."""
    per_batch = max(1, round(rate * interval))
    batches = max(1, round(seconds / interval))
    recorded = 0
    post_ms: list[float] = []
    late_ms = 0.0
    errors: list[str] = []
    load = calls.debug_load(per_batch, stdout_bytes)
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30) as c:
        print(json.dumps({"starting": True}), flush=True)
        start = time.monotonic()
        for i in range(batches):
            due = start + i * interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                late_ms = max(late_ms, -pause * 1000)
            t0 = time.perf_counter()
            try:
                resp = c.request(load.method, load.path, json=load.body)
                resp.raise_for_status()
                recorded += load.decode(resp.json()).recorded
            except (httpx.HTTPError, ValueError, TypeError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            post_ms.append((time.perf_counter() - t0) * 1000)
        elapsed = time.monotonic() - start
    print(
        json.dumps(
            {
                "recorded": recorded,
                "requests": batches,
                "per_batch": per_batch,
                "elapsed": elapsed,
                "post_p50_ms": statistics.median(post_ms),
                "post_max_ms": max(post_ms),
                "max_late_ms": late_ms,
                "errors": errors[:5],
                "error_count": len(errors),
            }
        ),
        flush=True,
    )


class LoadSchedule:
    """How many runs the generator should have sent by a given time (it posts on a fixed schedule)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.per_batch = max(1, round(args.rate * args.batch_interval))
        self.batches = max(1, round(args.seconds / args.batch_interval))
        self.interval = args.batch_interval
        self.started: float | None = None

    def start(self, at: float) -> None:
        self.started = at

    def expected(self, at: float) -> int:
        if self.started is None:
            return 0
        sent = min(self.batches, int((at - self.started) / self.interval) + 1)
        return sent * self.per_batch


def generator_argv(engine: EngineProcess, args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "_generate",
        json.dumps(
            {
                "url": engine.url,
                "token": engine.token,
                "rate": args.rate,
                "seconds": args.seconds,
                "stdout_bytes": args.stdout_bytes,
                "interval": args.batch_interval,
            }
        ),
    ]


# ---- results ------------------------------------------------------------------------------------


@dataclass
class Result:
    mode: str
    idle_ms: list[float] = field(default_factory=list)
    load_ms: list[float] = field(default_factory=list)
    by_key: dict[str, list[float]] = field(default_factory=dict)  # under load, per kind of key
    timeouts: int = 0
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_max_mb: float = 0.0
    hwm_mb: float = 0.0
    generator: dict[str, Any] = field(default_factory=dict)
    shown: tuple[int, int, int] | None = None  # runs, failed, received live, as the console shows
    settle_s: float | None = None
    first_shown: int | None = None  # the console's run count when the load had stopped
    last_change_s: float | None = None  # when the shown count last changed, s after the load stopped
    stuck: bool = False  # the shown count stopped changing before it equalled the engine's
    probe_note: str = ""
    console_cpu_s: float = 0.0
    engine_cpu_s: float = 0.0
    terminal_cpu_s: float | None = None  # the tmux server (tmux mode)
    load_wall_s: float = 0.0
    max_behind: int = 0  # generated so far (by the schedule) minus "received live" on screen


class Settle:
    """After the load: has the console's shown count caught up with the engine's?

    Done when it equals the engine's run count, when `--settle-timeout` s have passed, or when
    neither the count nor the console's CPU time (< 20% of a core) has moved for `--stuck-after` s:
    the missing runs are then lost, not late. Fills in the result's settle fields as it goes.
    """

    def __init__(self, result: Result, args: argparse.Namespace, engine_runs: int, cpu: float) -> None:
        self.result = result
        self.args = args
        self.engine_runs = engine_runs
        self.start = time.monotonic()
        self.cpu_at_change = cpu

    def done(self, shown: tuple[int, int, int] | None, cpu: float) -> bool:
        result, elapsed = self.result, time.monotonic() - self.start
        if shown != result.shown:
            result.shown, result.last_change_s = shown, elapsed
            self.cpu_at_change = cpu
            if result.first_shown is None and shown is not None:
                result.first_shown = shown[0]
        if result.shown and result.shown[0] == self.engine_runs:
            result.settle_s = elapsed
            return True
        if elapsed > self.args.settle_timeout:
            return True
        quiet = elapsed - (result.last_change_s or 0.0)
        if quiet > self.args.stuck_after and cpu - self.cpu_at_change < 0.2 * quiet:
            result.stuck = True
            return True
        return False


def rss_mb(pid: int | str = "self") -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    values = {"VmRSS": 0.0, "VmHWM": 0.0}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in values:
                values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def cpu_s(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process (all its threads) so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler(threading.Thread):
    def __init__(self, pid: int | str, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.max_mb = 0.0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.every):
            self.max_mb = max(self.max_mb, rss_mb(self.pid)[0])


def parse_shown(text: str) -> tuple[int, int, int] | None:
    m = COUNT_RE.search(text)
    if not m:
        return None
    runs, failed, live = (int(g.replace(",", "")) for g in m.groups())
    return runs, failed, live


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


# ---- tmux mode ----------------------------------------------------------------------------------


SGR = re.compile(r"\x1b\[[0-9;]*m")
LEADING_SGR = re.compile(r"^(?:\x1b\[[0-9;]*m)*")


def cursor_line(styled: str) -> tuple[int, int] | None:
    """(screen line of the runs table's cursor, screen line of its last row) in a styled capture.

    The table's lines lie between its header (``time stage hook session duration status``) and the
    status line; every row starts with the colours of its kind (odd, even stripe, cursor), and the
    cursor's are the ones that start exactly one line.
    """
    lines = styled.splitlines()
    plain = [SGR.sub("", line).split("▊")[0] for line in lines]  # the table, left of the detail pane
    try:
        header = next(i for i, t in enumerate(plain) if t.split()[:3] == ["time", "stage", "hook"])
        status = next(i for i, t in enumerate(plain) if "runs in the journal" in t)
    except StopIteration:
        return None
    rows = [i for i in range(header + 1, status) if plain[i].strip()]
    if len(rows) < 3:
        return None
    prefixes = [LEADING_SGR.match(lines[i]).group(0) for i in rows]  # type: ignore[union-attr]
    unique = [i for i, prefix in zip(rows, prefixes, strict=True) if prefixes.count(prefix) == 1]
    return (unique[0], rows[-1]) if len(unique) == 1 else None


def is_showing(screen: str, tab: str) -> bool:
    if tab == "stages":
        return any("hooks" in line and "recover" in line for line in screen.splitlines())
    return "runs in the journal" in screen


def run_tmux(engine: EngineProcess, args: argparse.Namespace, base: Path) -> Result:
    result = Result("tmux")
    tmux = Terminal(base, size=(140, 40), name="console")
    # `--token=…`: a token may begin with "-", which the parser would read as an option.
    command = f"exec {sys.executable} -m engine console --attach {engine.url} --token={engine.token}"
    try:
        tmux.start(command, cwd=ROOT)
        pid = tmux.pane_pid()
        tmux.wait_for(
            "the console connected",
            lambda s: "engine ● connected" in s and "runs in the journal" in s,
            30,
            0.05,
        )
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        if "console" not in cmdline:
            raise RuntimeError(f"pane process {pid} is not the console: {cmdline}")
        time.sleep(1.0)  # let the first load settle before taking the start figure
        result.rss_start_mb = rss_mb(pid)[0]
        sampler = RssSampler(pid)
        sampler.start()

        captures: list[float] = []
        state = {"tab": "runs"}
        schedule = LoadSchedule(args)

        def note_behind(screen: str) -> None:
            shown = parse_shown(screen)
            if shown is not None and schedule.started is not None:
                result.max_behind = max(result.max_behind, schedule.expected(time.monotonic()) - shown[2])

        # The keys pressed in turn: a view switch to stage results and back (the heaviest repaint),
        # then, in the runs table, the cursor up one row (leaving tail mode) and `g` (follow
        # again: the cursor jumps to the newest row at the bottom).
        keys = ["2", "1", "Up", "g"] if args.keys == "all" else ["2", "1"]
        state = {"next": 0}

        def effect_of(key: str) -> Callable[[], tuple[bool, str]]:
            if key in ("1", "2"):
                target = "runs" if key == "1" else "stages"

                def tab() -> tuple[bool, str]:
                    screen = tmux.screen()
                    return is_showing(screen, target), screen

                return tab
            # Under a heavy load the table may not be drawn yet after the switch back to the runs
            # view: wait for its cursor (untimed) before pressing, as a person would.
            before = cursor_line(tmux.screen(styled=True))
            deadline = time.monotonic() + args.key_timeout
            while before is None and time.monotonic() < deadline:
                time.sleep(args.poll_ms / 1000)
                before = cursor_line(tmux.screen(styled=True))
            if before is None:
                raise RuntimeError("the runs table's cursor is not on screen")

            def cursor() -> tuple[bool, str]:
                styled = tmux.screen(styled=True)
                now = cursor_line(styled)
                if now is None:
                    return False, styled
                line, bottom = now
                return (line == before[0] - 1) if key == "Up" else (line == bottom), SGR.sub("", styled)

            return cursor

        def probe() -> float | None:
            key = keys[state["next"] % len(keys)]
            state["next"] += 1
            check = effect_of(key)
            t0 = time.perf_counter()
            tmux.keys(key)
            while True:
                c0 = time.perf_counter()
                ok, screen = check()
                captures.append(time.perf_counter() - c0)
                now = time.perf_counter()
                if ok:
                    note_behind(screen)
                    ms = (now - t0) * 1000
                    result.by_key.setdefault(key, []).append(ms)
                    return ms
                if now - t0 > args.key_timeout:
                    # Not counted; wait until it shows, or the next press would find its effect already
                    # on screen and look instant.
                    print(f"key {key!r} not seen within {args.key_timeout:g} s", file=sys.stderr)
                    deadline = time.monotonic() + 120
                    while not check()[0] and time.monotonic() < deadline:
                        time.sleep(0.05)
                    return None
                time.sleep(args.poll_ms / 1000)

        for _ in range(args.idle_probes):
            ms = probe()
            if ms is None:
                result.timeouts += 1
            else:
                result.idle_ms.append(ms)
            time.sleep(args.key_interval)
        result.by_key.clear()  # from here on: under load
        state["next"] = 0

        server_pid = tmux.server_pid()
        cpu0 = cpu_s(pid), cpu_s(engine.pid), cpu_s(server_pid)
        gen = subprocess.Popen(generator_argv(engine, args), stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert gen.stdout is not None
        gen.stdout.readline()  # the generator is about to send its first batch
        schedule.start(time.monotonic())
        next_at = time.monotonic() + args.key_interval
        while gen.poll() is None:
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if gen.poll() is not None:
                break
            ms = probe()
            if ms is None:
                result.timeouts += 1
            else:
                result.load_ms.append(ms)
            next_at += args.key_interval
            next_at = max(next_at, time.monotonic())
        out, _ = gen.communicate()
        result.load_wall_s = time.monotonic() - (schedule.started or 0.0)
        result.console_cpu_s = cpu_s(pid) - cpu0[0]
        result.engine_cpu_s = cpu_s(engine.pid) - cpu0[1]
        result.terminal_cpu_s = cpu_s(server_pid) - cpu0[2]
        result.generator = json.loads(out.strip().splitlines()[-1])
        result.probe_note = (
            f"screen polled with tmux capture-pane, median {statistics.median(captures) * 1000:.1f} ms per capture"
            if captures
            else ""
        )
        tmux.keys("1")  # the count is read from the runs view
        with contextlib.suppress(AssertionError):  # a console still busy shows it later
            tmux.wait_for("the runs view", lambda s: is_showing(s, "runs"), 10, 0.05)

        settle = Settle(result, args, stable_counts(engine)["runs"], cpu_s(pid))
        while not settle.done(parse_shown(tmux.screen()), cpu_s(pid)):
            time.sleep(0.25)
        sampler.stopped.set()
        sampler.join()
        result.rss_end_mb, result.hwm_mb = rss_mb(pid)
        result.rss_max_mb = max(sampler.max_mb, result.rss_end_mb)
        tmux.keys("q")
        with contextlib.suppress(AssertionError):
            tmux.wait_for("the console gone", lambda s: "runs in the journal" not in s, 10, 0.05)
    finally:
        tmux.kill()
    return result


# ---- in-process mode ----------------------------------------------------------------------------


async def run_inprocess(engine: EngineProcess, args: argparse.Namespace) -> Result:

    from evolve_console.app import EvolveConsole
    from evolve_console.table import KeyedTable

    result = Result("inprocess")
    app = EvolveConsole(engine.target)
    frames: list[tuple[float, str | None]] = []  # (time, tab whose table is in that frame)
    tables = {"runs": "#runs-table", "stages": "#stages-table"}
    original_display = app._display

    def display(screen: Any, renderable: Any) -> None:
        if renderable is not None:
            shown = None
            with contextlib.suppress(Exception):
                visible = screen._compositor.visible_widgets
                for tab, selector in tables.items():
                    if app.query_one(selector, KeyedTable) in visible:
                        shown = tab
            frames.append((time.perf_counter(), shown))
            del frames[:-200]
        original_display(screen, renderable)

    app._display = display  # type: ignore[method-assign]

    def shown_counts() -> tuple[int, int, int] | None:
        return parse_shown(str(app.query_one("#runs-status").render()))

    async with app.run_test(size=(140, 40)) as pilot:
        await asyncio.wait_for(app.first_load.wait(), 30)
        await asyncio.sleep(1.0)
        result.rss_start_mb = rss_mb()[0]
        max_rss = result.rss_start_mb
        state = {"tab": "runs"}

        async def probe() -> float | None:
            target = "stages" if state["tab"] == "runs" else "runs"
            key = "2" if target == "stages" else "1"
            t0 = time.perf_counter()
            await pilot.press(key)
            state["tab"] = target
            while True:
                for at, shown in reversed(frames):
                    if at < t0:
                        break
                    if shown == target and app.shown == target:
                        first = min(a for a, s in frames if a >= t0 and s == target)
                        return (first - t0) * 1000
                if time.perf_counter() - t0 > args.key_timeout:
                    return None
                await asyncio.sleep(0.001)

        for _ in range(args.idle_probes):
            ms = await probe()
            if ms is None:
                result.timeouts += 1
            else:
                result.idle_ms.append(ms)
            await asyncio.sleep(args.key_interval)

        schedule = LoadSchedule(args)
        cpu0 = cpu_s(), cpu_s(engine.pid)
        gen = await asyncio.create_subprocess_exec(
            *generator_argv(engine, args), stdout=asyncio.subprocess.PIPE, cwd=ROOT
        )
        assert gen.stdout is not None
        await gen.stdout.readline()  # the generator is about to send its first batch
        schedule.start(time.monotonic())
        gen_out = asyncio.create_task(gen.communicate())
        next_at = time.monotonic() + args.key_interval
        while not gen_out.done():
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            if gen_out.done():
                break
            ms = await probe()
            if ms is None:
                result.timeouts += 1
            else:
                result.load_ms.append(ms)
            max_rss = max(max_rss, rss_mb()[0])
            shown = shown_counts()
            if shown is not None:
                result.max_behind = max(result.max_behind, schedule.expected(time.monotonic()) - shown[2])
            next_at = max(next_at + args.key_interval, time.monotonic())
        out, _ = await gen_out
        result.load_wall_s = time.monotonic() - (schedule.started or 0.0)
        result.console_cpu_s = cpu_s() - cpu0[0]
        result.engine_cpu_s = cpu_s(engine.pid) - cpu0[1]
        result.generator = json.loads(out.decode().strip().splitlines()[-1])
        result.probe_note = "frames seen through App._display (headless: no terminal output)"
        if state["tab"] != "runs":
            await pilot.press("1")

        engine_counts = await asyncio.to_thread(stable_counts, engine)
        settle = Settle(result, args, engine_counts["runs"], cpu_s())
        while not settle.done(shown_counts(), cpu_s()):
            await asyncio.sleep(0.25)
        result.rss_end_mb, result.hwm_mb = rss_mb()
        result.rss_max_mb = max(max_rss, result.rss_end_mb)
        app.exit()
    return result


# ---- main ---------------------------------------------------------------------------------------


def summarize(
    result: Result,
    args: argparse.Namespace,
    before: dict[str, int],
    after: dict[str, int],
    by_stage_before: dict[str, tuple[int, int]],
    by_stage_after: dict[str, tuple[int, int]],
) -> str:
    gen = result.generator
    print()
    print(f"console mode: {result.mode} ({result.probe_note})")
    print(
        f"load: {gen['recorded']:,} runs in {gen['requests']:,} POSTs of {gen['per_batch']} over "
        f"{gen['elapsed']:.1f} s = {gen['recorded'] / gen['elapsed']:,.0f} runs/s "
        f"(asked {args.rate:,.0f}/s for {args.seconds:g} s, stdout ~{args.stdout_bytes} B); POST median "
        f"{gen['post_p50_ms']:.1f} ms, max {gen['post_max_ms']:.0f} ms; generator at most "
        f"{gen['max_late_ms']:.0f} ms behind schedule; {gen['error_count']} failed POSTs"
    )
    for label, values in (("idle", result.idle_ms), ("under load", result.load_ms)):
        if values:
            print(
                f"key latency {label:>10}: n={len(values):>3}  p50 {percentile(values, 0.5):6.1f} ms  "
                f"p95 {percentile(values, 0.95):6.1f} ms  max {max(values):6.1f} ms"
            )
    names = {"1": "1 (view: runs)", "2": "2 (view: stages)", "Up": "up (cursor)", "g": "g (follow)"}
    for key, values in result.by_key.items():
        print(
            f"  under load, {names.get(key, key):>16}: n={len(values):>3}  p50 {percentile(values, 0.5):6.1f} ms  "
            f"p95 {percentile(values, 0.95):6.1f} ms  max {max(values):6.1f} ms"
        )
    if result.timeouts:
        print(f"key presses not seen on screen within {args.key_timeout:g} s: {result.timeouts}")
    if result.load_wall_s:
        print(
            f"CPU during the load ({result.load_wall_s:.1f} s): console {result.console_cpu_s:.1f} s "
            f"({100 * result.console_cpu_s / result.load_wall_s:.0f}% of a core), engine "
            f"{result.engine_cpu_s:.1f} s ({100 * result.engine_cpu_s / result.load_wall_s:.0f}%)"
            + (
                f", tmux server {result.terminal_cpu_s:.1f} s"
                f" ({100 * result.terminal_cpu_s / result.load_wall_s:.0f}%)"
                if result.terminal_cpu_s is not None
                else ""
            )
            + f"; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}"
        )
        print(
            f"console's live count behind the generator's schedule by up to ~{result.max_behind:,} runs "
            f"(~{result.max_behind / args.rate:.1f} s of load; sampled at each key press)"
        )
    print(
        f"console RSS: start {result.rss_start_mb:.1f} MB, end {result.rss_end_mb:.1f} MB, "
        f"max sampled {result.rss_max_mb:.1f} MB, peak (VmHWM) {result.hwm_mb:.1f} MB"
    )
    load_before, failed_before = by_stage_before.get("load", (0, 0))
    load_runs, load_failed = by_stage_after.get("load", (0, 0))
    load_runs, load_failed = load_runs - load_before, load_failed - failed_before
    others = sum(n for s, (n, _) in by_stage_after.items() if s != "load") - sum(
        n for s, (n, _) in by_stage_before.items() if s != "load"
    )
    journal_ok = load_runs == gen["recorded"] and after["runs"] == before["runs"] + gen["recorded"] + max(
        others, 0
    )
    expected_failed = sum(1 for i in range(gen["per_batch"]) if i % 17 == 0) * gen["requests"]
    print(
        f"journal: {before['runs']:,} runs before, {after['runs']:,} after; new stage 'load' rows "
        f"{load_runs:,} ({load_failed:,} failed, {expected_failed:,} expected) for {gen['recorded']:,} generated; "
        f"{others} other runs meanwhile -> {'every run kept' if journal_ok else 'RUNS MISSING'}"
    )
    shown = result.shown
    if shown is None:
        print("console count: NOT FOUND on screen")
        count_ok = False
    else:
        count_ok = shown[0] == after["runs"]
        verdict = "equal" if count_ok else f"MISMATCH by {shown[0] - after['runs']:+,}"
        settle = (
            f"after {result.settle_s:.1f} s"
            if result.settle_s is not None
            else (
                f"it showed {result.first_shown or 0:,} when the load stopped, last changed "
                f"{result.last_change_s or 0:.1f} s after, then "
                + (
                    f"stayed put, the console idle, for {args.stuck_after:g} s: "
                    + (
                        "runs LOST by the console"
                        if shown[0] < after["runs"]
                        else "the console counts runs the journal does not hold"
                    )
                    if result.stuck
                    else f"was still catching up at the {args.settle_timeout:g} s limit"
                )
            )
        )
        print(
            f"console shows: {shown[0]:,} runs in the journal, {shown[1]:,} failed, {shown[2]:,} received live; "
            f"engine: {after['runs']:,} runs, {after['failed_runs']:,} failed -> "
            f"{verdict} ({settle})"
        )
        if shown[1] != after["failed_runs"]:
            print(f"  failed count differs by {shown[1] - after['failed_runs']:+,}")
    p95 = percentile(result.load_ms, 0.95) if result.load_ms else float("inf")
    latency = "meets" if p95 < TARGET_P95_MS and not result.timeouts else "MISSES"
    memory = "meets" if result.rss_max_mb < TARGET_RSS_MB and result.hwm_mb < TARGET_RSS_MB else "MISSES"
    idle95 = percentile(result.idle_ms, 0.95) if result.idle_ms else float("nan")
    return (
        f"console_load at {args.rate:,.0f} runs/s: key p95 under load {p95:.0f} ms, idle {idle95:.0f} ms in the "
        f"same run ({p95 / idle95:.2f}x) ({latency} target < {TARGET_P95_MS:.0f} ms); "
        f"RSS max {max(result.rss_max_mb, result.hwm_mb):.0f} MB ({memory} target < {TARGET_RSS_MB:.0f} MB); "
        f"journal {'complete' if journal_ok else 'INCOMPLETE'}; "
        f"console count {'equal' if count_ok else 'MISMATCH'}; load average {os.getloadavg()[0]:.2f}"
    )


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "_generate":
        spec = json.loads(sys.argv[2])
        generate(**spec)
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=10000.0, help="hook runs per second (default 10000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load lasts (default 60)")
    parser.add_argument("--stdout-bytes", type=int, default=500, help="stdout size of each run (default 500)")
    parser.add_argument("--batch-interval", type=float, default=0.1, help="s between POSTs (default 0.1)")
    parser.add_argument("--key-interval", type=float, default=0.5, help="s between key presses (default 0.5)")
    parser.add_argument(
        "--key-timeout",
        type=float,
        default=30.0,
        help="s after which a key press not yet on screen is counted as a timeout, not a sample (default 30)",
    )
    parser.add_argument(
        "--poll-ms", type=float, default=5.0, help="tmux mode: pause between screen captures (default 5)"
    )
    parser.add_argument(
        "--idle-probes", type=int, default=10, help="key presses before the load (default 10)"
    )
    parser.add_argument(
        "--mode",
        choices=["tmux", "inprocess"],
        default="tmux" if shutil.which("tmux") else "inprocess",
        help="the real `evolve console` in tmux (default when tmux exists) or run_test in this process",
    )
    parser.add_argument(
        "--settle-timeout", type=float, default=60.0, help="s to wait for the console's count (default 60)"
    )
    parser.add_argument(
        "--stuck-after",
        type=float,
        default=10.0,
        help="s without any change of the console's count after which missing runs count as lost (default 10)",
    )
    parser.add_argument(
        "--journal-max-runs",
        type=int,
        default=None,
        help="EVOLVE_JOURNAL_MAX_RUNS for the engine (default: the runs generated + 100000)",
    )
    parser.add_argument(
        "--keys",
        choices=["all", "views"],
        default="all",
        help="tmux mode: press 2, 1, up, g in turn (all, default) or only the view keys 2, 1 (views)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace (path printed)")
    args = parser.parse_args()
    if args.mode == "tmux" and not shutil.which("tmux"):
        parser.error("tmux is not installed (apt-get install tmux), use --mode inprocess")

    base = Path(tempfile.mkdtemp(prefix="evolve-console-load-"))
    workspace = base / "workspace"
    subprocess.run(
        [sys.executable, "-m", "engine", "init", str(workspace)],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    max_runs = args.journal_max_runs or int(args.rate * args.seconds) + 100_000
    env = {
        **os.environ,
        "EVOLVE_DEBUG_LOAD": "1",
        "EVOLVE_JOURNAL_MAX_RUNS": str(max_runs),
        # and room for them: the default 256 MiB holds ~200,000 runs of this size, fewer than a flood of
        # 10,000 runs/s for 60 s makes
        "EVOLVE_JOURNAL_MAX_BYTES": str(max(256 << 20, max_runs * (args.stdout_bytes + 1024) * 2)),
        "OPENCODE_EVOLVE_WORKSPACE": str(workspace),
    }
    print(
        f"workspace {workspace}; load {args.rate:,.0f} runs/s for {args.seconds:g} s "
        f"({args.stdout_bytes} B stdout); console mode {args.mode}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    engine = EngineProcess(workspace, env, workspace / "bench-engine.log", cwd=ROOT, own_session=True)
    try:
        engine.start(timeout=60)
        with engine.client() as c:  # some history, so that the cursor has rows to move over at idle
            history = calls.debug_load(200, args.stdout_bytes)
            c.request(history.method, history.path, json=history.body).raise_for_status()
        before = stable_counts(engine)
        by_stage_before = journal_runs_by_stage(workspace)
        if args.mode == "tmux":
            result = run_tmux(engine, args, base)
        else:
            result = asyncio.run(run_inprocess(engine, args))
        after = stable_counts(engine)
        by_stage_after = journal_runs_by_stage(workspace)
        final = summarize(result, args, before, after, by_stage_before, by_stage_after)
    finally:
        engine.stop(wait=20)
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
