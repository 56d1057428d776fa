"""What the engine writes to its log: a normal start is one plain line, and a watcher of the event
stream that goes away (a console quitting) leaves no task pending when the engine stops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env


def test_a_normal_start_is_one_plain_line_and_a_closed_stream_leaves_nothing_pending(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "hooks").mkdir(parents=True)
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    engine = EngineProcess(workspace, env, tmp_path / "engine.log").start()
    headers = {"authorization": f"Bearer {engine.token}"}
    opened = threading.Event()

    def watch() -> None:
        # A watcher that reads the stream for a moment and goes away, as a console that quits.
        with (
            httpx.Client(timeout=10, verify=False) as client,
            client.stream("GET", f"{engine.url}/v1/events", headers=headers) as stream,
        ):
            for _ in stream.iter_lines():  # the stream's first line, then it waits for events
                break
            opened.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert opened.wait(10)
    watcher.join(10)  # gone while the engine waits for the next event to send it
    time.sleep(0.5)
    engine.post("/v1/stages/idle", {"context": {}})  # the engine goes on working after it
    engine.stop()
    log = engine.log.read_text(encoding="utf-8", errors="replace")
    assert f"evolve: engine for {workspace} listening on {engine.url} (pid {engine.pid})" in log, log
    assert "WARNING" not in log and "Traceback" not in log, log
    assert "Task was destroyed but it is pending" not in log, log
