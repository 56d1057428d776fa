"""A replay's word-level comparison (engine.replay.worddiff, engine.replay.clock): no word is shown
removed and added as it was, and what reads as the clock while the replay ran is volatile, not a
change, even where two runs of the version before happened within the same second."""

from __future__ import annotations

import time

import pytest

from engine.replay.clock import Window
from engine.replay.compare import Outcome, compare_input
from engine.replay.worddiff import compare, volatile


def removed_and_added(segments: list[list[str]]) -> set[str]:
    """The words shown both removed and added."""

    def words(op: str) -> set[str]:
        return {w for text in (t for o, t in segments if o == op) for w in text.split()}

    return words("-") & words("+")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # a word dropped before a kept word and another added after it: not "-x notes_stats+notes_stats y"
        ("Call remove_everything notes_stats now.", "Call notes_stats immediately_and_quietly now."),
        # the kept word ends a line in one version and is followed by a space in the other
        ("Use the tool called notes_stats\nthen stop.", "Use the tool called notes_stats then stop."),
        ("the old_words notes_stats", "notes_stats the_new_words"),
    ],
)
def test_no_word_is_shown_removed_and_added_unchanged(before: str, after: str) -> None:
    changed, segments = compare(before, after)
    assert changed
    assert removed_and_added(segments) == set(), segments
    assert "".join(t for o, t in segments if o != "-") == after, "the segments read as the text after"


def test_a_word_whose_space_changed_is_kept_and_the_space_is_marked() -> None:
    changed, segments = compare("Use notes_stats\nthen stop.", "Use notes_stats then stop.")
    assert changed, "a changed line break is a change"
    assert segments == [["=", "Use notes_stats"], ["-", "\n"], ["+", " "], ["=", "then stop."]]


def now_window() -> Window:
    now = time.time()
    return Window(now - 1.0, now)


@pytest.mark.parametrize(
    ("fmt", "step"),
    [
        ("%Y-%m-%dT%H:%M:%S", 1),  # a session's start time, to the second
        ("%H:%M:%S", 1),
        ("%Y-%m-%d %H:%M:%S UTC", 1),
    ],
)
def test_a_time_read_from_the_clock_is_volatile_even_when_both_runs_before_fell_in_one_second(
    fmt: str, step: int
) -> None:
    now = time.time()
    first = f"Session started {time.strftime(fmt, time.gmtime(now - 1))}; be brief."
    later = f"Session started {time.strftime(fmt, time.gmtime(now))}; be brief."
    assert first != later
    noise = volatile(first, first)  # the two runs before printed the same second
    assert not noise
    changed, segments = compare(first, later, noise, now_window())
    assert not changed, segments
    assert any(op == "~" for op, _ in segments)
    changed, _ = compare(first, later.replace("brief", "thorough"), noise, now_window())
    assert changed, "a real change beside the clock still counts"


def test_epoch_numbers_of_now_are_the_clock_and_other_numbers_are_not() -> None:
    now = time.time()
    changed, _ = compare(f"t={int(now) - 1}", f"t={int(now)}", None, now_window())
    assert not changed
    changed, _ = compare(f"t={time.time_ns() - 10**9}", f"t={time.time_ns()}", None, now_window())
    assert not changed
    changed, _ = compare("limit 1000000001", "limit 1000000002", None, now_window())
    assert changed, "a number far from now is not the clock"


def test_a_time_that_is_not_the_replays_moment_is_a_change() -> None:
    changed, segments = compare(
        "Remind me on 2001-02-03T04:05:06Z.", "Remind me on 2001-02-03T04:05:07Z.", None, now_window()
    )
    assert changed
    assert ["-", "06Z"] in segments and ["+", "07Z"] in segments
    assert compare("at 10:00:05", "at 10:00:06")[0], "without a window nothing is the clock"


def test_an_input_whose_only_difference_is_the_clock_is_unchanged_and_says_the_field_varies() -> None:
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 1))
    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    before = Outcome(view={"system": [f"Started {stamp}. Notes: none."]})
    found = compare_input(
        "mutate_request",
        "dsp_1",
        before,
        Outcome(view=dict(before.view)),
        Outcome(view={"system": [f"Started {later}. Notes: none."]}),
        clock=now_window(),
    )
    assert found.status == "unchanged" and found.diffs == []
    assert found.volatile == ["system prompt"]
