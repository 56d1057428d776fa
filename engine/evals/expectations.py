"""A scenario's expectations checked against what the agent did in one run: the tools it called (with
their arguments), its answer to the last message, the steps it took.

Tool checks read every call of the run (of every message); answer checks read the answer to the
last message (every text the agent wrote after it, joined); `answer_contains` ignores case,
`answer_matches` is a Python regular expression searched anywhere in the answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.evals.scenarios import Expectation
from engine.protocol.records import Check, ScenarioRun, ToolUse

SHOWN = 200  # characters of an answer or an argument quoted in a failure


def check_all(expectations: tuple[Expectation, ...] | list[Expectation], run: ScenarioRun) -> list[Check]:
    return [check(e, run) for e in expectations]


def check(expectation: Expectation, run: ScenarioRun) -> Check:
    words = expectation.words()
    kind = expectation.kind
    if kind in ("called", "not_called"):
        return _tool_check(expectation, run.tools, words)
    if kind == "max_steps":
        limit = expectation.count or 0
        ok = run.steps <= limit
        return Check(words, ok, "" if ok else f"it took {run.steps} steps")
    answer = run.answer
    text = expectation.text or ""
    if kind in ("answer_contains", "answer_not_contains"):
        found = text.casefold() in answer.casefold()
    else:
        found = re.search(text, answer) is not None
    ok = found if kind in ("answer_contains", "answer_matches") else not found
    return Check(words, ok, "" if ok else f"the answer was: {quote(answer)}")


def _tool_check(expectation: Expectation, tools: list[ToolUse], words: str) -> Check:
    named = [t for t in tools if t.tool == expectation.tool]
    matching = [t for t in named if args_match(expectation.args or {}, t.args)]
    if expectation.kind == "not_called":
        if not matching:
            return Check(words, True)
        return Check(words, False, f"it called {call_words(matching[0])}")
    wanted = expectation.count
    ok = len(matching) == wanted if wanted is not None else bool(matching)
    if ok:
        return Check(words, True)
    if wanted is not None and matching:
        return Check(words, False, f"{len(matching)} matching calls")
    if named:
        return Check(words, False, "its calls of it: " + "; ".join(call_words(t) for t in named[:5]))
    made = ", ".join(call_words(t) for t in tools[:5]) if tools else "none"
    return Check(words, False, f"no call of {expectation.tool} (its calls: {made})")


def args_match(matchers: dict[str, Any], args: dict[str, Any]) -> bool:
    """Whether every named argument matches (the others are not looked at)."""
    return all(_matches(matcher, name in args, args.get(name)) for name, matcher in matchers.items())


def _matches(matcher: Any, present: bool, value: Any) -> bool:
    if isinstance(matcher, dict) and len(matcher) == 1 and str(next(iter(matcher))).startswith("$"):
        op, operand = next(iter(matcher.items()))
        if op == "$absent":
            return not present
        if op == "$any":
            return present
        if not present:
            return False
        if op == "$matches":
            return isinstance(value, str) and re.search(str(operand), value) is not None
        if op == "$contains":
            if isinstance(value, str) and isinstance(operand, str):
                return operand.casefold() in value.casefold()
            if isinstance(value, list):
                return any(_equal(operand, item) for item in value)
            return False
    return present and _equal(matcher, value)


def _equal(expected: Any, value: Any) -> bool:
    """JSON equality: 3 equals 3.0, true never equals 1, objects and lists compared deeply."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return type(expected) is type(value) and expected == value
    if isinstance(expected, (int, float)) and isinstance(value, (int, float)):
        return float(expected) == float(value)
    if isinstance(expected, dict) and isinstance(value, dict):
        return expected.keys() == value.keys() and all(_equal(expected[k], value[k]) for k in expected)
    if isinstance(expected, list) and isinstance(value, list):
        return len(expected) == len(value) and all(_equal(a, b) for a, b in zip(expected, value, strict=True))
    return bool(expected == value)


def call_words(tool: ToolUse) -> str:
    """A call as a line: its tool and arguments, e.g. `notes_forget {"id": 3}`."""
    args = json.dumps(tool.args, ensure_ascii=False, sort_keys=True) if tool.args else "{}"
    if len(args) > SHOWN:
        args = args[: SHOWN - 1] + "…"
    suffix = {"error": " (failed)", "unavailable": " (not offered in the copy)"}.get(tool.status, "")
    return f"{tool.tool} {args}{suffix}"


def quote(text: str) -> str:
    shown = " ".join(text.split())
    if len(shown) > SHOWN:
        shown = shown[: SHOWN - 1] + "…"
    return f"“{shown}”" if shown else "(no answer)"
