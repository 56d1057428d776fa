"""Failed attempts are visible: a hook edit its test rejected (also a proposal the review gate never
held because its test rejected it) is recorded as an attempt, with the agent's words, the diff it
proposed and the test's output; published at once and listed after a restart; it takes no review.

The example workspace (made by `evolve init`), its real hook and test, real git and SQLite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.protocol.events import Event
from engine.protocol.records import Attempt
from engine.runtime import Engine
from tests.support.in_process import run_engine

pytestmark = pytest.mark.hooks

SAID = {"text": "I will call the hook memo, it reads better.", "reasoning": "Names matter."}
RENAME = {"hook": "notes.py", "oldString": 'NAME = "notes"', "newString": 'NAME = "memo"'}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "engine", "init", str(root)], check=True, capture_output=True)
    return root


@pytest.mark.parametrize("review", ["log", "gate"])
def test_an_edit_its_test_rejected_is_an_attempt_with_words_diff_and_output(ws: Path, review: str) -> None:
    events: list[Event] = []

    async def body(engine: Engine) -> str:
        engine.bus.listen(events.append)
        engine.sessions.update("ses_a", title="Tidying")
        head = engine.git.head()
        call = await engine.tools.call(
            "evolve_hook_edit", RENAME, session="ses_a", call_id="c9", context=SAID
        )
        assert call.error == "validation failed:" and call.commit is None and call.pending is None
        assert engine.git.head() == head and engine.changes.pending() == [], "nothing installed or held"
        [published] = [Attempt.from_dict(e.data) for e in events if e.kind == "attempt"]
        assert published.diff is None and published.output is None, "the event carries the summary"
        attempt = engine.attempts.get(published.id)
        assert attempt is not None
        assert (attempt.file, attempt.state, attempt.hook) == (
            "hooks/notes.py",
            "rejected by its test",
            "notes.py",
        )
        assert (attempt.session, attempt.call_id, attempt.tool, attempt.review) == (
            "ses_a",
            "c9",
            "evolve_hook_edit",
            review,
        )
        assert attempt.message == "edit hook notes.py"
        assert attempt.diff is not None
        assert '-NAME = "notes"\n+NAME = "memo"\n' in attempt.diff and attempt.diff.startswith(
            "--- a/hooks/notes.py"
        )
        assert attempt.output is not None and "notes_test: 4 checks, 1 failed" in attempt.output
        prov = attempt.provenance
        assert prov is not None and prov.agent_text == SAID["text"] and prov.session_title == "Tidying"
        assert prov.validation is not None and not prov.validation.ok and prov.validation.failed == 1
        return attempt.id

    attempt_id = run_engine(ws, body, env={**os.environ, "EVOLVE_REVIEW": review})

    async def after_restart(engine: Engine) -> None:
        listed = engine.attempts.listed()
        assert [a.id for a in listed] == [attempt_id]
        assert listed[0].diff is None and listed[0].provenance is not None
        whole = engine.attempts.get(attempt_id)
        assert whole is not None and whole.diff and whole.output

    run_engine(ws, after_restart, env={**os.environ, "EVOLVE_REVIEW": review})


def test_an_edit_that_passes_or_a_check_by_hand_is_no_attempt(ws: Path) -> None:
    async def body(engine: Engine) -> None:
        fine = {"hook": "notes.py", "oldString": "List your notes", "newString": "List all your notes"}
        assert (await engine.tools.call("evolve_hook_edit", fine, session="s")).error is None
        source = (ws / "hooks" / "notes.py").read_text(encoding="utf-8")
        checked = await engine.tools.call(
            "evolve_hook_validate",
            {"hook": "notes.py", "content": source.replace('"notes"', '"memo"')},
            session="s",
        )
        assert checked.error == "validation failed:"
        operator = await engine.tools.call("evolve_hook_edit", RENAME, origin="operator")
        assert operator.error == "validation failed:"
        assert engine.attempts.listed() == [], "only the agent's own edits, and only rejected ones"

    run_engine(ws, body)
