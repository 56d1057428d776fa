"""The scenario files of evals/: what a file may hold, and the errors of a wrong one, each with its
file, line and column (engine/evals/scenarios.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.evals.locate import positions
from engine.evals.scenarios import (
    OUTSIDE_TOOLS,
    Expectation,
    ScenarioError,
    check_text,
    load_scenarios,
    parse_scenario,
)

REPO = Path(__file__).resolve().parents[3]
FILE = "evals/forget.jsonc"

FULL = """// a scenario, as docs/evals.md writes one
{
  "name": "forget a note",
  description: 'the agent drops a note that is done',
  "agent": "build",
  "messages": [
    "Add a note: book the dentist.",
    "I did it: book the dentist. You can drop that note.",  // trailing commas are fine
  ],
  "expect": [
    {"called": "notes_forget"},
    {"called": "notes_add", "with": {"text": {"$contains": "dentist"}, "priority": {"$absent": true}}, "times": 1},
    {"not_called": "notes_add", "with": {"priority": "high"}},
    {"answer_contains": "dropped"},
    {"answer_not_contains": "can't"},
    {"answer_matches": "(?i)dropp(ed|ing)"},
    {"answer_not_matches": "permanent"},
    {"max_steps": 6},
  ],
  "timeout_ms": 60000,
}
"""


def errors(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, FILE)
    return [str(issue) for issue in caught.value.issues]


def test_a_full_scenario_reads_as_written() -> None:
    scenario = parse_scenario(FULL, FILE)
    assert scenario.name == "forget a note"
    assert scenario.description == "the agent drops a note that is done"
    assert scenario.agent == "build"
    assert scenario.messages == (
        "Add a note: book the dentist.",
        "I did it: book the dentist. You can drop that note.",
    )
    assert scenario.timeout_ms == 60000
    assert scenario.expectations[0] == Expectation("called", tool="notes_forget")
    assert scenario.expectations[1] == Expectation(
        "called",
        tool="notes_add",
        args={"text": {"$contains": "dentist"}, "priority": {"$absent": True}},
        count=1,
    )
    assert [e.words() for e in scenario.expectations] == [
        "calls notes_forget",
        'calls notes_add with text containing "dentist", no priority exactly 1 time',
        'does not call notes_add with priority = "high"',
        'the answer contains "dropped"',
        'the answer does not contain "can\'t"',
        "the answer matches /(?i)dropp(ed|ing)/",
        "the answer does not match /permanent/",
        "at most 6 steps",
    ]
    info = scenario.info()
    assert info.file == FILE and info.expectations[0] == "calls notes_forget"


def test_the_name_defaults_to_the_file_and_one_message_may_be_a_string() -> None:
    scenario = parse_scenario(
        '{"messages": "What is on my list?", "expect": [{"called": "notes_list"}]}', FILE
    )
    assert scenario.name == "forget"
    assert scenario.messages == ("What is on my list?",)
    assert scenario.agent is None and scenario.timeout_ms is None


def test_a_syntax_error_names_its_line_and_column() -> None:
    found = errors('{\n  "messages": ["hi"]\n  "expect": []\n}\n')
    assert found == [
        f"{FILE}:2:21: not valid JSON5: missing ',' after the value (the next one starts at line 3, column 3)"
    ]


def test_each_wrong_value_is_named_at_its_line_and_column() -> None:
    text = """{
  "messages": ["hi", 3],
  "expect": [
    {"called": "notes_add", "with": {"text": {"$regex": "x"}}},
    {"answer_contains": "a", "max_steps": 2},
    {"max_steps": 0},
    {"answer_matches": "(unclosed"},
    {"answer_contains": "x", "times": 2},
    "notes_add",
  ],
  "colour": "blue",
}
"""
    assert errors(text) == [
        f"{FILE}:11:13: field 'colour': unknown field (a scenario has name, description, agent, messages, expect, timeout_ms)",
        f"{FILE}:2:22: field 'messages[1]': expected a non-empty string, got number 3",
        f"{FILE}:4:46: field 'expect[0].with.text': a matcher is one of $contains, $matches, $absent, $any, alone (got $regex)",
        f"{FILE}:5:5: field 'expect[1]': an expectation is exactly one of called, not_called, answer_contains, "
        "answer_not_contains, answer_matches, answer_not_matches, max_steps (got answer_contains, max_steps)",
        f"{FILE}:6:19: field 'expect[2].max_steps': expected a whole number of steps, at least 1, got 0",
        f"{FILE}:7:24: field 'expect[3].answer_matches': not a regular expression: missing ), unterminated "
        "subpattern at position 0",
        f"{FILE}:8:39: field 'expect[4].times': 'times' goes with called or not_called, not answer_contains",
        f'{FILE}:9:5: field \'expect[5]\': expected an object such as {{"called": "notes_add"}}, got string',
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", f"{FILE}:1:1: expected an object at the top, got array"),
        (
            '{"expect": []}',
            f"{FILE}:1:1: field 'messages': expected the user messages: a non-empty string or list of strings",
        ),
        (
            '{"messages": []}',
            f"{FILE}:1:14: field 'messages': expected the user messages: a non-empty string or list of strings",
        ),
        (
            '{"messages": "x", "expect": {}}',
            f"{FILE}:1:29: field 'expect': expected a list of expectations, got object",
        ),
        (
            '{"messages": "x", "name": ""}',
            f"{FILE}:1:27: field 'name': expected a non-empty string, got string ''",
        ),
        (
            '{"messages": "x", "timeout_ms": -5}',
            f"{FILE}:1:33: field 'timeout_ms': expected a positive integer (milliseconds), got -5",
        ),
        (
            '{"messages": "x", "expect": [{"not_called": "a", "times": 2}]}',
            f"{FILE}:1:59: field 'expect[0].times': 'times' goes with called (not_called means none)",
        ),
        (
            '{"messages": "x", "expect": [{"called": "a", "with": {"x": {"$absent": 1}}}]}',
            f"{FILE}:1:60: field 'expect[0].with.x': $absent takes true",
        ),
        (
            '{"messages": "x", "expect": [{"called": "a", "with": {"x": {"$matches": "("}}}]}',
            f"{FILE}:1:60: field 'expect[0].with.x': $matches: not a regular expression: missing ), "
            "unterminated subpattern at position 0",
        ),
    ],
)
def test_wrong_files(text: str, expected: str) -> None:
    assert errors(text) == [expected]


def test_an_object_value_without_a_dollar_key_is_a_value_to_equal() -> None:
    scenario = parse_scenario(
        '{"messages": "x", "expect": [{"called": "a", "with": {"w": {"high": 3}}}]}', FILE
    )
    assert scenario.expectations[0].args == {"w": {"high": 3}}
    assert scenario.expectations[0].words() == 'calls a with w = {"high": 3}'


def test_positions_follow_the_structure_past_comments_and_strings() -> None:
    text = '// {"x": 1}\n{\n  a: [1, {"b": "x, y: ]"}, \'z\'],\n  /* "c": 2 */ "c": {"d": null}\n}'
    found = positions(text)
    assert found[()] == (2, 1)
    assert found[("a",)] == (3, 6)
    assert found[("a", 0)] == (3, 7)
    assert found[("a", 1, "b")] == (3, 16)
    assert found[("a", 2)] == (3, 28)
    assert found[("c", "d")] == (4, 27)


def test_outside_tools_are_those_the_scenario_expects_called() -> None:
    scenario = parse_scenario(
        '{"messages": "x", "expect": [{"called": "bash"}, {"not_called": "webfetch"}, {"called": "notes_add"}]}',
        FILE,
    )
    assert scenario.outside_tools() == ["bash"]
    assert {"bash", "webfetch", "websearch"} <= OUTSIDE_TOOLS


def test_a_workspace_loads_every_good_file_and_names_the_bad_ones(tmp_path: Path) -> None:
    folder = tmp_path / "evals"
    folder.mkdir()
    (folder / "a.jsonc").write_text('{"messages": "one"}')
    (folder / "b.json").write_text('{"name": "a", "messages": "two"}')  # the name of a.jsonc
    (folder / "c.jsonc").write_text('{"messages": 1}')
    (folder / "d.jsonc").write_bytes(b'{"messages": "\xff"}')
    (folder / "notes.txt").write_text("not a scenario")
    (folder / ".hidden.jsonc").write_text("{")
    loaded = load_scenarios(tmp_path)
    assert [s.name for s in loaded.scenarios] == ["a"]
    assert [str(e) for e in loaded.errors] == [
        "evals/b.json: field 'name': the scenario name 'a' is taken by evals/a.jsonc",
        "evals/c.jsonc:1:14: field 'messages': expected the user messages: a non-empty string or list of strings",
        "evals/d.jsonc: not UTF-8 text",
    ]
    assert [s.name for s in loaded.named(["a"])] == ["a"]
    with pytest.raises(KeyError, match="no scenario 'x' \\(the workspace has: a\\)"):
        loaded.named(["x"])
    assert load_scenarios(tmp_path / "nowhere").scenarios == []


def test_check_text_is_the_tools_validation() -> None:
    assert check_text('{"messages": "x"}', FILE) is None
    assert check_text('{"messages": "x", "expect": [{"max_steps": "2"}]}', FILE) == (
        f"{FILE}:1:44: field 'expect[0].max_steps': expected a whole number of steps, at least 1, got '2'"
    )


def test_the_example_workspace_ships_scenarios_that_read() -> None:
    loaded = load_scenarios(REPO / "engine" / "example")
    assert loaded.errors == []
    assert len(loaded.scenarios) >= 3
    assert "forget a note" in {s.name for s in loaded.scenarios}
