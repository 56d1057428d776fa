"""Faults the engine recovers from, and the gate it keeps, with real hooks, real git and a real
journal, in process: a hook that rewrites another hook, a hook that rewrites history, what a crash
leaves half done (interrupted tool calls, approvals, temporary files), a stuck journal, and who may
read what the engine keeps."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.api import build_app
from engine.api import runs as run_routes
from engine.changes.gitstore import GitStore
from engine.journal.store import Journal
from engine.protocol.events import Event
from engine.protocol.records import ToolCall
from engine.runtime import Engine
from tests.support.in_process import run_engine
from tests.support.workspace import make_ws, write_file

TARGET_OLD = (
    '#!/bin/sh\ncat >/dev/null\n[ "$1" = mutate_request ] && echo \'{"system": ["OLD"]}\' || echo \'{}\'\n'
)
TARGET_NEW = TARGET_OLD.replace("OLD", "NEW")
# Runs first (file name order): during tool_after it rewrites the other hook and writes a data file.
WRITER = f"""#!{sys.executable}
import sys
sys.stdin.read()
if sys.argv[1] == "tool_after":
    open("hooks/b_target.sh", "w").write({TARGET_NEW!r})
    open("notes.txt", "a").write("a note\\n")
print("{{}}")
"""
RESETTER = f"""#!{sys.executable}
import subprocess, sys
sys.stdin.read()
if sys.argv[1] == "idle":
    subprocess.run(["git", "reset", "-q", "--hard", "HEAD~3"], check=True)
