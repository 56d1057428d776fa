"""What the agent did, read from opencode's messages; a scenario's expectations checked against it; two
versions compared, and the line and the text that say it (engine/evals/transcript.py, expectations.py,
compare.py, text.py)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.evals import transcript
from engine.evals.compare import compare_scenario, compare_turn, exit_status, finish, refused, summary_line
from engine.evals.expectations import args_match, check, check_all
from engine.evals.scenarios import parse_scenario
from engine.evals.text import render
from engine.protocol.records import EvalRun, ScenarioRun, ToolUse


def user(text: str, synthetic: bool = False) -> dict[str, Any]:
    return {
        "info": {"role": "user", "id": f"msg_u{text[:4]}"},
        "parts": [{"type": "text", "text": text, "synthetic": synthetic}],
    }


def assistant(
    *parts: dict[str, Any], tokens: int = 10, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    info: dict[str, Any] = {
        "role": "assistant",
        "cost": 0.01,
        "tokens": {"input": tokens, "output": 3, "reasoning": 1, "cache": {"read": 2, "write": 0}},
    }
    if error:
        info["error"] = error
    return {"info": info, "parts": [{"type": "step-start"}, *parts, {"type": "step-finish"}]}


def tool(name: str, args: dict[str, Any], output: str = "ok", status: str = "completed") -> dict[str, Any]:
    state: dict[str, Any] = {"status": status, "input": args, "output": output}
    if status == "error":
        state = {"status": "error", "input": args, "error": output}
    return {"type": "tool", "tool": name, "callID": "c1", "state": state}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


# ---- reading opencode's messages ------------------------------------------------------------------


def test_a_transcript_has_each_answer_every_call_the_steps_and_the_tokens() -> None:
    messages = [
        user("Add a note: book the dentist."),
        assistant(tool("notes_add", {"text": "book the dentist"}, "added note #4")),
        assistant(text("Noted.")),
        user("I did it. You can drop that note."),
        assistant(text("Let me look."), tool("notes_list", {"tag": "todo"}, "#4 [normal] book the dentist")),
        assistant(tool("notes_forget", {"id": 4}, "no note #4", status="error")),
        assistant(tool("invalid", {"tool": "bash", "error": "Model tried to call unavailable tool 'bash'."})),
        assistant(
            text("Well done: I dropped it."), {"type": "text", "text": "(reminder)", "synthetic": True}
        ),
    ]
    found = transcript.read(messages)
    assert found.answers == ["Noted.", "Let me look.\nWell done: I dropped it."]
    assert [(t.tool, t.args, t.status) for t in found.tools] == [
        ("notes_add", {"text": "book the dentist"}, "completed"),
        ("notes_list", {"tag": "todo"}, "completed"),
        ("notes_forget", {"id": 4}, "error"),
        ("bash", {}, "unavailable"),
    ]
    assert found.tools[0].output == "added note #4"
    assert found.tools[2].error == "no note #4"
    assert found.steps == 6
    assert found.tokens == {"input": 60, "output": 18, "reasoning": 6, "cache_read": 12, "cache_write": 0}
    assert found.cost == pytest.approx(0.06)
    assert found.errors == []


def test_a_recorded_history_is_skipped_and_the_models_failure_is_read() -> None:
    messages = [
        user("earlier"),
        assistant(text("earlier answer")),
        user("again?"),
        assistant(error={"name": "APIError", "data": {"message": "401 invalid key"}}),
    ]
    found = transcript.read(messages, skip=2)
    assert found.answers == [""]
    assert found.steps == 1
    assert found.errors == ["APIError: 401 invalid key"]


# ---- expectations -----------------------------------------------------------------------------------


def run_of(answer: str, *calls: tuple[str, dict[str, Any]], steps: int = 2) -> ScenarioRun:
    return ScenarioRun(
        scenario="s",
        version="after",
        answers=["first answer", answer],
        tools=[ToolUse(name, args, "ok") for name, args in calls],
        steps=steps,
    )


def scenario_with(*expect: str) -> Any:
    return parse_scenario('{"messages": "x", "expect": [' + ", ".join(expect) + "]}", "evals/s.jsonc")


def test_tool_expectations_read_every_call_and_match_the_named_arguments_only() -> None:
    ran = run_of("done", ("notes_add", {"text": "Book the Dentist", "tags": ["todo"]}), ("notes_list", {}))
    checks = check_all(
        scenario_with(
            '{"called": "notes_add", "with": {"text": {"$contains": "dentist"}, "tags": {"$contains": "todo"}}}',
            '{"called": "notes_add", "with": {"priority": {"$absent": true}, "text": {"$any": true}}}',
            '{"called": "notes_add", "with": {"text": {"$matches": "^Book"}}, "times": 1}',
            '{"not_called": "notes_forget"}',
            '{"not_called": "notes_add", "with": {"priority": "high"}}',
        ).expectations,
        ran,
    )
    assert [c.passed for c in checks] == [True, True, True, True, True]


def test_a_failed_tool_expectation_says_what_was_called_instead() -> None:
    ran = run_of("kept", ("notes_add", {"text": "milk"}), ("notes_list", {"tag": "todo"}))
    forget, add_dentist, twice, no_list = check_all(
        scenario_with(
            '{"called": "notes_forget"}',
            '{"called": "notes_add", "with": {"text": {"$contains": "dentist"}}}',
            '{"called": "notes_add", "times": 2}',
            '{"not_called": "notes_list"}',
        ).expectations,
        ran,
    )
    assert not forget.passed
    assert (
        forget.detail
        == 'no call of notes_forget (its calls: notes_add {"text": "milk"}, notes_list {"tag": "todo"})'
    )
    assert add_dentist.detail == 'its calls of it: notes_add {"text": "milk"}'
    assert twice.detail == "1 matching calls"
    assert no_list.detail == 'it called notes_list {"tag": "todo"}'


def test_answer_expectations_read_the_answer_to_the_last_message() -> None:
    ran = run_of("Well done: I DROPPED it.")
    contains, not_contains, matches, not_matches, first = check_all(
        scenario_with(
            '{"answer_contains": "dropped"}',
            '{"answer_not_contains": "permanent"}',
            '{"answer_matches": "(?i)drop+ed"}',
            '{"answer_not_matches": "DROPPED"}',
            '{"answer_contains": "first answer"}',
        ).expectations,
        ran,
    )
    assert (contains.passed, not_contains.passed, matches.passed) == (True, True, True)
    assert not not_matches.passed and not_matches.detail == "the answer was: “Well done: I DROPPED it.”"
    assert not first.passed  # only the last message's answer counts


def test_max_steps() -> None:
    (check_passes,) = check_all(scenario_with('{"max_steps": 2}').expectations, run_of("", steps=2))
    (check_fails,) = check_all(scenario_with('{"max_steps": 2}').expectations, run_of("", steps=5))
    assert check_passes.passed
    assert (check_fails.passed, check_fails.detail) == (False, "it took 5 steps")


@pytest.mark.parametrize(
    ("matcher", "args", "expected"),
    [
        ({"id": 3}, {"id": 3.0}, True),  # JSON numbers
        ({"pin": True}, {"pin": 1}, False),  # true is not 1
        ({"w": {"high": 3}}, {"w": {"high": 3, "low": 1}}, False),  # an object value is equal or not
        ({"tags": ["a"]}, {"tags": ["a"]}, True),
        ({"id": 3}, {}, False),
        ({"id": {"$absent": True}}, {}, True),
        ({"id": {"$any": True}}, {}, False),
        ({"text": {"$contains": "x"}}, {"text": 5}, False),
        ({"text": {"$matches": "a"}}, {}, False),
    ],
)
def test_argument_matchers(matcher: dict[str, Any], args: dict[str, Any], expected: bool) -> None:
    assert args_match(matcher, args) is expected


def test_one_check_in_words() -> None:
    expectation = scenario_with('{"called": "notes_forget", "with": {"id": 4}}').expectations[0]
    found = check(expectation, run_of("", ("notes_forget", {"id": 4})))
    assert (found.expectation, found.passed, found.detail) == ("calls notes_forget with id = 4", True, "")


# ---- before and after -------------------------------------------------------------------------------


def passed(version: str, answer: str = "Well done: I dropped it.", state: str = "passed") -> ScenarioRun:
    ran = ScenarioRun(scenario="forget a note", version=version, state=state, answers=[answer])
    ran.tools = [ToolUse("notes_forget", {"id": 4}, "forgot note #4")] if state == "passed" else []
    return ran


def failed(version: str) -> ScenarioRun:
    ran = passed(version, "I keep notes permanently: the note stays.", state="failed")
    ran.checks = [
        *ran.checks,
        *check_all(scenario_with('{"called": "notes_forget"}').expectations, ran),
    ]
    return ran


def test_a_scenario_that_passed_before_and_fails_after_regressed() -> None:
    found = compare_scenario(
        "forget a note", "evals/forget-a-note.jsonc", [passed("before")], [failed("after")], 1
    )
    assert (found.status, found.passed_before, found.passed_after) == ("regressed", 1, 0)
    assert found.failed_after == ["calls notes_forget: no call of notes_forget (its calls: none)"]
    assert found.failed_before == []
    assert found.answer_before == "Well done: I dropped it."
    assert found.answer_after == "I keep notes permanently: the note stays."
    assert found.answer_diff == [
        ["-", "Well done: I dropped it"],
        ["+", "I keep notes permanently: the note stays"],
        ["=", "."],
    ]
    assert found.tools_before == ['notes_forget {"id": 4}'] and found.tools_after == []
    assert len(found.runs) == 2


@pytest.mark.parametrize(
    ("before", "after", "status"),
    [
        (["passed", "passed", "passed"], ["passed", "passed", "passed"], "passing"),
        (["passed", "failed", "passed"], ["failed", "passed", "passed"], "failing"),
        (["failed", "failed", "failed"], ["failed", "failed", "failed"], "failing"),
        (["passed", "passed", "failed"], ["passed", "failed", "error"], "regressed"),
        (["failed", "failed", "error"], ["passed", "failed", "failed"], "improved"),
    ],
)
def test_with_repeats_the_pass_rates_are_compared(before: list[str], after: list[str], status: str) -> None:
    runs = {
        name: [ScenarioRun(scenario="s", version=name, attempt=i + 1, state=s) for i, s in enumerate(states)]
        for name, states in (("before", before), ("after", after))
    }
    assert compare_scenario("s", None, runs["before"], runs["after"], 3).status == status


def evaluated(*scenarios: Any, mode: str = "scenarios", state: str = "done") -> EvalRun:
    run = EvalRun(
        id="evl_1", target="a" * 40, kind="commit", title="edit prompt chat.md", mode=mode, state=state
    )
    run.scenarios = list(scenarios)
    finish(run)
    return run


def test_the_line_that_says_it_all() -> None:
    forget = compare_scenario("forget a note", None, [passed("before")], [failed("after")], 1)
    others = [compare_scenario(n, None, [passed("before")], [passed("after")], 1) for n in "abcd"]
    run = evaluated(*others, forget)
    assert run.summary == 'evals 5/5 → 4/5: "forget a note" fails after'
    assert run.regressed == ["forget a note"]
    assert exit_status(run) == 1
    run = evaluated(*others, refused("web", None, 1, "refused: it expects a call of bash"))
    assert run.summary == "evals 4/4 → 4/4: 1 refused"
    assert exit_status(run) == 0


def test_the_line_with_repeats_a_failed_run_and_a_cancelled_one() -> None:
    runs = {
        name: [ScenarioRun(scenario="s", version=name, attempt=i + 1, state=s) for i, s in enumerate(states)]
        for name, states in (("before", ["passed"] * 3), ("after", ["passed", "failed", "failed"]))
    }
    run = evaluated(compare_scenario("s", None, runs["before"], runs["after"], 3))
    assert run.summary == 'evals 1/1 → 0/1: "s" passes 1/3 after (3/3 before)'
    broken = EvalRun(id="e", target="t", kind="pending", title="x", state="failed", error="opencode exited 1")
    assert summary_line(broken) == "evals could not run: opencode exited 1"
    assert exit_status(broken) == 1
    assert exit_status(EvalRun(id="e", target="t", kind="pending", title="x", state="cancelled")) == 130


def test_a_re_asked_turn_tells_what_changed() -> None:
    before = ScenarioRun(scenario="t", version="before", answers=["Here is your list."])
    before.tools = [ToolUse("notes_list", {}, "#1 milk")]
    same = compare_turn("“chat”: What's on my list?", before, before, "re-asked alone")
    after = ScenarioRun(scenario="t", version="after", answers=["I keep everything."])
    differs = compare_turn("“chat”: What's on my list?", before, after, "re-asked alone")
    assert same.status == "same" and differs.status == "differs"
    assert differs.tools_before == ["notes_list {}"] and differs.tools_after == []
    run = evaluated(same, differs, mode="turns")
    assert run.summary == "2 turns re-asked: 1 answer differently after"
    assert exit_status(run) == 0


def test_the_text_shows_the_table_the_failure_and_both_answers() -> None:
    forget = compare_scenario(
        "forget a note", "evals/forget-a-note.jsonc", [passed("before")], [failed("after")], 1
    )
    list_ = compare_scenario("what's on my list", None, [passed("before")], [passed("after")], 1)
    run = evaluated(list_, forget)
    run.files, run.before, run.after, run.model = (
        ["prompts/chat.md"],
        "the workspace at 1",
        "the workspace at 2",
        "scripted/demo",
    )
    shown = render(run)
    assert shown.splitlines()[:5] == [
        f"behaviour checks of commit {'a' * 10} “edit prompt chat.md” (prompts/chat.md)",
        "  before: the workspace at 1",
        "  after:  the workspace at 2",
        "  model:  scripted/demo, 1 run per scenario per version",
        'done in 0.0 s: evals 2/2 → 1/2: "forget a note" fails after'.join(["  ", ""]),
    ]
    assert "what's on my list     1/1    1/1  passes" in shown
    assert "forget a note         1/1    0/1  REGRESSED" in shown
    assert "  failed after: calls notes_forget: no call of notes_forget (its calls: none)" in shown
    assert "  answer before: Well done: I dropped it." in shown
    assert (
        "  answer after:  [-Well done: I dropped it-]{+I keep notes permanently: the note stays+}." in shown
    )
    assert '  tools before: notes_forget {"id": 4}' in shown
    assert "  tools after:  none" in shown
