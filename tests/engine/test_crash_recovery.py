"""Crashes of a real engine (`kill -9`) at the worst moments, and what the next engine makes of them.

The moment is made certain with a git clean filter that hangs on one file while an "armed" marker
exists: the engine's `git add` of the agent's edit then waits inside git, after the file is written
and before the commit. Killing the engine and that git there leaves the edit on disk, uncommitted,
and `.git/index.lock` behind, exactly as a crash mid-commit does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.engine_process import EngineProcess
from tests.support.environment import EVOLVE, REPO, isolated_env, run_git
from tests.support.processes import pid_alive
from tests.support.waiting import wait_for
from tests.support.workspace import write_file


def parent_git(pid: int) -> int:
    """The git process above `pid` (the filter runs as git's child, maybe through a shell)."""
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if Path(f"/proc/{pid}/comm").read_text().strip() == "git":
            return pid
    raise AssertionError("no git process above the filter")


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], Path, Path]]:
    ws = tmp_path / "ws"
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    for name in ["preamble.md", "chat.md", "heartbeat.md", "compaction.md", "recover.md"]:
        write_file(ws / "prompts" / name, f"{name} as it was\n")
    write_file(ws / ".gitattributes", "prompts/chat.md filter=hang\n")
    armed, pidfile = tmp_path / "armed", tmp_path / "filter.pid"
    filt = tmp_path / "hang.sh"
    write_file(
        filt, f"#!/bin/sh\nif [ -e {armed} ]; then echo $$ > {pidfile}; sleep 300; fi\nexec cat\n", 0o755
    )
    run_git(ws, "init", "-q", "-b", "main", env=env)
    run_git(ws, "config", "filter.hang.clean", str(filt), env=env)
    yield ws, env, armed, pidfile
    if pidfile.exists():  # never leave the hanging filter behind
        with_pid = int(pidfile.read_text().strip() or 0)
        if with_pid and pid_alive(with_pid):
            os.kill(with_pid, signal.SIGKILL)


def test_a_crash_between_write_and_commit_keeps_the_agents_attribution(
    setup: tuple[Path, dict[str, str], Path, Path], tmp_path: Path
) -> None:
    ws, env, armed, pidfile = setup
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    base = engine.head()
    armed.touch()
    answer: list[object] = []

    def call() -> None:
        try:
            answer.append(
                engine.call_tool(
                    "evolve_prompt_write",
                    {"prompt": "chat.md", "content": "the agent's new chat prompt\n"},
                    session="ses_c",
                    call_id="call_c",
                )
            )
        except (httpx.HTTPError, AssertionError) as exc:
            answer.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    filter_pid = int(
        wait_for("git to run the hanging filter", lambda: pidfile.exists() and pidfile.read_text().strip())
    )
    git_pid = parent_git(filter_pid)
    assert (ws / "prompts" / "chat.md").read_text() == "the agent's new chat prompt\n"

    # Journaled when it started, before the file was written: the call is in the journal now.
    with sqlite3.connect(f"file:{ws / 'state' / 'journal.sqlite3'}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT running, data FROM tool_calls WHERE tool = 'evolve_prompt_write'"
        ).fetchall()
    assert len(rows) == 1 and rows[0][0] == 1
    started = json.loads(rows[0][1])
    assert started["$intent"]["files"] == ["prompts/chat.md"]

    engine.kill()
    os.kill(git_pid, signal.SIGKILL)
    os.kill(filter_pid, signal.SIGKILL)
    caller.join(30)
    assert isinstance(answer[0], Exception)  # the agent never got an answer
    assert (ws / ".git" / "index.lock").exists()  # what a git killed mid-commit leaves
    armed.unlink()

    engine = EngineProcess(ws, env, tmp_path / "engine2.log").start()
    try:
        assert not (ws / ".git" / "index.lock").exists()
        log = engine.git("log", "--format=%H%x1f%s%x1f%b%x1e", f"{base}..HEAD")
        commits = [c.strip().split("\x1f") for c in log.split("\x1e") if c.strip()]
        assert len(commits) == 1, commits  # the agent's edit, and nothing as an external change
        sha, subject, body = commits[0]
        assert subject == "write prompt chat.md"
        assert "Evolve-Origin: tool" in body
        assert "Evolve-Tool: evolve_prompt_write" in body
        assert "Evolve-Session: ses_c" in body and "Evolve-Call: call_c" in body
        assert "Evolve-File: prompts/chat.md" in body
        assert "Evolve-Interrupted: committed at restart" in body
        assert engine.git("show", "HEAD:prompts/chat.md") == "the agent's new chat prompt\n"
        assert engine.git("status", "--porcelain") == ""

        (recorded,) = engine.get("/v1/tool-calls", tool="evolve_prompt_write")["tool_calls"]
        assert recorded["error"].startswith("interrupted: the engine stopped during this call")
        assert recorded["commit"] == sha
        log_text = (tmp_path / "engine2.log").read_text()
        assert "index.lock" in log_text and "a lock left by a git process that is gone" in log_text
    finally:
        engine.stop()


