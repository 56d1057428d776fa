"""The operator's side of self-modifications in the engine: provenance recorded when a change is made
(and still there after a restart), review states, what a revert touches (sessions, later changes),
reverting together, refreshing sessions, and telling the agent what became of its change.

Real workspaces (the example one, made by `evolve init`), real git, real hooks and tests; the
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

from engine.changes.history import ChangeError
from engine.protocol.records import Change
from engine.runtime import Engine
from tests.support.in_process import run_engine

SAID = {"text": "The preamble should mention the notebook.", "reasoning": "The user keeps asking."}
PROMPT_EDIT = {"prompt": "chat.md", "oldString": "plainly and briefly", "newString": "plainly, with care"}
HOOK_EDIT = {
    "hook": "notes.py",
    "oldString": '"description": "List your notes',
    "newString": '"description": "List all your notes',
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "engine", "init", str(root)], check=True, capture_output=True)
    return root


def with_deliveries(ws: Path, body: Callable[[Engine], Awaitable[Any]], **env: str) -> Any:
    """`body(engine)` with the notifications the engine delivers kept in `engine.delivered`."""

    def keep_deliveries(engine: Engine) -> None:
        delivered: list[tuple[str, str]] = []

        async def deliver(session: str, text: str) -> None:
            delivered.append((session, text))

        engine.notifier.deliver = deliver
        engine.delivered = delivered  # type: ignore[attr-defined]

    return run_engine(ws, body, env={**os.environ, **env}, prepare=keep_deliveries)


def newest(engine: Engine) -> Change:
    return engine.changes.history(10)[0]


# ---- counts in a test's output -----------------------------------------------------------------


# ---- provenance ---------------------------------------------------------------------------------


def test_a_hook_edit_records_why_what_and_the_evidence_in_git_and_the_tool_call(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        engine.sessions.update("ses_a", title="Notebook upkeep")
        call = await engine.tools.call(
            "evolve_hook_edit", HOOK_EDIT, session="ses_a", call_id="c1", context=SAID
        )
        assert call.error is None and call.commit
        assert call.validation is not None and call.validation.ok
        assert (call.validation.passed, call.validation.failed, call.validation.total) == (4, None, 4)
        assert call.context == SAID

    with_deliveries(ws, body)

    async def after_restart(engine: Engine) -> None:  # a new engine reads it from git
        change = newest(engine)
        prov = change.provenance
        assert prov is not None
        assert (prov.session, prov.session_title, prov.call_id, prov.tool) == (
            "ses_a",
            "Notebook upkeep",
            "c1",
            "evolve_hook_edit",
        )
        assert prov.agent_text == SAID["text"] and prov.reasoning == SAID["reasoning"]
        assert prov.args["oldString"] == HOOK_EDIT["oldString"]
        evidence = prov.validation
        assert (
            evidence is not None
            and evidence.test == "notes_test.py"
            and evidence.command == "tests/notes_test.py"
        )
        assert evidence.ok and evidence.exit_code == 0 and evidence.duration_ms > 0
        assert "4 checks, 4 passed" in evidence.output_tail
        assert change.state == "unreviewed"

    with_deliveries(ws, after_restart)
    note = subprocess.run(
        ["git", "-C", str(ws), "notes", "--ref=refs/notes/evolve-provenance", "show", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '"agent_text": "The preamble should mention the notebook."' in note


def test_a_failed_validation_is_evidence_too(ws: Path) -> None:
    renamed = {"hook": "notes.py", "oldString": 'NAME = "notes"', "newString": 'NAME = "memo"'}

    async def body(engine: Engine) -> None:
        call = await engine.tools.call("evolve_hook_edit", renamed, session="s")
        assert call.error == "validation failed:" and call.commit is None
        assert call.validation is not None and not call.validation.ok and call.validation.exit_code == 1
        assert call.validation.failed == 1 and call.validation.total == 4

    with_deliveries(ws, body)


def test_under_the_gate_the_pending_change_carries_its_provenance_to_the_commit(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        call = await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="ses_g", context=SAID)
        assert call.pending and call.commit is None
        held = engine.changes.get(call.pending)
        assert held.provenance is not None and held.provenance.agent_text == SAID["text"]
        await engine.changes.approve_pending(held.id)
        change = newest(engine)
        assert change.provenance is not None and change.provenance.session == "ses_g"
        assert change.state == "approved"

    with_deliveries(ws, body, EVOLVE_REVIEW="gate")


# ---- review states ------------------------------------------------------------------------------


def test_review_states_tell_apart_what_needs_a_look(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        await engine.tools.call("notes_add", {"text": "a note"}, session="s")  # data, not self
        await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="s")
        history = engine.changes.history(10)
        by_subject = {c.subject: c for c in history}
        assert by_subject["edit prompt chat.md"].state == "unreviewed"
        assert by_subject["update add"].state == "none"
        assert history[-1].origin == "initial" and history[-1].state == "none"
        edit = by_subject["edit prompt chat.md"]

        await engine.changes.approve(edit.sha)
        assert engine.changes.change(edit.sha).state == "approved"
        result = await engine.changes.revert(edit.sha)
        reverted = engine.changes.change(edit.sha)
        assert reverted.state == "reverted" and reverted.reverted_by == result.sha
        revert = engine.changes.change(result.sha)
        assert revert.reverts == edit.sha and revert.origin == "operator" and revert.state == "none"

    with_deliveries(ws, body)


# ---- what a revert touches ----------------------------------------------------------------------


def test_impact_lists_sessions_frozen_under_that_version_and_later_changes(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        await engine.bridge.request_system("ses_before", ["opencode"])
        await asyncio.sleep(1.1)  # commit times have a resolution of one second
        first = await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="ses_author")
        await engine.bridge.request_system("ses_during", ["opencode"])
        await asyncio.sleep(1.1)
        again = {
            "prompt": "chat.md",
            "oldString": "plainly, with care",
            "newString": "plainly, with great care",
        }
        second = await engine.tools.call("evolve_prompt_edit", again, session="ses_author")
        await asyncio.sleep(1.1)
        await engine.bridge.request_system("ses_after", ["opencode"])
        impact = engine.changes.impact(str(first.commit))
        assert [s.id for s in impact.sessions] == ["ses_during"]
        assert [c["sha"] for c in impact.later] == [second.commit]
        # Frozen under the later version: a revert together undoes that one too.
        assert [s.id for s in impact.later_sessions] == ["ses_after"]

    with_deliveries(ws, body)


def test_a_conflicting_revert_names_the_later_changes_and_together_undoes_them_in_one_commit(
    ws: Path,
) -> None:
    async def body(engine: Engine) -> None:
        first = await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="s")
        again = {
            "prompt": "chat.md",
            "oldString": "plainly, with care",
            "newString": "plainly, with great care",
        }
        second = await engine.tools.call("evolve_prompt_edit", again, session="s")
        head = engine.git.head()
        with pytest.raises(ChangeError) as refused:
            await engine.changes.revert(str(first.commit))
        assert str(second.commit)[:10] in str(refused.value)
        assert refused.value.details["later"] == [second.commit]
        assert engine.git.head() == head and engine.git.dirty_files() == []  # nothing changed

        result = await engine.changes.revert(str(first.commit), together=True)
        assert result.reverted == [second.commit, first.commit]
        assert "plainly and briefly" in (ws / "prompts" / "chat.md").read_text()
        assert engine.git.head() == result.sha
        log = subprocess.run(
            ["git", "-C", str(ws), "log", "--format=%s", "-3"], capture_output=True, text=True
        )
        assert log.stdout.splitlines()[0] == "revert: edit prompt chat.md and 1 later change(s)"

    with_deliveries(ws, body)


def test_a_revert_refreshes_the_sessions_it_is_asked_to(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        change = await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="s")
        await engine.bridge.request_system("ses_x", ["opencode"])
        await engine.bridge.request_system("ses_y", ["opencode"])
        frozen_x = engine.sessions.frozen("ses_x")
        assert frozen_x is not None and "plainly, with care" in "".join(frozen_x)
        result = await engine.changes.revert(str(change.commit), refresh=["ses_x", "ses_unknown"])
        assert result.refreshed == ["ses_x"]
        assert engine.sessions.frozen("ses_x") is None and engine.sessions.frozen("ses_y") is not None
        recomposed = await engine.bridge.request_system("ses_x", ["opencode"])
        assert recomposed is not None and "plainly and briefly" in "".join(recomposed)

    with_deliveries(ws, body)


# ---- closing the loop with the agent ------------------------------------------------------------


def test_the_author_hears_of_approval_revert_and_rejection(ws: Path) -> None:
    async def body(engine: Engine) -> list[tuple[str, str]]:
        engine.sessions.get("ses_author")
        engine.sessions.get("ses_other")
        change = await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="ses_author")
        await engine.changes.approve(str(change.commit))
        await engine.changes.revert(str(change.commit))
        delivered: list[tuple[str, str]] = engine.delivered  # type: ignore[attr-defined]
        assert [s for s, _ in delivered] == ["ses_author", "ses_author"]
        assert 'approved your change "edit prompt chat.md"' in delivered[0][1]
        assert 'reverted your change "edit prompt chat.md"' in delivered[1][1]
        notes = engine.sessions.find("ses_author").notifications  # type: ignore[union-attr]
        assert [n.change for n in notes] == [change.commit, engine.git.head()]
        assert engine.sessions.find("ses_other").notifications == []  # type: ignore[union-attr]
        return delivered

    with_deliveries(ws, body)

    async def gated(engine: Engine) -> None:
        engine.sessions.get("ses_author")
        call = await engine.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="ses_author")
        await engine.changes.reject_pending(str(call.pending), reason="keep answers brief")
        delivered: list[tuple[str, str]] = engine.delivered  # type: ignore[attr-defined]
        assert len(delivered) == 1 and delivered[0][0] == "ses_author"
        assert "rejected your proposed change" in delivered[0][1]
        assert "because: keep answers brief" in delivered[0][1]

    with_deliveries(ws, gated, EVOLVE_REVIEW="gate")


def test_a_refused_call_is_recorded_and_not_run(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        call = await engine.tools.call(
            "notes_add",
            {"text": "x", "priority": "high"},
            session="s",
            permission="denied by opencode",
            refused="The user rejected permission",
        )
        assert call.error == "permission denied: The user rejected permission"
        assert call.permission == "denied by opencode" and call.commit is None
        assert not (ws / "notes" / "notes.json").exists()
        assert engine.journal is not None
        engine.journal.flush()
        [stored] = engine.journal.tool_calls(limit=5)
        assert stored.permission == "denied by opencode"

    with_deliveries(ws, body)
