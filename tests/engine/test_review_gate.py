"""The review gate has no stuck states: a held change whose file changes under it (another held
change on the same file approved, a person's edit, a commit made while no engine ran) is stale at
once, published, with why and the commit that changed it; the agent is told; approving it is refused
in plain words with the three versions to compare, never a silent overwrite; the operator dismisses
it with a reason; and a decided or stale change's replay stops.

The example workspace (made by `evolve init`) under `"review": "gate"`, real git, real hooks; the
delivery of notifications to opencode is the only thing replaced (by a list)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.api.changes import counts
from engine.changes.history import ChangeError
from engine.protocol.events import Event
from engine.protocol.records import PendingChange, ReplayResult
from engine.runtime import Engine
from tests.support.in_process import run_engine

FIRST = {"prompt": "chat.md", "oldString": "plainly and briefly", "newString": "plainly, with care"}
SECOND = {"prompt": "chat.md", "oldString": "Check your notes", "newString": "Always check your notes"}
SAID = {"text": "Make the chat prompt kinder.", "reasoning": ""}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "engine", "init", str(root)], check=True, capture_output=True)
    return root


def gated(ws: Path, body: Callable[[Engine], Awaitable[Any]], **env: str) -> Any:
    """`body(engine)` under the review gate, the notifications delivered kept in `engine.delivered`
    and every event in `engine.seen`."""

    def prepare(engine: Engine) -> None:
        delivered: list[tuple[str, str]] = []

        async def deliver(session: str, text: str) -> None:
            delivered.append((session, text))

        engine.notifier.deliver = deliver
        engine.delivered = delivered  # type: ignore[attr-defined]
        seen: list[Event] = []
        engine.bus.listen(seen.append)
        engine.seen = seen  # type: ignore[attr-defined]

    return run_engine(ws, body, env={**os.environ, "EVOLVE_REVIEW": "gate", **env}, prepare=prepare)


def pending_events(engine: Engine) -> list[PendingChange]:
    seen: list[Event] = engine.seen  # type: ignore[attr-defined]
    return [PendingChange.from_dict(e.data) for e in seen if e.kind == "pending"]


def added(diff: str) -> list[str]:
    """Which of the two edits a diff adds."""
    lines = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return [
        edit
        for edit in ("plainly, with care", "Always check your notes")
        if any(edit in line for line in lines)
    ]


async def told(engine: Engine, n: int) -> list[tuple[str, str]]:
    delivered: list[tuple[str, str]] = engine.delivered  # type: ignore[attr-defined]
    for _ in range(500):
        if len(delivered) >= n:
            break
        await asyncio.sleep(0.01)
    return delivered


def test_approving_one_of_two_held_changes_makes_the_other_stale_at_once_and_it_is_never_installed(
    ws: Path,
) -> None:
    original = (ws / "prompts" / "chat.md").read_text(encoding="utf-8")

    async def body(engine: Engine) -> None:
        engine.sessions.update("ses_a", title="Errands")
        first = await engine.tools.call("evolve_prompt_edit", FIRST, session="ses_a", context=SAID)
        second = await engine.tools.call("evolve_prompt_edit", SECOND, session="ses_a", context=SAID)
        assert first.pending and second.pending
        approved = await engine.changes.approve_pending(first.pending)
        assert approved.status == "approved" and approved.commit

        # stale at once: an event, no restart, with why and what changed under it
        stale = engine.changes.get(second.pending)
        assert stale.status == "stale" and stale.changed_by == approved.commit
        assert stale.note == (
            f"prompts/chat.md changed after the agent proposed this change (commit {approved.commit[:10]} "
            f'"edit prompt chat.md" changed it), so it can no longer be approved as it is: it would undo '
            "that change. Dismiss it, or ask the agent to make its change again on the file as it is now."
        )
        assert [(p.id, p.status) for p in pending_events(engine)][-2:] == [
            (second.pending, "stale"),
            (first.pending, "approved"),
        ]
        assert engine.changes.pending() == [], "nothing left to decide"
        held = [p.summary() for p in engine.changes.pending(include_decided=True)]
        badge = counts(engine.changes.history(10), held, 0)
        assert (badge["awaiting"], badge["stale"]) == (0, 1), "the badge counts only what can be decided"
        # the agent is told, as for a rejection
        delivered = await told(engine, 2)
        assert any(
            f'"edit prompt chat.md" to prompts/chat.md was not installed: prompts/chat.md changed after '
            f"you proposed it (commit {approved.commit[:10]}" in text
            for _, text in delivered
        ), delivered

        # the review shows what the agent changed, and warns that the diff now would undo the other
        review = engine.changes.review(second.pending)
        assert review.changed and review.current is not None and "plainly, with care" in review.current
        assert review.proposed_diff is not None and added(review.proposed_diff) == ["Always check your notes"]
        assert review.warning is not None and "would undo that change" in review.warning

        # approving it is refused in plain words, with the three versions; nothing is overwritten
        now = (ws / "prompts" / "chat.md").read_text(encoding="utf-8")
        with pytest.raises(ChangeError) as refused:
            await engine.changes.approve_pending(second.pending)
        message = str(refused.value)
        assert message.startswith(
            "Not approved: prompts/chat.md changed after the agent proposed this change"
        )
        assert "Nothing was installed" in message and "dismiss it" in message
        assert "Error" not in message and "approve_pending" not in message
        three = refused.value.details
        assert three["stale"] is True and three["changed_by"] == approved.commit
        assert three["base"] == original and three["current"] == now
        assert "Always check your notes" in three["proposed"] and "plainly and briefly" in three["proposed"]
        assert added(three["proposed_diff"]) == ["Always check your notes"]
        assert added(three["changed_diff"]) == ["plainly, with care"]
        assert (ws / "prompts" / "chat.md").read_text(encoding="utf-8") == now

        # dismissed with a reason (reject does the same for a stale change); the agent hears why
        dismissed = await engine.changes.reject_pending(second.pending, reason="redo it on the new prompt")
        assert dismissed.status == "dismissed" and "redo it on the new prompt" in (dismissed.note or "")
        assert pending_events(engine)[-1].status == "dismissed"
        delivered = await told(engine, 4)
        assert "because: redo it on the new prompt" in delivered[-1][1]
        with pytest.raises(ChangeError, match="already dismissed"):
            await engine.changes.dismiss_pending(second.pending)

    gated(ws, body)


def test_a_change_that_can_still_be_decided_is_not_dismissed_and_a_hand_edit_makes_it_stale(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        held = await engine.tools.call("evolve_prompt_edit", FIRST, session="ses_a")
        assert held.pending
        with pytest.raises(ChangeError, match="can still be decided"):
            await engine.changes.dismiss_pending(held.pending)
        chat = ws / "prompts" / "chat.md"
        chat.write_text(chat.read_text(encoding="utf-8") + "Be kind.\n", encoding="utf-8")
        external = await engine.commits.commit_external()  # what the watcher does with a person's edit
        assert external is not None
        stale = engine.changes.get(held.pending)
        assert stale.status == "stale" and stale.changed_by == external.sha
        assert "external change: prompts/chat.md" in (stale.note or "")

    gated(ws, body)


def test_a_file_changed_while_no_engine_ran_makes_its_held_change_stale_at_start(ws: Path) -> None:
    async def hold(engine: Engine) -> str:
        held = await engine.tools.call("evolve_prompt_edit", FIRST, session="ses_a")
        assert held.pending
        return held.pending

    pending_id = gated(ws, hold)
    chat = ws / "prompts" / "chat.md"
    chat.write_text(chat.read_text(encoding="utf-8") + "Be kind.\n", encoding="utf-8")
    person = ("-c", "user.name=A Person", "-c", "user.email=person@example.com")  # HOME may have none
    subprocess.run(["git", "-C", str(ws), *person, "commit", "-qam", "a person's edit"], check=True)
    sha = subprocess.run(
        ["git", "-C", str(ws), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    )

    async def after(engine: Engine) -> None:
        stale = engine.changes.get(pending_id)
        assert stale.status == "stale" and stale.changed_by == sha.stdout.strip()
        assert '"a person\'s edit" changed it' in (stale.note or "")

    gated(ws, after)


# Answers mutate_request at once in the workspace, and takes a minute in a copy that holds `slow`
# (a replay's), so that a replay is still running when its change is decided.
SLOW_IN_REPLAYS = (
    f"#!{sys.executable}\n"
    + """import json, os, sys, time
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "slow", "stages": ["mutate_request"]}))
elif stage == "mutate_request":
    if os.path.exists("slow"):
        time.sleep(60)
    print(json.dumps({"system": ["hello"]}))