def test_acknowledged_runs_survive_a_kill_but_the_last_queued_few(tmp_path: Path) -> None:
    """Runs the engine has answered for are in the journal after a kill -9, except at most what its
    writer's bounded queue held (journal.MAX_PENDING_ROWS): the engine waits for the writer instead
    of acknowledging an unbounded backlog."""
    from engine.journal.store import MAX_PENDING_ROWS

    ws = tmp_path / "ws"
    ws.mkdir()
    env = isolated_env(
        tmp_path / "home", PYTHONPATH=str(REPO), EVOLVE_DEBUG_LOAD="1", EVOLVE_JOURNAL_MAX_RUNS="1000000"
    )
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    acknowledged = 0
    with engine.client() as client:
        for _ in range(2):
            resp = client.post("/v1/debug/load", json={"count": 20_000, "stdout_bytes": 20_000})
            assert resp.status_code == 200
            acknowledged += resp.json()["recorded"]
    engine.kill()  # at once: whatever the writer has not committed yet is lost
    engine = EngineProcess(ws, env, tmp_path / "engine2.log").start()
    try:
        kept = engine.get("/v1/status")["journal"]["runs"]
        assert acknowledged - kept <= MAX_PENDING_ROWS, (acknowledged, kept)
    finally:
        engine.stop()


def test_a_second_engine_refuses_to_start_even_once_engine_lock_is_deleted(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    try:
        (ws / "state" / "engine.lock").unlink()  # someone tidying up state/
        second = subprocess.run(
            [*EVOLVE, "serve", "--workspace", str(ws)], env=env, capture_output=True, text=True, timeout=60
        )
        assert second.returncode != 0
        assert "an engine already runs for" in second.stderr
        assert engine.request("GET", "/v1/health").status_code == 200
    finally:
        engine.stop()


def test_an_engine_whose_workspace_is_deleted_notices_and_stops(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    log = tmp_path / "engine.log"
    engine = EngineProcess(ws, env, log).start()
    try:
        shutil.rmtree(ws)
        engine.wait_exit(30)  # it stops by itself, rather than journaling into a deleted file
        assert f"the workspace {ws} was deleted or replaced" in log.read_text()
    finally:
        engine.stop()


def test_a_command_while_an_engine_runs_leaves_its_calls_in_progress_alone(tmp_path: Path) -> None:
    """`evolve tools` starts an engine of its own in its process; the calls the running engine has in
    progress are not interrupted ones, and it must not finish them."""
    from engine.journal.store import Journal
    from engine.protocol.records import ToolCall

    ws = tmp_path / "ws"
    ws.mkdir()
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    try:
        with Journal(ws / "state" / "journal.sqlite3") as journal:  # as the running engine records one
            journal.tool_call_started(
                ToolCall(id="call_live", tool="kit_mark", args={}, started_at=1.0),
                {"origin": "tool", "message": "update mark", "trailers": {}, "files": None},
            )
        engine.cli("tools")  # an engine of its own, in its process, even while one runs
        with sqlite3.connect(ws / "state" / "journal.sqlite3") as db:
            (running,) = db.execute("SELECT running FROM tool_calls WHERE id = 'call_live'").fetchone()
        assert running == 1
    finally:
        engine.stop()
