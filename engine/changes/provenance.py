"""The record of why and how a change was made, taken when it is made: the validation evidence behind a
hook edit (with the pass and fail counts the test printed), and the provenance of a change (the
session, what the agent said before the call, the call itself), kept as a git note on its commit."""

from __future__ import annotations

import json
import re
from typing import Any

from engine.hooks.validation import Validation
from engine.protocol.records import Evidence, Provenance

PROVENANCE_REF = "refs/notes/evolve-provenance"
TAIL_LINES = 20  # lines of a test's output kept as evidence
TEXT_LIMIT = 20_000  # characters of the agent's text (and of its reasoning) kept per change

_NUMBER = r"(\d{1,3}(?:,\d{3})+|\d+)"  # 1,234 or 1234
# Counts as test runners commonly print them: "3 passed, 1 failed", "12 tests, 12 passed",
# "Ran 12 tests" (unittest), "FAILED (failures=2, errors=1)", "# pass 5" / "# fail 1" (TAP).
_PASSED = [rf"\b{_NUMBER} (?:passed|passing|ok|succeeded|successful)\b", rf"#\s*pass\s+{_NUMBER}"]
_FAILED = [
    rf"\b{_NUMBER} (?:failed|failing|failures?|errors?)\b",
    r"failures=(\d+)",
    r"errors=(\d+)",
    rf"#\s*fail\s+{_NUMBER}",
]
_TOTAL = [rf"\b{_NUMBER} (?:tests?|checks?|cases?|specs?|examples?)\b", rf"\bRan {_NUMBER} tests?\b"]


def _last(patterns: list[str], text: str, combine: bool = False) -> int | None:
    """The number the last matching line says (summed over the patterns when `combine`)."""
    found: list[int] = []
    for pattern in patterns:
        matches = re.findall(pattern, text, flags=re.IGNORECASE)
        if matches:
            found.append(int(str(matches[-1]).replace(",", "")))
    if not found:
        return None
    return sum(found) if combine else found[0]


def parse_counts(output: str) -> tuple[int | None, int | None, int | None]:
    """(passed, failed, total) as the output says them, each None where it says nothing."""
    passed = _last(_PASSED, output)
    failed = _last(_FAILED[:1] + _FAILED[3:], output)
    if failed is None:
        failed = _last(_FAILED[1:3], output, combine=True)  # unittest: failures= and errors=
    total = _last(_TOTAL, output)
    if total is not None and passed is None and failed is not None:
        passed = max(total - failed, 0)
    if total is not None and passed is None and failed is None and re.search(r"^OK\b", output, re.MULTILINE):
        passed, failed = total, 0  # unittest's "Ran N tests ... OK"
    if total is None and passed is not None:
        total = passed + (failed or 0)
    return passed, failed, total


def evidence(validation: Validation) -> Evidence | None:
    """The evidence of a validation run (None when the hook has no test: nothing was run)."""
    if validation.test is None:
        return None
    lines = validation.output.rstrip("\n").splitlines()
    passed, failed, total = parse_counts(validation.output)
    return Evidence(
        test=validation.test,
        command=f"tests/{validation.test}",
        ok=validation.ok,
        exit_code=validation.exit_code,
        duration_ms=round(validation.duration_ms, 1),
        output_tail="\n".join(lines[-TAIL_LINES:]),
        passed=passed,
        failed=failed,
        total=total,
    )


def provenance(
    *,
    tool: str | None,
    args: dict[str, Any],
    session: str | None,
    session_title: str | None,
    call_id: str | None,
    context: dict[str, Any] | None,
    validation: Evidence | None,
    at: float,
) -> Provenance:
    context = context or {}
    return Provenance(
        tool=tool,
        args=_bounded_args(args),
        session=session,
        session_title=session_title,
        call_id=call_id,
        agent_text=str(context.get("text") or "")[-TEXT_LIMIT:],
        reasoning=str(context.get("reasoning") or "")[-TEXT_LIMIT:],
        validation=validation,
        at=at,
    )


def _bounded_args(args: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments, with long strings (a whole new hook) cut: the diff shows the content."""
    return {
        k: (v[:2000] + f"… ({len(v):,} characters)" if isinstance(v, str) and len(v) > 2000 else v)
        for k, v in args.items()
    }


def encode(record: Provenance) -> str:
    return json.dumps(record.to_dict(), ensure_ascii=False)


def decode(text: str) -> Provenance | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return Provenance.from_dict(data) if isinstance(data, dict) else None
