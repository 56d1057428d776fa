"""What the operator is asked before a decision on a change, on plain data. (The decisions themselves,
made against a real engine through the console, are in `test_actions.py` and `test_operator_loop.py`.)"""

from __future__ import annotations

from engine.protocol import Change
from evolve_console.decisions import approve_question, revert_question
from evolve_console.model import ChangeEntry


def commit(state: str, subject: str = "edit prompt chat.md", reverted_by: str | None = None) -> ChangeEntry:
    return ChangeEntry.commit(
        Change(
            sha="a1b2c3d4e5" + "f" * 30,
            time=1.0,
            message=subject,
            subject=subject,
            trailers={},
            files=["prompts/chat.md"],
            origin="agent",
            state=state,
            reverted_by=reverted_by,
        )
    )


def test_only_a_reverted_change_asks_before_it_is_approved() -> None:
    for state in ("unreviewed", "approved", "none"):
        assert approve_question(commit(state)) is None
    question, detail = approve_question(commit("reverted", reverted_by="9" * 40)) or ("", "")
    assert question == "Approve “edit prompt chat.md”, which was reverted?"
    assert detail == (
        "It was undone by 9999999999; approving it records that you looked at it and found it good. "
        "It stays reverted."
    )


def test_questions_cut_a_long_subject() -> None:
    long = "rewrite " + "the prompt " * 20
    question, _ = approve_question(commit("reverted", long, "9" * 40)) or ("", "")
    assert question.startswith("Approve “rewrite the prompt") and len(question) < 90
    assert "…" in question
    asked = revert_question(commit("unreviewed", long))
    assert asked.startswith("Revert a1b2c3d4e5 “rewrite the prompt") and asked.endswith("…”?")
    assert revert_question(commit("unreviewed")) == "Revert a1b2c3d4e5 “edit prompt chat.md”?"
