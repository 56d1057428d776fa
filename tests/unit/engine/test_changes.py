"""Reading the counts of passed and failed tests from a test run's output."""

from __future__ import annotations

from typing import Any

import pytest

from engine.changes.provenance import parse_counts


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        ("==== 3 passed, 1 failed in 0.12s ====", (3, 1, 4)),
        ("5 passed in 0.1s", (5, None, 5)),
        ("Ran 12 tests in 0.003s\n\nOK", (12, 0, 12)),
        ("Ran 12 tests in 0.003s\n\nFAILED (failures=2, errors=1)", (9, 3, 12)),
        ("notes_test: 4 checks, 4 passed", (4, None, 4)),
        ("notes_test: 4 checks, 1 failed", (3, 1, 4)),
        ("1..5\nok 1\nnot ok 2\n# pass 4\n# fail 1", (4, 1, 5)),
        ("12 tests, 12 passed", (12, None, 12)),
        ("1,234 passed, 2 failed", (1234, 2, 1236)),
        ("everything looks fine", (None, None, None)),
    ],
)
def test_counts_are_read_from_common_summary_lines(output: str, counts: tuple[Any, ...]) -> None:
    assert parse_counts(output) == counts
