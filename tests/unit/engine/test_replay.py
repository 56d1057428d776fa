"""Replay's comparison of words and its choice of inputs, on records (replays with real hooks are in
tests/engine/test_replay.py)."""

from __future__ import annotations

import time

from engine.protocol.records import InputComparison, inputs_named
from engine.replay.inputs import Recorded, choose
from engine.replay.worddiff import compare, volatile
from tests.support.segments import ops


def test_words_that_vary_between_two_runs_are_not_a_change() -> None:
    first, again = "at 12:00:01 say hello\n", "at 12:00:03 say hello\n"
    noise = volatile(first, again)
    assert compare(first, "at 12:00:09 say hello\n", noise) == (
        False,
        [["=", "at 12:00:"], ["~", "09 "], ["=", "say hello\n"]],
    )
    changed, segments = compare(first, "at 12:00:09 say goodbye\n", noise)
    assert changed
    assert (ops(segments, "-"), ops(segments, "+"), ops(segments, "~")) == ("hello", "goodbye", "09 ")


def test_a_replaced_word_is_one_change_and_a_rewritten_sentence_too() -> None:
    assert compare("Answer plainly and briefly.", "Answer tersely and briefly.") == (
        True,
        [["=", "Answer "], ["-", "plainly"], ["+", "tersely"], ["=", " and briefly."]],
    )
    # Not "[-You are talking with the person-]{+Do not mention changes+} you [-work for-]...": the
    # words both happen to keep do not cut the rewrite into pieces.
    _, segments = compare(
        "You are talking with the person you work for. Check your notes first.\n",
        "Do not mention changes you make to your own prompts.\n",
    )
    assert [op for op, _ in segments] == ["-", "+", "="], segments


def test_inputs_are_chosen_from_distinct_sessions_first_newest_first() -> None:
    recorded = [
        Recorded(f"d{i}", at=float(i), session=session, context={}, history=None)
        for i, session in enumerate(["a", "a", "a", "b", "c", "c"])
    ]
    picked = choose(recorded, 4)
    # the newest of a, b and c (d2, d3, d5), then the newest of the rest (d4); newest first
    assert [r.source for r in picked] == ["d5", "d4", "d3", "d2"]


def test_the_inputs_of_a_difference_are_named_by_their_sessions_title() -> None:
    at = 1_795_000_000.0
    named = inputs_named(
        [
            InputComparison(
                "dsp_1", "changed", recorded_at=at, session="ses_1", session_title="Fix the parser"
            ),
            InputComparison("dsp_2", "changed", session="ses_2"),
            InputComparison("hooks/notes.py", "changed"),
            InputComparison("dsp_4", "changed"),
        ]
    )
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    assert named == (
        f"4 inputs (dsp_1 [session “Fix the parser”, {when}], dsp_2 [session ses_2], hooks/notes.py and 1 more)"
    )
    assert inputs_named([InputComparison("dsp_2", "changed", session="ses_2")]) == "dsp_2 [session ses_2]"
