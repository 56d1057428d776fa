"""A change's reach: the sessions that run it (frozen under it; for a hook, also those whose hooks ran
after it) and the agent's answers in each since, as the journal keeps them; and a change that ran
no test says so where the evidence would be.

The example workspace (made by `evolve init`), its real hook, real git and SQLite; sessions ask for
their system prompt and finish answers as opencode makes them do, through the engine's bridge."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.runtime import Engine
from tests.support.in_process import run_engine

pytestmark = pytest.mark.hooks

PROMPT_EDIT = {"prompt": "chat.md", "oldString": "plainly and briefly", "newString": "plainly, with care"}
LATER_EDIT = {"prompt": "chat.md", "oldString": "plainly, with care", "newString": "warmly"}
HOOK_EDIT = {"hook": "notes.py", "oldString": "List your notes", "newString": "List all your notes"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "engine", "init", str(root)], check=True, capture_output=True)
    return root


async def compose(engine: Engine, session: str, title: str) -> None:
    """A session's first request: its system prompt is composed by the hooks and frozen."""
    engine.sessions.update(session, title=title)
    assert await engine.bridge.request_system(session, ["You are opencode."]) is not None


async def answers(engine: Engine, session: str, *texts: str) -> None:
    for i, text in enumerate(texts):
        await engine.stages.dispatch(
            "observe_message",
            {"session": {"id": session}, "thinking": "", "calls": [{"tool": "notes_forget"}], "answer": text},
            session=session,
            turn=f"msg_{session}_{i}",
        )
    engine.journal.flush()  # a change's reach is read from the journal: what was answered is in it


async def edit(engine: Engine, tool: str, args: dict[str, str]) -> str:
    done = await engine.tools.call(tool, args, session="ses_agent")
    assert done.error is None and done.commit, done.output
    time.sleep(0.01)  # what happens next is after it, to the clock
    return done.commit


def test_a_prompt_change_reaches_the_sessions_frozen_under_it_with_their_answers_since(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        await compose(engine, "ses_before", "Before")
        await answers(engine, "ses_before", "An answer before the change.")
        sha = await edit(engine, "evolve_prompt_edit", PROMPT_EDIT)
        await answers(engine, "ses_before", "Still on the old prompt.")  # frozen before: not reached
        await compose(engine, "ses_errands", "Errands")
        await answers(engine, "ses_errands", "I will not delete that note.", "Done.")

        reach = engine.changes.reach(sha)
        assert reach.sha == sha and reach.files == ["prompts/chat.md"] and reach.until is None
        assert reach.untested == "no test covers prompts/chat.md"
        [errands] = reach.sessions
        assert (errands.session.id, errands.session.title, errands.how) == (
            "ses_errands",
            "Errands",
            "frozen under it",
        )
        assert errands.session.history is None
        assert [a.text for a in errands.answers] == ["Done.", "I will not delete that note."], "newest first"
        assert errands.answers[0].calls == ["notes_forget"] and errands.answers[0].turn == "msg_ses_errands_1"
        assert errands.answers[0].dispatch.startswith("dsp_") and errands.more == 0
        listed = next(c for c in engine.changes.history(5) if c.sha == sha)
        assert listed.untested == "no test covers prompts/chat.md"

        later = await edit(engine, "evolve_prompt_edit", LATER_EDIT)
        await compose(engine, "ses_later", "Later")
        await answers(engine, "ses_later", "On the later prompt.")
        bounded = engine.changes.reach(sha)
        assert bounded.later == later and bounded.until is not None
        assert [r.session.id for r in bounded.sessions] == ["ses_errands"], "ses_later runs the later change"

    run_engine(ws, body)


def test_a_hook_change_reaches_every_session_whose_hooks_ran_after_it_and_its_test_is_its_evidence(
    ws: Path,
) -> None:
    async def body(engine: Engine) -> None:
        await compose(engine, "ses_old", "Old")
        sha = await edit(engine, "evolve_hook_edit", HOOK_EDIT)
        await answers(engine, "ses_old", "Listed all notes.")
        await compose(engine, "ses_new", "New")
        await answers(engine, "ses_new", "Hello.")
        reach = engine.changes.reach(sha)
        assert reach.untested is None, "its test ran: the evidence is on the change"
        assert {(r.session.id, r.how) for r in reach.sessions} == {
            ("ses_old", "its hooks ran after it"),
            ("ses_new", "frozen under it"),
        }
        old = next(r for r in reach.sessions if r.session.id == "ses_old")
        assert [a.text for a in old.answers] == ["Listed all notes."]

    run_engine(ws, body)
