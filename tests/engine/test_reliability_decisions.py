"""Interrupted decisions finish as what they were (docs/reliability.md, "After a crash"): a real engine
(`evolve serve`) killed with SIGKILL at a chosen moment of an operator's revert or approval (a `git`
on its PATH that pauses right after the step in question), then started again; and a change whose
commit git refused (a lock another program holds) keeps the agent's attribution."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.attacks import Engines, engines, pausing_git, write
from tests.support.processes import pid_alive
from tests.support.waiting import wait_for


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


def workspace(tmp_path: Path, review: str = "log") -> Path:
    ws = tmp_path / "ws"
    write(ws / "prompts" / "chat.md", "chat v0\n", 0o644)
    write(ws / "config" / "evolve.jsonc", json.dumps({"review": review}), 0o644)
    return ws


def in_background(call: Callable[[], object]) -> threading.Thread:
    """`call` in a thread, its failure (the engine killed under it) ignored."""

    def run() -> None:
        with contextlib.suppress(httpx.HTTPError, AssertionError):
            call()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_revert_killed_half_done_is_completed_as_the_revert(tmp_path: Path, started: Engines) -> None:
    """Killed right after `git revert --no-commit` (REVERT_HEAD there, nothing committed)."""
    ws = workspace(tmp_path)
    mark = started.pids / "git.revert"
    env = pausing_git(tmp_path / "bin", ["revert --no-commit"], mark)
    engine = started.start(ws, **env)
    engine.call_tool("evolve_prompt_write", {"prompt": "chat.md", "content": "chat v1\n"}, session="ses_a")
    change = engine.head()
    in_background(lambda: engine.post(f"/v1/changes/{change}/revert", {"by": "ann"}))
    wait_for("the revert's git to pause", mark.exists)
    engine.kill()
    assert (ws / ".git" / "REVERT_HEAD").exists()  # what the kill left: a revert half done
    engine = started.start(ws)
    log = engine.get("/v1/commits", limit=10)["commits"]
    assert not [c for c in log if c["message"].startswith("external change")]
    newest = log[0]
    assert newest["message"].startswith("revert: write prompt chat.md")
    assert newest["trailers"]["origin"] == "operator" and newest["trailers"]["by"] == "ann"
    assert newest["trailers"]["reverts"] == change
    assert newest["trailers"]["interrupted"] == "completed at restart"
    changes = {c["sha"]: c for c in engine.get("/v1/changes", limit=10)["changes"]}
    assert changes[change]["state"] == "reverted" and changes[change]["reverted_by"] == newest["sha"]
    assert (ws / "prompts" / "chat.md").read_text() == "chat v0\n"
    assert not (ws / ".git" / "REVERT_HEAD").exists()


def test_an_approval_killed_after_its_commit_is_recorded_as_approved(
    tmp_path: Path, started: Engines
) -> None:
    """Killed right after the commit that installs a held change, before its decision is recorded:
    at the next start it is approved, with that commit, and a rejection is refused."""
    ws = workspace(tmp_path, review="gate")
    mark = started.pids / "git.commit"
    env = pausing_git(tmp_path / "bin", ["commit", "Evolve-Pending:"], mark)
    engine = started.start(ws, **env)
    call = engine.call_tool(
        "evolve_prompt_write", {"prompt": "chat.md", "content": "chat v1\n"}, session="ses_b"
    )
    held = call["pending"]
    assert held
    in_background(lambda: engine.post(f"/v1/pending/{held}/approve", {"by": "bob"}))
    wait_for("the approval's commit to pause", mark.exists)
    engine.kill()
    engine = started.start(ws)
    item = engine.get(f"/v1/pending/{held}")
    assert item["status"] == "approved"
    head = engine.head()
    assert item["commit"] == head
    trailers = engine.get("/v1/commits", limit=1)["commits"][0]["trailers"]
    assert trailers["pending"] == held and trailers["approved-by"] == "bob"
    changes = {c["sha"]: c for c in engine.get("/v1/changes", limit=5)["changes"]}
    assert changes[head]["state"] == "approved"  # its review note is there
    refused = engine.request("POST", f"/v1/pending/{held}/reject", {"by": "carol"}, check=False)
    assert refused.status_code == 409, refused.text
    assert "already approved" in refused.json()["error"]
    assert (ws / "prompts" / "chat.md").read_text() == "chat v1\n"


def test_a_rejection_written_down_and_cut_short_is_recorded_at_start(
    tmp_path: Path, started: Engines
) -> None:
    """The state a kill between writing the rejection down and recording it leaves (the engine writes
    its intent first): the next start records the rejection, with who and why."""
    ws = workspace(tmp_path, review="gate")
    engine = started.start(ws)
    held = engine.call_tool("evolve_prompt_write", {"prompt": "chat.md", "content": "x\n"})["pending"]
    engine.kill()
    write(
        ws / "state" / "intents" / "int_1.json",
        json.dumps(
            {
                "id": "int_1",
                "kind": "reject",
                "started_at": time.time(),
                "data": {"pending": held, "by": "dana", "reason": "too broad"},
            }
        ),
        0o600,
    )
    engine = started.start(ws)
    item = engine.get(f"/v1/pending/{held}")
    assert item["status"] == "rejected" and item["note"] == "rejected by dana: too broad"
    assert not list((ws / "state" / "intents").glob("*.json"))


LOCK_HOLDER = """import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
print("held", flush=True)
sys.stdin.readline()  # until the test says so
os.close(fd)
os.unlink(sys.argv[1])
"""


def test_an_edit_git_refuses_to_commit_keeps_its_attribution(tmp_path: Path, started: Engines) -> None:
    """Another program holds `.git/index.lock` (open, so not stale) through the agent's edit: the
    edit is answered with a warning, and committed as the agent's once the lock is released, never
    as an external change."""
    ws = workspace(tmp_path)
    engine = started.start(ws)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(ws / ".git" / "index.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        call: dict[str, Any] = engine.call_tool(
            "evolve_prompt_write",
            {"prompt": "chat.md", "content": "chat v1\n"},
            session="ses_c",
            call_id="c1",
        )
        assert call["commit"] is None  # answered after git's ~20 s of retries, not committed
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(10)
    engine.post("/v1/heartbeat/pause")  # any request; the commit is made in the background
    commit = wait_for(
        "the edit to be committed",
        lambda: next(
            (
                c
                for c in engine.get("/v1/commits", limit=5)["commits"]
                # the workspace's first commit has the prompt too
                if "prompts/chat.md" in c["files"] and c["trailers"].get("origin") != "initial"
            ),
            None,
        ),
        timeout=60,
    )
    assert commit["message"].startswith("write prompt chat.md")
    assert commit["trailers"]["origin"] == "tool" and commit["trailers"]["session"] == "ses_c"
    assert commit["trailers"]["call"] == "c1"
    assert not [
        c for c in engine.get("/v1/commits", limit=5)["commits"] if c["message"].startswith("external")
    ]
    assert "warning: not committed to git yet" in call["output"], call["output"]
    assert "it is committed with this call's attribution as soon as git lets the engine" in call["output"]
    assert not pid_alive(holder.pid)
    assert (ws / "prompts" / "chat.md").read_text() == "chat v1\n"
