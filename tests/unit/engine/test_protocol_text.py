"""The words of a replay's findings that `evolve replay` and the console share (engine.protocol.text)."""

from __future__ import annotations

from engine.protocol.records import FieldDiff, InputComparison
from engine.protocol.text import absence, failure_lines, grouped_by_failures, short_target, shorten
from engine.replay.text import marked


def test_a_long_unchanged_stretch_is_cut_next_to_the_changes_around_it() -> None:
    text = "a" * 10 + "b" * 5000 + "c" * 10
    assert shorten(text, 10) == "a" * 10 + "[… 5,000 unchanged characters …]" + "c" * 10
    assert shorten(text, 10, first=True) == "[… 5,010 unchanged characters …]" + "c" * 10
    assert shorten(text, 10, last=True) == "a" * 10 + "[… 5,010 unchanged characters …]"
    assert shorten(text, 10, first=True, last=True) == "[… 5,020 unchanged characters …]"


def test_a_stretch_a_cut_would_hardly_shorten_is_kept_whole() -> None:
    kept = "x" * 40  # 10 on each side and 20 more: a cut would hide 20 characters
    assert shorten(kept, 10) == kept
    assert shorten(kept + "y", 10) == "x" * 10 + "[… 21 unchanged characters …]" + "x" * 9 + "y"


def test_the_command_line_cuts_as_the_console() -> None:
    """`evolve replay` prints the counts as the console shows them (1,755, not 1755)."""
    segments = [["=", "w " * 1000], ["-", "old"], ["+", "new"], ["=", " end"]]
    assert marked(segments) == "[… 1,920 unchanged characters …]" + "w " * 40 + "[-old-]{+new+} end"


def test_a_field_that_comes_or_goes_says_so() -> None:
    assert absence(FieldDiff("system", "system prompt", before_absent=True)) == (
        " (new: the version before gave none)"
    )
    assert absence(FieldDiff("system", "system prompt", after_absent=True)) == (
        " (gone: the version after gives none)"
    )
    assert absence(FieldDiff("system", "system prompt", [["+", "x"]])) == ""


def test_a_commit_is_named_by_the_start_of_its_sha_a_held_change_by_its_id() -> None:
    assert short_target("0123456789abcdef0123456789abcdef01234567") == "0123456789"
    assert short_target("chg_1a2b3c4d5e6f7a8b9c0") == "chg_1a2b3c4d5e6f7a8b9c0"


def test_inputs_that_fail_alike_are_grouped_in_the_order_they_come() -> None:
    broken = ["hooks/a.py mutate_request: exit 1 (Traceback)"]
    first = InputComparison("dsp_1", "failed", errors_after=broken)
    other = InputComparison("dsp_2", "failed", errors_before=["timeout"], errors_after=["boom\nsecond line"])
    again = InputComparison("dsp_3", "failed", errors_after=list(broken))
    assert failure_lines(other) == ["before: timeout", "after: boom", "second line"]
    assert grouped_by_failures([first, other, again]) == [
        (["after: hooks/a.py mutate_request: exit 1 (Traceback)"], [first, again]),
        (["before: timeout", "after: boom", "second line"], [other]),
    ]