print("{{}}")
"""


def reviewed_ws(tmp_path: Path, review: str = "log") -> Path:
    return make_ws(
        tmp_path,
        {
            "prompts/chat.md": "chat\n",
            "hooks/a_writer.py": WRITER,
            "hooks/b_target.sh": TARGET_OLD,
            "config/evolve.jsonc": json.dumps({"review": review}),
        },
    )


def run(ws: Path, body: Callable[[Engine, list[Event]], Awaitable[Any]]) -> Any:
    """`body(engine, events)`, `events` what the engine published from its start on."""
    events: list[Event] = []
    return run_engine(ws, lambda engine: body(engine, events), prepare=lambda e: e.bus.listen(events.append))


def git_log(ws: Path) -> list[dict[str, Any]]:
    return GitStore(ws).log(100)


def warnings(events: list[Event], source: str) -> list[str]:
    return [str(e.data["message"]) for e in events if e.kind == "warning" and e.data["source"] == source]


# ---- a hook that rewrites another hook -----------------------------------------------------------


def test_a_hook_rewriting_a_hook_is_committed_apart_as_unvalidated(tmp_path: Path) -> None:
    ws = reviewed_ws(tmp_path, review="log")

    async def body(engine: Engine, events: list[Event]) -> list[Event]:
        await engine.stages.dispatch("tool_after", {"tool": "bash"}, session="ses_1")
        await engine.commits.close()  # the background commit of what the hooks changed
        return events

    events = run(ws, body)
    first, second = git_log(ws)[:2]
    by_files = {tuple(c["files"]): c for c in (first, second)}
    unvalidated = by_files[("hooks/b_target.sh",)]
    assert unvalidated["message"].startswith(
        "unvalidated change by hooks during tool_after: hooks/b_target.sh"
    )
    assert unvalidated["trailers"]["origin"] == "hook"  # its own origin, not mixed with others
    assert unvalidated["trailers"]["unvalidated"] == "hooks/b_target.sh"
    assert by_files[("notes.txt",)]["message"].startswith("hooks changed files during tool_after")
    assert any("hooks/b_target.sh changed by hooks during tool_after" in w for w in warnings(events, "gate"))


def test_under_the_gate_a_hook_rewriting_a_hook_is_held_and_not_used(tmp_path: Path) -> None:
    ws = reviewed_ws(tmp_path, review="gate")

    async def body(engine: Engine, events: list[Event]) -> dict[str, Any]:
        during = await engine.stages.dispatch("tool_after", {"tool": "bash"}, session="ses_1")
        await engine.commits.close()
        assert engine.journal is not None
        await asyncio.to_thread(engine.journal.flush)
        runs = {r.hook: r for r in engine.journal.runs(dispatch_id=during.id)}
        after = await engine.stages.dispatch("mutate_request", {"system": []}, session="ses_2")
        held = engine.changes.pending()
        on_disk = (ws / "hooks" / "b_target.sh").read_text()
        committed = [c["files"] for c in engine.git.log(10)]
        approved = await engine.changes.approve_pending(held[0].id)
        later = await engine.stages.dispatch("mutate_request", {"system": []}, session="ses_3")
        return {
            "refused": runs["b_target.sh"].error,
            "after": after.merged,
            "held": held,
            "on_disk": on_disk,
            "committed": committed,
            "approved": approved,
            "later": later.merged,
            "warnings": warnings(events, "gate"),
            "head": engine.git.log(1)[0],
        }

    got = run(ws, body)
    # Within the stage in which it was rewritten, the rewritten hook did not run.
    assert "changed since hooks were discovered" in got["refused"]
    # Taken back at once and held: the next stage runs the version that passed review.
    assert got["on_disk"] == TARGET_OLD
    assert got["after"] == {"system": ["OLD"]}
    (held,) = got["held"]
    assert held.file == "hooks/b_target.sh" and held.content == TARGET_NEW and held.hook == "b_target.sh"
    assert held.tool is None and held.message == "hooks changed hooks/b_target.sh during tool_after"
    assert ["hooks/b_target.sh"] not in got["committed"]
    assert ["notes.txt"] in got["committed"]  # the rest of what hooks changed is committed as usual
    assert any(f"held for review as pending change {held.id}" in w for w in got["warnings"])
    # Once an operator approves it, it is committed (origin hook) and used.
    assert got["approved"].status == "approved"
    assert got["head"]["trailers"]["origin"] == "hook"
    assert got["head"]["trailers"]["approved-by"] == "operator"
    assert got["later"] == {"system": ["NEW"]}


# ---- history rewritten under the engine ----------------------------------------------------------


def test_a_hook_resetting_history_is_noticed_reported_and_recorded(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for name in ["chat.md", "preamble.md"]:
        write_file(ws / "prompts" / name, f"{name}\n")
    write_file(ws / "hooks" / "reset.py", RESETTER, 0o755)

    async def body(engine: Engine, events: list[Event]) -> dict[str, Any]:
        for i in range(4):
            await engine.tools.call("evolve_prompt_write", {"prompt": "chat.md", "content": f"v{i}\n"})
        before = engine.git.log(10)
        await engine.stages.dispatch("idle", {"answer": "x"}, session="ses_1")
        await engine.commits.close()
        assert engine.journal is not None
        await asyncio.to_thread(engine.journal.flush)
        return {
            "before": before,
            "changes": engine.changes.history(10),
            "warnings": warnings(events, "git"),
            "recorded": engine.journal.events(kind="history_rewritten"),
            "journal_warnings": engine.journal.events(kind="warning"),
        }

    got = run(ws, body)
    lost = [c["sha"] for c in got["before"][:3]]
    (warning,) = [w for w in got["warnings"] if w.startswith("history rewritten")]
    assert "3 commit(s) no longer in the history" in warning
    (recorded,) = got["recorded"]
    assert [c["sha"] for c in recorded["data"]["lost"]] == lost
    assert recorded["data"]["origin"] == "hook"
    assert any(e["data"]["message"] == warning for e in got["journal_warnings"])
    # The change list says so itself: the newest change is the record of the rewrite.
    mark = got["changes"][0]
    assert mark.subject == "history rewritten: 3 commit(s) removed from the history"
    assert mark.origin == "hook"
    assert mark.trailers["rewritten-from"] == got["before"][0]["sha"]
    assert mark.trailers["removed"].split() == lost
    assert mark.files == []
    assert mark.trailers["kept-at"].startswith("refs/evolve/rewritten/")
    kept = subprocess.run(
        ["git", "rev-parse", mark.trailers["kept-at"]], cwd=ws, capture_output=True, text=True, check=True
    )
    assert kept.stdout.strip() == got["before"][0]["sha"]  # the removed commits are not lost
    assert (ws / "prompts" / "chat.md").read_text() == "v0\n"


def test_a_hook_moving_head_without_touching_a_file_is_noticed(tmp_path: Path) -> None:
    """A stage that changes no file is settled without the write lock, unless HEAD moved: a soft
    reset leaves every file as it was, and is still caught at the end of the stage."""
    ws = tmp_path / "ws"
    write_file(ws / "prompts" / "chat.md", "chat\n")
    soft = RESETTER.replace('"--hard", "HEAD~3"', '"--soft", "HEAD~1"')
    write_file(ws / "hooks" / "reset.py", soft, 0o755)

    async def body(engine: Engine, events: list[Event]) -> dict[str, Any]:
        for i in range(2):
            await engine.tools.call("evolve_prompt_write", {"prompt": "chat.md", "content": f"v{i}\n"})
        await asyncio.sleep(0.1)  # the files' times are older than the stage that follows
        before = engine.git.log(10)
        await engine.stages.dispatch("idle", {"answer": "x"}, session="ses_1")
        await engine.commits.close()
        return {"before": before, "warnings": warnings(events, "git"), "after": engine.git.log(10)}

    got = run(ws, body)
    assert (ws / "prompts" / "chat.md").read_text() == "v1\n"  # no file was touched
    (warning,) = [w for w in got["warnings"] if w.startswith("history rewritten")]
    assert "1 commit(s) no longer in the history" in warning
    assert got["after"][0]["message"].startswith("history rewritten: 1 commit(s)")
    assert got["after"][1]["sha"] == got["before"][1]["sha"]


def test_a_reset_by_hand_while_the_engine_was_down_is_noticed_at_start(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_file(ws / "prompts" / "chat.md", "chat\n")

    async def edits(engine: Engine, events: list[Event]) -> None:
        for i in range(2):
            await engine.tools.call("evolve_prompt_write", {"prompt": "chat.md", "content": f"v{i}\n"})

    run(ws, edits)
    subprocess.run(["git", "reset", "-q", "--hard", "HEAD~2"], cwd=ws, check=True)
    got = run(ws, lambda engine, events: asyncio.sleep(0, warnings(events, "git")))
    assert any("2 commit(s) no longer in the history" in w for w in got)
    assert git_log(ws)[0]["message"].startswith("history rewritten: 2 commit(s)")
    assert git_log(ws)[0]["trailers"]["origin"] == "external"


# ---- what a crash leaves half done ---------------------------------------------------------------


def test_interrupted_calls_are_finished_at_start(tmp_path: Path) -> None:
    """A hook tool that died mid-run (its files changed, uncommitted), a read-only call, and the
    approval of a held change that wrote the file but never committed it."""
    ws = reviewed_ws(tmp_path)
    write_file(ws / "data" / "keep.txt", "before\n")
    run(ws, lambda engine, events: asyncio.sleep(0))  # the repository, the journal
    journal = Journal(ws / "state" / "journal.sqlite3")
    hook_call = ToolCall(id="call_h", tool="kit_mark", args={}, started_at=time.time() - 1, session="ses_9")
    journal.tool_call_started(
        hook_call,
        {
            "origin": "tool",
            "message": "update mark",
            "trailers": {"Origin": "tool", "Tool": "kit_mark", "Session": "ses_9", "Hook": "kit.py"},
            "files": None,
        },
    )
    journal.tool_call_started(
        ToolCall(id="call_r", tool="evolve_prompt_read", args={}, started_at=time.time())
    )
    journal.close()
    write_file(ws / "data" / "keep.txt", "written by the hook tool\n")
    held = {
        "id": "chg_x",
        "file": "prompts/chat.md",
        "base_sha256": "0" * 64,
        "message": "write prompt chat.md",
        "tool": "evolve_prompt_write",
        "session": "ses_8",
        "call_id": "c8",
        "hook": None,
        "created_at": time.time(),
        "content": "approved content\n",
    }
    write_file(ws / "state" / "pending" / "chg_x.json", json.dumps(held))
    write_file(ws / "prompts" / "chat.md", "approved content\n")  # written by the approval, then the crash

    async def body(engine: Engine, events: list[Event]) -> dict[str, Any]:
        assert engine.journal is not None
        await asyncio.to_thread(engine.journal.flush)
        return {"calls": {c.id: c for c in engine.journal.tool_calls()}, "log": engine.git.log(5)}

    got = run(ws, body)
    by_file = {tuple(c["files"]): c for c in got["log"]}
    tool_commit = by_file[("data/keep.txt",)]
    assert tool_commit["message"].startswith("update mark")
    assert tool_commit["trailers"]["origin"] == "tool"
    assert tool_commit["trailers"]["tool"] == "kit_mark" and tool_commit["trailers"]["hook"] == "kit.py"
    assert tool_commit["trailers"]["interrupted"] == "committed at restart"
    approval = by_file[("prompts/chat.md",)]
    assert approval["trailers"]["pending"] == "chg_x"
    assert "completed at restart" in approval["trailers"]["approved-by"]
    assert not [c for c in got["log"] if c["message"].startswith("external change")]
    calls = got["calls"]
    assert calls["call_h"].error is not None and calls["call_h"].error.startswith("interrupted")
    assert calls["call_h"].commit == tool_commit["sha"]
    assert calls["call_r"].error == (
        "interrupted: the engine stopped during this call; nothing it changed was left uncommitted"
    )
    with sqlite3.connect(ws / "state" / "journal.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM tool_calls WHERE running = 1").fetchone()[0] == 0


def test_leftovers_of_dead_processes_are_removed_at_start(tmp_path: Path) -> None:
    ws = reviewed_ws(tmp_path)
    dead = 4_194_304 + 7  # above any pid Linux hands out (pid_max is at most 2**22)
    stale = write_file(ws / "prompts" / f".chat.md.{dead}.abc123.evolve-tmp", "half written")
    live = write_file(ws / "prompts" / f".chat.md.{os.getpid()}.def456.evolve-tmp", "being written")
    stale_state = write_file(ws / "state" / f".evolve.json.{dead}.x1.evolve-tmp", "{}")
    copy = Path(tempfile.gettempdir()) / f"evolve-validate-{dead}-zz9"
    write_file(copy / "hooks" / "x.sh", "#!/bin/sh\n")

    got = run(ws, lambda engine, events: asyncio.sleep(0, engine.git.log(5)))
    assert not stale.exists() and not stale_state.exists() and not copy.exists()
    assert live.exists()  # its process is alive: it may still rename it into place
    assert not any(".evolve-tmp" in f for c in got for f in c["files"])  # never committed


# ---- a stuck journal, bounded answers ------------------------------------------------------------


def test_a_listing_whose_journal_is_stuck_answers_503_not_500(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = reviewed_ws(tmp_path)
    monkeypatch.setattr(run_routes, "FLUSH_TIMEOUT_S", 0.5)

    async def body(engine: Engine, events: list[Event]) -> httpx.Response:
        app = build_app(engine, "t")
        blocker = sqlite3.connect(ws / "state" / "journal.sqlite3", isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # the writer cannot commit until this ends
        try:
            await engine.stages.dispatch("idle", {"answer": "x"}, session="ses_1")
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://e",
                headers={"authorization": "Bearer t"},
                verify=False,
            ) as client:
                return await client.get("/v1/runs")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()

    resp = run(ws, body)
    assert resp.status_code == 503
    assert resp.headers["retry-after"] == "1"
    assert "retry" in resp.json()["error"]


# ---- private by default ----------------------------------------------------------------------------


def test_what_holds_conversations_is_readable_by_the_owner_only(tmp_path: Path) -> None:
    ws = reviewed_ws(tmp_path, review="gate")
    (ws / "state").mkdir(mode=0o755)
    os.chmod(ws / "state", 0o755)  # as an older engine left it

    async def body(engine: Engine, events: list[Event]) -> None:
        engine.sessions.set_history(
            "ses_1", [{"role": "user", "parts": [{"type": "text", "text": "secret"}]}]
        )
        await engine.tools.call(
            "evolve_prompt_write", {"prompt": "chat.md", "content": "x\n"}, session="ses_1"
        )
        engine.state.update({"heartbeat_session": "ses_1"})

    run(ws, body)
    state = ws / "state"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for path in [state / "journal.sqlite3", state / "evolve.json", *(state / "pending").glob("*.json")]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert list((state / "pending").glob("*.json")), "the gate held the agent's write"
