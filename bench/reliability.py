#!/usr/bin/env python3
"""The engine's bounds, measured: the journal's size under a flood of large runs, what storing large
values once saves, what a `kill -9` loses of what the engine had acknowledged, and what one
request of the largest accepted size costs in memory.

1. **Journal size** (a `Journal` in this process, the engine's defaults: `journal_max_runs` 20,000,
   `journal_max_bytes` 256 MiB): 200,000 hook runs whose inputs are 20 KB each and all different
   (the worst case: nothing to share). The size of `journal.sqlite3` and of its `-wal` is sampled
   after every 1,000 runs; printed are the largest seen and the size at the end, the rows kept, the
   rows removed to stay under the limit, and the writing rate.
2. **Stored once**: 20,000 runs in 2,000 stages of 10 hooks, each stage with its session's 100 KB
   history (a new one every stage), as the engine records them: the database's size, against the
   bytes the same rows would take with every run's input inline.
3. **Crash window** (a real engine, `evolve serve`, killed with SIGKILL at a random moment, 5 times
   per load, restarted each time): the hook runs the engine had answered for (`/v1/debug/load`'s
   answers, under a flood of 20 KB runs from two clients) or streamed (`hook_run` events of real
   stage dispatches, one client dispatching back to back) and that are not in the journal after
   the restart. Printed: the most lost in one kill, and how long before the kill the oldest lost
   run had been acknowledged (the window that can be lost).
4. **Request memory** (the same engine): its peak resident memory (VmHWM) before and after one
   request of `max_request_bytes` (32 MiB: a history of that size to `/v1/opencode/system`), then
   four at once; and that one byte more is a 413.
5. **A full disk** (a real one: a 16 MiB tmpfs; needs root, skipped otherwise): two clients flood
   `/v1/debug/load` while the disk fills; printed: the runs acknowledged, those refused (503), and
   those in the journal once the disk has room again (kept = acknowledged), and how long the engine
   took to take work again.
6. **Sessions** (a real engine): `--sessions` sessions (6,000) with histories of `--messages`
   messages (200) of 100 bytes, all different, sent as opencode sends them from four clients:
   the histories missing from the journal after a restart, and the engine's resident memory before
   and after the restart. Then the same sessions sent to an engine with `journal_max_bytes` 64 MiB
   that holds 20,000 runs of 1 KB: the largest the journal file got, and the runs still kept.
7. **Copies** (a real engine): 20 replays asked for at once of a workspace of 20 MB (its data
   files), `max_replays` at its default: the most bytes of replay copies in the temporary directory
   at once (sampled every 50 ms), and how long the 20 took.
8. **Diffs and files** (a real engine): a committed file of 200 MB, its diff and the file asked for
   once, then four diffs at once: the time, and the engine's peak resident memory (VmHWM) before and
   after.
9. **Processes** (a real engine): `--kills` times, a cold hook that starts a child in a session of
   its own and hangs, the engine killed with SIGKILL during it and started again: the processes of
   the dead engine's runs still alive once the new one answers.

Run:  .venv/bin/python bench/reliability.py [--runs 200000] [--kills 5] [--sessions 6000]
Takes ~6-10 minutes on 2 cores. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.journal.store import MAX_PENDING_ROWS, Journal  # noqa: E402
from engine.protocol import calls  # noqa: E402
from engine.protocol.records import HookRun, SystemRequest, new_id  # noqa: E402
from engine.workspace.config import Config  # noqa: E402
from tests.support.engine_process import EngineProcess  # noqa: E402
from tests.support.environment import REPO, isolated_env  # noqa: E402

MIB = 1024 * 1024


def sizes(path: Path) -> tuple[int, int]:
    def size(p: Path) -> int:
        try:
            return p.stat().st_size
        except FileNotFoundError:
            return 0

    return size(path), size(path.with_name(path.name + "-wal"))


# ---- 1. journal size under 200,000 runs of 20 KB ---------------------------------------------------


def journal_size(tmp: Path, runs: int, input_bytes: int) -> None:
    config = Config()
    path = tmp / "size" / "journal.sqlite3"
    print(
        f"journal size: {runs:,} runs with {input_bytes // 1000} KB inputs, all different; "
        f"journal_max_runs {config.journal_max_runs:,}, journal_max_bytes {config.journal_max_bytes // MIB} MiB"
    )
    filler = "x" * input_bytes
    peak_file = peak_wal = peak_both = 0
    started = time.perf_counter()
    with Journal(path, config.journal_max_runs, config.journal_max_bytes) as journal:
        now = time.time()
        for i in range(runs):
            journal.record_run(
                HookRun(
                    id=f"run_{i:08d}",
                    stage="mutate_request",
                    hook="notes.py",
                    started_at=now + i / 1000,
                    input={"hook": "mutate_request", "history": [f"{i}:{filler}"]},
                    stdout_lines=['{"system": ["..."]}'],
                    result={"system": ["..."]},
                )
            )
            if i % 1000 == 999:
                journal.flush()
                file, wal = sizes(path)
                peak_file, peak_wal, peak_both = (
                    max(peak_file, file),
                    max(peak_wal, wal),
                    max(peak_both, file + wal),
                )
            if i % 50_000 == 49_999:
                print(f"  ... {i + 1:,} runs, {time.perf_counter() - started:.0f} s", flush=True)
        journal.flush()
        elapsed = time.perf_counter() - started
        kept = journal.counts()["runs"]
        trimmed = journal.trimmed_rows
    file, wal = sizes(path)
    print(f"  at the end: journal.sqlite3 {file / MIB:.1f} MiB, -wal {wal / MIB:.1f} MiB; {kept:,} runs kept")
    print(
        f"  largest seen (every 1,000 runs): journal.sqlite3 {peak_file / MIB:.1f} MiB, -wal {peak_wal / MIB:.1f} MiB, "
        f"both {peak_both / MIB:.1f} MiB (limit {config.journal_max_bytes / MIB:.0f} MiB)"
    )
    print(
        f"  {trimmed:,} rows removed for the byte limit; {runs / elapsed:,.0f} runs/s written "
        f"({runs * input_bytes / elapsed / MIB:.0f} MiB/s of input)"
    )
    RESULTS["journal_file_mib"] = peak_file / MIB
    RESULTS["journal_wal_mib"] = peak_wal / MIB


# ---- 2. stored once --------------------------------------------------------------------------------


def stored_once(tmp: Path, stages: int = 2000, hooks: int = 10, history_bytes: int = 100_000) -> None:
    path = tmp / "once" / "journal.sqlite3"
    inline = 0
    prompts = {"preamble": "p" * 3000, "chat": "c" * 3000}
    with Journal(path, max_runs=1_000_000, max_bytes=64 * 1024 * MIB) as journal:
        now = time.time()
        for s in range(stages):
            history = [{"role": "user", "parts": [{"type": "text", "text": f"{s} " + "h" * history_bytes}]}]
            payload = {
                "hook": "mutate_request",
                "prompts": prompts,
                "session": {"id": "ses_1"},
                "history": history,
            }
            for h in range(hooks):
                run = HookRun(
                    id=new_id("run"),
                    stage="mutate_request",
                    hook=f"h{h}.py",
                    started_at=now + s / 100,
                    input=payload,
                    result={"system": ["ok"]},
                )
                journal.record_run(run)
                inline += len(json.dumps(run.to_dict()))
        journal.flush()
    file, wal = sizes(path)
    print(
        f"stored once: {stages * hooks:,} runs in {stages:,} stages of {hooks} hooks, each stage with a new "
        f"{history_bytes // 1000} KB history: journal {(file + wal) / MIB:.1f} MiB; the same runs inline "
        f"{inline / MIB:.1f} MiB ({inline / max(file + wal, 1):.1f}x)"
    )
    RESULTS["stored_once_ratio"] = inline / max(file + wal, 1)


# ---- 3. crash window -------------------------------------------------------------------------------


def start_engine(ws: Path, home: Path, log: Path) -> EngineProcess:
    env = isolated_env(home, PYTHONPATH=str(REPO), EVOLVE_DEBUG_LOAD="1", EVOLVE_JOURNAL_MAX_RUNS="10000000")
    env["EVOLVE_JOURNAL_MAX_BYTES"] = str(64 * 1024 * MIB)
    return EngineProcess(ws, env, log).start()


def journal_ids(ws: Path) -> set[str]:
    with sqlite3.connect(f"file:{ws / 'state' / 'journal.sqlite3'}?mode=ro", uri=True) as db:
        return {row[0] for row in db.execute("SELECT id FROM runs")}


def flood_kill(tmp: Path, kills: int) -> None:
    """Two clients flood /v1/debug/load with 20 KB runs; the engine is killed at a random moment."""
    ws = tmp / "flood"
    (ws / "hooks").mkdir(parents=True)
    lost_counts: list[int] = []
    windows: list[float] = []
    engine = start_engine(ws, tmp / "home", tmp / "flood.log")
    for _ in range(kills):
        before = len(journal_ids(ws)) if (ws / "state" / "journal.sqlite3").exists() else 0
        acked: list[tuple[float, int]] = []  # (when answered, how many)
        stop = threading.Event()

        def client(url: str, token: str, stop: threading.Event, acked: list[tuple[float, int]]) -> None:
            load = calls.debug_load(200, 20_000)
            with httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=60) as c:
                while not stop.is_set():
                    try:
                        resp = c.request(load.method, load.path, json=load.body)
                    except httpx.HTTPError:
                        return
                    if resp.status_code == 200:
                        acked.append((time.time(), load.decode(resp.json()).recorded))

        threads = [
            threading.Thread(target=client, args=(engine.url, engine.token, stop, acked)) for _ in range(2)
        ]
        for t in threads:
            t.start()
        time.sleep(random.uniform(2.0, 5.0))
        killed_at = time.time()
        engine.kill()
        stop.set()
        for t in threads:
            t.join(30)
        answered = sum(n for at, n in acked if at <= killed_at)
        engine = start_engine(ws, tmp / "home", tmp / "flood.log")
        kept = len(journal_ids(ws)) - before
        lost = max(answered - kept, 0)
        lost_counts.append(lost)
        # The lost runs are the last answered: how long before the kill the oldest of them was.
        remaining, window = lost, 0.0
        for at, n in reversed([a for a in acked if a[0] <= killed_at]):
            if remaining <= 0:
                break
            window = killed_at - at
            remaining -= n
        windows.append(window * 1000 if lost else 0.0)
    engine.stop()
    print(
        f"crash window, flood (2 clients, 20 KB runs, {kills} kills): lost per kill {lost_counts} "
        f"(most {max(lost_counts)}; bound {MAX_PENDING_ROWS} queued); answered at most "
        f"{max(windows):.0f} ms before the kill"
    )
    RESULTS["flood_lost_max"] = max(lost_counts)
    RESULTS["flood_window_ms"] = max(windows)


def stages_kill(tmp: Path, kills: int) -> None:
    """One client dispatches stages back to back (3 real hooks each); the hook_run events it is
    streamed are compared with the journal after a kill at a random moment."""
    ws = tmp / "stages"
    for i in range(3):
        hook = ws / "hooks" / f"h{i}.sh"
        hook.parent.mkdir(parents=True, exist_ok=True)
        hook.write_text("#!/bin/sh\ncat >/dev/null\necho '{}'\n")
        hook.chmod(0o755)
    lost_counts: list[int] = []
    windows: list[float] = []
    engine = start_engine(ws, tmp / "home", tmp / "stages.log")
    for _ in range(kills):
        streamed: dict[str, float] = {}
        stop = threading.Event()
        ready = threading.Event()

        def listen(url: str, token: str, ready: threading.Event, streamed: dict[str, float]) -> None:
            headers = {"authorization": f"Bearer {token}"}
            stream = calls.events()
            try:
                with httpx.stream(
                    stream.method, f"{url}{stream.path}", params=stream.query, headers=headers, timeout=None
                ) as resp:
                    ready.set()
                    for line in resp.iter_lines():
                        if line.startswith("data: "):
                            event = stream.decode(json.loads(line[6:]))
                            if event.kind == "hook_run":
                                streamed[event.data["id"]] = time.time()
            except httpx.HTTPError:
                return

        def dispatch(url: str, token: str, stop: threading.Event) -> None:
            idle = calls.stage("idle", {"answer": "x"}, "ses_k")
            with httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=60) as c:
                while not stop.is_set():
                    try:
                        c.request(idle.method, idle.path, json=idle.body)
                    except httpx.HTTPError:
                        return

        listener = threading.Thread(
            target=listen, args=(engine.url, engine.token, ready, streamed), daemon=True
        )
        listener.start()
        ready.wait(10)
        dispatcher = threading.Thread(target=dispatch, args=(engine.url, engine.token, stop))
        dispatcher.start()
        time.sleep(random.uniform(1.0, 3.0))
        killed_at = time.time()
        engine.kill()
        stop.set()
        dispatcher.join(30)
        seen = {run_id: at for run_id, at in list(streamed.items()) if at <= killed_at}
        engine = start_engine(ws, tmp / "home", tmp / "stages.log")
        lost = set(seen) - journal_ids(ws)
        lost_counts.append(len(lost))
        windows.append(max((killed_at - seen[r]) * 1000 for r in lost) if lost else 0.0)
    engine.stop()
    print(
        f"crash window, stages dispatched back to back ({kills} kills): streamed runs lost per kill "
        f"{lost_counts}; streamed at most {max(windows):.0f} ms before the kill"
    )
    RESULTS["stages_lost_max"] = max(lost_counts)
    RESULTS["stages_window_ms"] = max(windows)


# ---- 4. what a large request costs ---------------------------------------------------------------


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def request_memory(tmp: Path) -> None:
    ws = tmp / "memory"
    ws.mkdir()
    engine = start_engine(ws, tmp / "home", tmp / "memory.log")
    limit = Config().max_request_bytes
    text = "m" * (limit - 200)
    history = [{"info": {}, "parts": [{"type": "text", "text": text}]}]
    system = calls.system(SystemRequest("ses_m", ["x"], history=history))
    body = json.dumps(system.body)
    over = json.dumps(calls.system(SystemRequest("ses_m", ["x" * (limit + 1)])).body)
    headers = {"authorization": f"Bearer {engine.token}"}
    base = peak_rss(engine.pid)

    def post(content: str) -> int:
        return httpx.request(
            system.method, f"{engine.url}{system.path}", content=content, headers=headers, timeout=300
        ).status_code

    statuses = [post(body)]
    one = peak_rss(engine.pid)
    threads: list[threading.Thread] = []
    for i in range(4):
        content = body.replace("ses_m", f"ses_{i}")
        threads.append(threading.Thread(target=lambda c=content: statuses.append(post(c))))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    four = peak_rss(engine.pid)
    refused = post(over)
    engine.stop()
    print(
        f"request memory: engine peak RSS {base / MIB:.0f} MiB at rest, {one / MIB:.0f} MiB after one "
        f"{limit // MIB} MiB request (+{(one - base) / MIB:.0f}), {four / MIB:.0f} MiB after four at once "
        f"(+{(four - base) / MIB:.0f}); statuses {sorted(set(statuses))}; {limit + 1 + 30} bytes: {refused}"
    )
    RESULTS["one_request_mib"] = (one - base) / MIB
    RESULTS["four_requests_mib"] = (four - base) / MIB


# ---- 5. a full disk -------------------------------------------------------------------------------


def full_disk(tmp: Path) -> None:
    import os
    import subprocess

    if os.geteuid() != 0:
        print("full disk: skipped (mounting a tmpfs needs root)")
        return
    disk = tmp / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)]).returncode != 0:
        print("full disk: skipped (cannot mount a tmpfs)")
        return
    try:
        ws = disk / "ws"
        (ws / "hooks").mkdir(parents=True)
        engine = start_engine(ws, tmp / "home", tmp / "disk.log")
        acked = [0]
        refused = [0]
        stop = threading.Event()

        def client() -> None:
            load = calls.debug_load(100, 1000)
            with httpx.Client(
                base_url=engine.url, headers={"authorization": f"Bearer {engine.token}"}, timeout=60
            ) as c:
                while not stop.is_set():
                    resp = c.request(load.method, load.path, json=load.body)
                    if resp.status_code == 200:
                        acked[0] += load.decode(resp.json()).recorded
                    else:
                        refused[0] += 1
                        time.sleep(0.05)

        threads = [threading.Thread(target=client) for _ in range(2)]
        for t in threads:
            t.start()
        filler = disk / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        for size in (1 << 20, 65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
        os.close(fd)
        time.sleep(3)  # the flood goes on against a full disk
        filler.unlink()
        freed = time.perf_counter()
        headers = {"authorization": f"Bearer {engine.token}"}
        status = calls.status()
        while httpx.get(engine.url + status.path, headers=headers).json().get("journal_failing"):
            time.sleep(0.05)
        recovered = time.perf_counter() - freed
        stop.set()
        for t in threads:
            t.join(30)
        runs = calls.runs(limit=1)
        kept = httpx.get(engine.url + runs.path, params=runs.query, headers=headers).json()["counts"]["runs"]
        engine.stop()
    finally:
        subprocess.run(["umount", "-l", str(disk)])
    print(
        f"full disk (16 MiB tmpfs, 2 clients flooding 1 KB runs): {acked[0]:,} runs acknowledged, "
        f"{refused[0]:,} requests refused (503) while full, {kept:,} runs in the journal once it had "
        f"room ({acked[0] - kept:,} lost); taking work again {recovered * 1000:.0f} ms after room returned"
    )
    RESULTS["disk_lost"] = acked[0] - kept


# ---- 6. sessions -----------------------------------------------------------------------------------


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def send_sessions(engine: EngineProcess, count: int, messages: int) -> None:
    def one_client(numbers: range) -> None:
        with httpx.Client(
            base_url=engine.url, headers={"authorization": f"Bearer {engine.token}"}, timeout=120
        ) as c:
            for n in numbers:
                history = [
                    {"info": {"role": "user"}, "parts": [{"type": "text", "text": f"{n}.{i} " + "h" * 90}]}
                    for i in range(messages)
                ]
                call = calls.system(SystemRequest(f"ses_{n:06d}", ["s"], history=history))
                c.request(call.method, call.path, json=call.body)

    threads = [threading.Thread(target=one_client, args=(range(i, count, 4),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def sessions(tmp: Path, count: int, messages: int) -> None:
    ws = tmp / "sessions"
    (ws / "hooks").mkdir(parents=True)
    engine = start_engine(ws, tmp / "home", tmp / "sessions.log")
    started = time.perf_counter()
    send_sessions(engine, count, messages)
    sent = time.perf_counter() - started
    time.sleep(2)
    before = rss(engine.pid)
    engine.stop()
    engine = start_engine(ws, tmp / "home", tmp / "sessions.log")
    after = rss(engine.pid)
    with sqlite3.connect(f"file:{ws / 'state' / 'journal.sqlite3'}?mode=ro", uri=True) as db:
        kept = db.execute("SELECT COUNT(*) FROM session_histories WHERE length = ?", (messages,)).fetchone()[
            0
        ]
    engine.stop()
    print(
        f"sessions: {count:,} sessions with {messages} messages each sent in {sent:.0f} s; histories missing "
        f"after a restart: {count - kept:,}; engine memory {before / MIB:.0f} MiB before the restart, "
        f"{after / MIB:.0f} MiB after"
    )
    RESULTS["histories_lost"] = count - kept
    RESULTS["restart_mib"] = (after - before) / MIB

    ws = tmp / "sessions-small"
    (ws / "hooks").mkdir(parents=True)
    env = isolated_env(tmp / "home", PYTHONPATH=str(REPO), EVOLVE_DEBUG_LOAD="1")
    env["EVOLVE_JOURNAL_MAX_BYTES"] = str(64 * MIB)
    engine = EngineProcess(ws, env, tmp / "sessions-small.log").start()
    load = calls.debug_load(1000, 1000)
    headers = {"authorization": f"Bearer {engine.token}"}
    for _ in range(20):
        httpx.request(load.method, engine.url + load.path, json=load.body, headers=headers, timeout=60)
    path = ws / "state" / "journal.sqlite3"
    largest = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            largest[0] = max(largest[0], sizes(path)[0])
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    send_sessions(engine, count, messages)
    time.sleep(2)
    stop.set()
    sampler.join()
    runs = calls.runs(limit=1)
    kept_runs = httpx.get(engine.url + runs.path, params=runs.query, headers=headers).json()["counts"]["runs"]
    engine.stop()
    print(
        f"sessions and the journal's limit (64 MiB, 20,000 runs of 1 KB, then the {count:,} sessions): "
        f"the file at most {largest[0] / MIB:.1f} MiB; {kept_runs:,} runs kept"
    )
    RESULTS["sessions_journal_mib"] = largest[0] / MIB
    RESULTS["sessions_runs_kept"] = kept_runs


# ---- 7. copies -------------------------------------------------------------------------------------


def copies(tmp: Path, replays: int = 20, data_mib: int = 20) -> None:
    import os

    ws = tmp / "copies"
    hook = ws / "hooks" / "h.sh"
    hook.parent.mkdir(parents=True)
    body = '#!/bin/sh\ncat >/dev/null\n[ "$1" = discover ] && echo \'{"stages": ["mutate_request"]}\' && exit 0\necho \'{"system": ["VERSION"]}\'\n'
    hook.write_text(body.replace("VERSION", "v0"))
    hook.chmod(0o755)
    (ws / "data").mkdir()
    for i in range(data_mib):
        (ws / "data" / f"{i}.bin").write_bytes(os.urandom(MIB))
    engine = start_engine(ws, tmp / "home", tmp / "copies.log")
    engine.stage("mutate_request", {"system": []}, session="ses_c")
    shas = []
    for i in range(replays):
        engine.call_tool(
            "evolve_hook_write", {"hook": "h.sh", "content": body.replace("VERSION", f"v{i + 1}")}
        )
        shas.append(engine.head())
    base = Path(tempfile.gettempdir())
    most = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total = 0
            for scratch in base.glob(f"evolve-replay-{engine.pid}-*"):
                for folder, _dirs, files in os.walk(scratch):  # a copy may go while it is walked
                    for name in files:
                        with contextlib.suppress(OSError):
                            total += os.lstat(os.path.join(folder, name)).st_size
            most[0] = max(most[0], total)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    ids = [engine.post(f"/v1/changes/{sha}/replay", {})["id"] for sha in shas]
    for replay_id in ids:
        while engine.get(f"/v1/replays/{replay_id}")["state"] == "running":
            time.sleep(0.1)
    took = time.perf_counter() - started
    stop.set()
    sampler.join()
    limit = Config().max_replays
    engine.stop()
    print(
        f"copies: {replays} replays asked for at once of a {data_mib} MB workspace (max_replays {limit}): "
        f"replay copies at most {most[0] / MIB:.0f} MiB at once ({limit} x 3 copies); all done in {took:.1f} s"
    )
    RESULTS["copies_mib"] = most[0] / MIB


# ---- 8. diffs and files ------------------------------------------------------------------------------


def diffs(tmp: Path, size_mib: int = 200) -> None:
    ws = tmp / "diffs"
    (ws / "prompts").mkdir(parents=True)
    (ws / "prompts" / "chat.md").write_text("chat\n")
    line = b"".join(b"%07d the quick brown fox jumps over the lazy dog\n" % i for i in range(2000))
    with open(ws / "data.txt", "wb") as fh:
        for _ in range(size_mib * MIB // len(line)):
            fh.write(line)
    engine = start_engine(ws, tmp / "home", tmp / "diffs.log")
    sha = engine.head()
    base = peak_rss(engine.pid)
    started = time.perf_counter()
    engine.get(f"/v1/changes/{sha}/diff")
    one_s = time.perf_counter() - started
    engine.request("GET", f"/v1/changes/{sha}/file", params={"path": "data.txt"})
    one = peak_rss(engine.pid)
    threads = [threading.Thread(target=lambda: engine.get(f"/v1/changes/{sha}/diff")) for _ in range(4)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    four_s = time.perf_counter() - started
    four = peak_rss(engine.pid)
    engine.stop()
    print(
        f"diffs and files: a committed {size_mib} MB file: its diff in {one_s * 1000:.0f} ms, peak memory "
        f"+{(one - base) / MIB:.0f} MiB with the file asked for too; four diffs at once in {four_s * 1000:.0f} ms, "
        f"+{(four - base) / MIB:.0f} MiB"
    )
    RESULTS["diff_mib"] = (one - base) / MIB
    RESULTS["four_diffs_mib"] = (four - base) / MIB


# ---- 9. processes --------------------------------------------------------------------------------------


def processes(tmp: Path, kills: int) -> None:
    import os

    ws = tmp / "processes"
    pids = tmp / "pids"
    pids.mkdir()
    hook = ws / "hooks" / "hang.sh"
    hook.parent.mkdir(parents=True)
    hook.write_text(
        "#!/bin/sh\ncat >/dev/null\n"
        '[ "$1" = discover ] && echo \'{"stages": ["idle"]}\' && exit 0\n'
        f"setsid sh -c 'echo $$ >> {pids}/left; exec sleep 300' </dev/null >/dev/null 2>&1 &\n"
        f"echo $$ >> {pids}/left\nsleep 300\n"
    )
    hook.chmod(0o755)
    left: list[int] = []
    engine = start_engine(ws, tmp / "home", tmp / "processes.log")
    for _ in range(kills):
        (pids / "left").unlink(missing_ok=True)

        def dispatch(e: EngineProcess = engine) -> None:
            with contextlib.suppress(httpx.HTTPError):  # the engine is killed under it
                httpx.post(
                    e.url + "/v1/stages/idle",
                    json={"context": {}},
                    headers={"authorization": f"Bearer {e.token}"},
                    timeout=5,
                )

        thread = threading.Thread(target=dispatch, daemon=True)
        thread.start()
        while not (pids / "left").exists() or len((pids / "left").read_text().split()) < 2:
            time.sleep(0.05)
        ran = [int(p) for p in (pids / "left").read_text().split()]
        engine.kill()
        engine = start_engine(ws, tmp / "home", tmp / "processes.log")
        left += [p for p in ran if _running(p)]
    engine.stop()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    print(
        f"processes: {kills} kills during a hook with a setsid child: {len(left)} of their processes alive after the restart"
    )
    RESULTS["processes_left"] = len(left)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


RESULTS: dict[str, Any] = {}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200_000, help="runs for the journal size (200000)")
    parser.add_argument("--input-bytes", type=int, default=20_000, help="input size of each run (20000)")
    parser.add_argument("--kills", type=int, default=5, help="kills per crash-window load (5)")
    parser.add_argument("--sessions", type=int, default=6000, help="sessions with long histories (6000)")
    parser.add_argument("--messages", type=int, default=200, help="messages per session's history (200)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="evolve-bench-reliability-"))
    parts: list[Callable[[], None]] = [
        lambda: journal_size(tmp, args.runs, args.input_bytes),
        lambda: stored_once(tmp),
        lambda: flood_kill(tmp, args.kills),
        lambda: stages_kill(tmp, args.kills),
        lambda: request_memory(tmp),
        lambda: full_disk(tmp),
        lambda: sessions(tmp, args.sessions, args.messages),
        lambda: copies(tmp),
        lambda: diffs(tmp),
        lambda: processes(tmp, args.kills),
    ]
    try:
        for part in parts:
            part()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    limit = Config().journal_max_bytes / MIB
    print(
        f"reliability: journal at most {RESULTS['journal_file_mib']:.0f} MiB (+{RESULTS['journal_wal_mib']:.0f} MiB wal) "
        f"of {limit:.0f} MiB after {args.runs:,} runs; stored once {RESULTS['stored_once_ratio']:.0f}x smaller; "
        f"kill -9 loses at most {RESULTS['flood_lost_max']} acknowledged runs under a flood "
        f"({RESULTS['flood_window_ms']:.0f} ms) and {RESULTS['stages_lost_max']} streamed runs "
        f"({RESULTS['stages_window_ms']:.0f} ms) under stage dispatches; a 32 MiB request +{RESULTS['one_request_mib']:.0f} MiB, "
        f"four +{RESULTS['four_requests_mib']:.0f} MiB; full disk: {RESULTS.get('disk_lost', 'n/a')} acknowledged runs lost; "
        f"{RESULTS['histories_lost']} histories lost, restart {RESULTS['restart_mib']:+.0f} MiB; "
        f"journal with sessions at most {RESULTS['sessions_journal_mib']:.0f} MiB of 64, {RESULTS['sessions_runs_kept']:,} runs kept; "
        f"replay copies at most {RESULTS['copies_mib']:.0f} MiB; a 200 MB diff +{RESULTS['diff_mib']:.0f} MiB, "
        f"four +{RESULTS['four_diffs_mib']:.0f} MiB; {RESULTS['processes_left']} processes left after kills"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
