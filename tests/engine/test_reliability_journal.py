"""Acknowledged means kept, or refused (docs/reliability.md, "Acknowledged and durable" and "What is
journaled and for how long"): attacks on a real engine (`evolve serve`) and its real SQLite journal.

- A full disk (a real one: an 8 MiB tmpfs, when the tests run as root; skipped otherwise): the
  engine stops acknowledging (503, and says why in its status) instead of dropping rows, keeps what
  it had answered for, and takes work again by itself once there is room.
- Many sessions with long histories, changed faster than they are written: every history is in the
  journal after a restart, and the restarted engine holds no more of them in memory than before.
- Sessions with long, all different histories, with a small `journal_max_bytes`: the journal stays
  under its limit and the runs keep their share.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.protocol import calls
from engine.protocol.records import SystemRequest
from tests.support.attacks import Engines, engines, journal_rows
from tests.support.engine_process import EngineProcess
from tests.support.waiting import wait_for

MIB = 1024 * 1024


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 8 MiB (tmpfs), mounted for the test and unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs root (to mount an 8 MiB tmpfs); run as root to attack it")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path) -> Path:
    """Fill the file system at `disk` to the last byte; the filler file (delete it to make room)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


def load(engine: EngineProcess, count: int, size: int) -> httpx.Response:
    call = calls.debug_load(count, size)
    return engine.request(call.method, call.path, call.body, check=False)


def test_a_full_disk_stops_acknowledging_and_drops_nothing(
    tmp_path: Path, small_disk: Path, started: Engines
) -> None:
    ws = small_disk / "ws"
    (ws / "hooks").mkdir(parents=True)
    engine = started.start(ws, EVOLVE_DEBUG_LOAD="1")
    assert load(engine, 50, 1000).status_code == 200
    acknowledged = 50
    filler = fill(small_disk)
    refused: httpx.Response | None = None
    for _ in range(200):  # until the journal notices: what was answered before that must be kept
        resp = load(engine, 50, 1000)
        if resp.status_code == 200:
            acknowledged += int(resp.json()["recorded"])
            continue
        refused = resp
        break
    assert refused is not None, "the engine never stopped acknowledging on a full disk"
    assert refused.status_code == 503, refused.text
    assert refused.json()["journal"] == "failing" and "cannot write" in refused.json()["error"]
    assert refused.headers["retry-after"]
    status = engine.get("/v1/status")
    assert status["journal_failing"] and "full" in status["journal_failing"]
    runs = engine.request("GET", "/v1/runs", check=False)
    assert runs.status_code == 503 and runs.json()["journal"] == "failing"  # never a stale count
    stage = engine.request("POST", "/v1/stages/idle", {"context": {}}, check=False)
    assert stage.status_code == 503
    filler.unlink()  # room again: the engine recovers by itself
    wait_for("the journal to write again", lambda: engine.get("/v1/status")["journal_failing"] is None)
    assert load(engine, 10, 1000).status_code == 200
    acknowledged += 10
    counted = engine.get("/v1/runs", limit=1)["counts"]["runs"]
    assert counted == acknowledged  # every acknowledged run kept, none lost to the full disk
    warnings = [w for (w,) in journal_rows(ws, "SELECT data FROM events WHERE kind = 'warning'")]
    assert any("the journal cannot write" in w for w in warnings)
    assert any("the journal writes again" in w for w in warnings)


def history(session: int, messages: int, size: int) -> list[dict[str, Any]]:
    return [
        {
            "info": {"role": "user", "agent": "build"},
            "parts": [{"type": "text", "text": f"{session}.{i} " + "h" * size}],
        }
        for i in range(messages)
    ]


def send_histories(
    engine: EngineProcess, sessions: range, messages: int, size: int, clients: int = 4
) -> None:
    """Each session's history through the system prompt route, as opencode sends it, from a few
    clients at once."""

    def one_client(numbers: list[int]) -> None:
        with engine.client(timeout=120) as client:
            for n in numbers:
                call = calls.system(
                    SystemRequest(f"ses_{n:05d}", ["sys"], history=history(n, messages, size))
                )
                resp = client.request(call.method, call.path, json=call.body)
                assert resp.status_code == 200, resp.text

    numbers = list(sessions)
    threads = [threading.Thread(target=one_client, args=(numbers[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def test_no_history_is_lost_and_a_restart_holds_what_was_held(tmp_path: Path, started: Engines) -> None:
    """600 sessions' histories written faster than the background save: each is in the journal after
    a restart; the restarted engine reads back only the most recent 64 (what it held before)."""
    ws = tmp_path / "ws"
    (ws / "hooks").mkdir(parents=True)
    engine = started.start(ws)
    send_histories(engine, range(600), messages=40, size=2000)
    time.sleep(1.5)  # the last background save
    before = rss(engine.pid)
    engine.stop()
    engine = started.start(ws)
    after = rss(engine.pid)
    listed = {s["id"]: s for s in engine.get("/v1/sessions")["sessions"]}
    assert len(listed) == 600
    lost = [sid for sid in listed if len(engine.get(f"/v1/sessions/{sid}")["history"]) != 40]
    assert lost == [], f"{len(lost)} of 600 sessions lost their history"
    one = engine.get("/v1/sessions/ses_00299")
    assert one["history"][39]["parts"][0]["text"].startswith("299.39 ")
    # What a restart costs in memory: what the engine held before (64 histories of 80 KB), not the
    # 48 MB of histories the journal holds.
    assert after <= before + 16 * MIB, (before // MIB, after // MIB)


def test_sessions_keep_to_their_share_and_never_push_out_the_runs(tmp_path: Path, started: Engines) -> None:
    """journal_max_bytes 8 MiB, 2 MB of runs, then 24 MB of all different session histories: the file
    stays under the limit and the runs are still there."""
    ws = tmp_path / "ws"
    (ws / "hooks").mkdir(parents=True)
    engine = started.start(ws, EVOLVE_DEBUG_LOAD="1", EVOLVE_JOURNAL_MAX_BYTES=str(8 * MIB))
    for _ in range(4):
        assert load(engine, 500, 1000).status_code == 200
    runs_before = engine.get("/v1/runs", limit=1)["counts"]["runs"]
    assert runs_before == 2000
    path = ws / "state" / "journal.sqlite3"
    largest = 0
    for start in range(0, 240, 40):
        send_histories(engine, range(start, start + 40), messages=10, size=10_000)
        time.sleep(0.8)  # saved
        largest = max(largest, path.stat().st_size)
    assert load(engine, 10, 1000).status_code == 200  # a batch of runs after the sessions
    assert largest <= 8 * MIB, largest / MIB
    kept = engine.get("/v1/runs", limit=1)["counts"]["runs"]
    assert kept >= 1000, f"only {kept} of 2,010 runs kept: the sessions pushed them out"
    newest = engine.get("/v1/sessions/ses_00239")
    assert len(newest["history"]) == 10  # the most recent histories are kept