"""
)


def test_a_decided_changes_replay_stops(ws: Path) -> None:
    hook = ws / "hooks" / "slow.py"
    hook.write_text(SLOW_IN_REPLAYS, encoding="utf-8")
    hook.chmod(0o755)

    async def body(engine: Engine) -> None:
        await engine.commits.commit_external()
        await engine.registry.discover()
        await engine.stages.dispatch("mutate_request", {"session": {"id": "s"}, "system": []}, session="s")
        (ws / "slow").write_text("", encoding="utf-8")
        held = await engine.tools.call("evolve_prompt_edit", FIRST, session="ses_a")
        assert held.pending
        for _ in range(1000):
            running = engine.replays.latest(held.pending)
            if running is not None and running.state == "running" and running.done < running.total:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the held change's replay never ran")
        await engine.changes.reject_pending(held.pending, reason="no")
        seen: list[Event] = engine.seen  # type: ignore[attr-defined]
        for _ in range(1000):
            ended = [ReplayResult.from_dict(e.data) for e in seen if e.kind == "replay"]
            if ended:
                break
            await asyncio.sleep(0.01)
        [stopped] = ended
        assert stopped.target == held.pending and stopped.state == "cancelled"
        assert stopped.error == "stopped: the change was rejected while it was replayed"

    gated(ws, body)
