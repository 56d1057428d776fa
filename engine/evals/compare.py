"""Before and after, side by side: each scenario's runs at the two versions of a change, which of its
expectations failed, the two answers with the changed words marked, and the line that says it all
(`evals 5/5 → 4/5: "forget a note" fails after`).

A scenario regresses when fewer of its runs pass after the change than before (with one run each:
it passed before and fails after). A real model varies from run to run: `--repeat K` runs each
scenario K times at each version, and the pass rates are compared.
"""

from __future__ import annotations

import json

from engine.evals.expectations import call_words, quote
from engine.protocol.records import EvalRun, ScenarioComparison, ScenarioRun
from engine.replay.worddiff import compare as word_diff


def compare_scenario(
    name: str, file: str | None, before: list[ScenarioRun], after: list[ScenarioRun], repeat: int
) -> ScenarioComparison:
    """A scenario's runs at both versions, compared."""
    passed_before = sum(r.state == "passed" for r in before)
    passed_after = sum(r.state == "passed" for r in after)
    first_before = before[0] if before else None
    first_after = after[0] if after else None
    answer_before = first_before.answer if first_before else ""
    answer_after = first_after.answer if first_after else ""
    _, segments = word_diff(answer_before, answer_after)
    if passed_after < passed_before:
        status = "regressed"
    elif passed_after > passed_before:
        status = "improved"
    elif passed_before == repeat:
        status = "passing"
    else:
        status = "failing"
    return ScenarioComparison(
        name=name,
        file=file,
        repeat=repeat,
        passed_before=passed_before,
        passed_after=passed_after,
        status=status,
        failed_before=_failures(before),
        failed_after=_failures(after),
        answer_before=answer_before,
        answer_after=answer_after,
        answer_diff=segments,
        tools_before=[call_words(t) for t in first_before.tools] if first_before else [],
        tools_after=[call_words(t) for t in first_after.tools] if first_after else [],
        runs=[*before, *after],
    )


def compare_turn(name: str, before: ScenarioRun, after: ScenarioRun, note: str) -> ScenarioComparison:
    """A re-asked turn at both versions: whether the answer or the tool calls differ (a turn has no
    expectations: it tells what changed, not what is right)."""
    calls_before = [call_words(t) for t in before.tools]
    calls_after = [call_words(t) for t in after.tools]
    changed, segments = word_diff(before.answer, after.answer)
    failed = [f"{r.version}: {r.error}" for r in (before, after) if r.state == "error" and r.error]
    differs = changed or calls_before != calls_after or bool(failed)
    return ScenarioComparison(
        name=name,
        repeat=1,
        passed_before=int(before.state != "error"),
        passed_after=int(after.state != "error"),
        status="differs" if differs else "same",
        failed_before=[f for f in failed if f.startswith("before")],
        failed_after=[f for f in failed if f.startswith("after")],
        answer_before=before.answer,
        answer_after=after.answer,
        answer_diff=segments,
        tools_before=calls_before,
        tools_after=calls_after,
        note=note,
        runs=[before, after],
    )


def refused(name: str, file: str | None, repeat: int, why: str) -> ScenarioComparison:
    return ScenarioComparison(name=name, file=file, repeat=repeat, status="refused", note=why)


def _failures(runs: list[ScenarioRun]) -> list[str]:
    """What failed in the first run that did not pass: each failed check with what was seen, or why
    the run did not finish."""
    for run in runs:
        if run.state == "error":
            return [f"did not finish: {run.error}"]
        failed = [c for c in run.checks if not c.passed]
        if failed:
            return [c.expectation + (f": {c.detail}" if c.detail else "") for c in failed]
    return []


def finish(run: EvalRun) -> None:
    """The run's regressions and its one line, from its comparisons."""
    run.regressed = [s.name for s in run.scenarios if s.status == "regressed"]
    run.summary = summary_line(run)


def summary_line(run: EvalRun) -> str:
    """`evals 5/5 → 4/5: "forget a note" fails after` (for re-asked turns: how many differ)."""
    if run.state == "failed":
        return f"evals could not run: {run.error}"
    if run.state == "cancelled":
        return "evals cancelled"
    if run.mode == "turns":
        differ = [s for s in run.scenarios if s.status == "differs"]
        return f"{len(run.scenarios)} turns re-asked: {len(differ)} answer differently after"
    counted = [s for s in run.scenarios if s.status != "refused"]
    total = len(counted)
    before = sum(s.passed_before == s.repeat for s in counted)
    after = sum(s.passed_after == s.repeat for s in counted)
    line = f"evals {before}/{total} → {after}/{total}"
    notes = []
    for s in counted:
        if s.status != "regressed":
            continue
        if s.repeat == 1:
            notes.append(f"{json.dumps(s.name, ensure_ascii=False)} fails after")
        else:
            notes.append(
                f"{json.dumps(s.name, ensure_ascii=False)} passes {s.passed_after}/{s.repeat} after "
                f"({s.passed_before}/{s.repeat} before)"
            )
    refusals = len(run.scenarios) - total
    if refusals:
        notes.append(f"{refusals} refused")
    return line + (": " + ", ".join(notes) if notes else "")


def exit_status(run: EvalRun) -> int:
    """`evolve eval`'s exit status: 0 nothing regressed, 1 a scenario that passed before fails
    after (or the checks could not run), 130 cancelled."""
    if run.state == "cancelled":
        return 130
    if run.state != "done":
        return 1
    return 1 if run.regressed else 0


def for_the_agent(run: EvalRun) -> str:
    """The result as the agent reads it (the tool that runs its checks on its own proposal, the
    notice of a change kept held): the line, then each scenario that fails, why, and its answer."""
    if run.state != "done":
        return f"the behaviour checks could not run: {run.error or run.state}"
    lines = [f"{run.summary}."]
    for s in run.scenarios:
        if s.status in ("regressed", "failing"):
            when = (
                "fails with your change" if s.status == "regressed" else "fails with and without your change"
            )
            lines.append(
                f"- {json.dumps(s.name, ensure_ascii=False)} {when}: " + ("; ".join(s.failed_after) or "?")
            )
            lines.append(f"  your answer with it: {quote(s.answer_after)}")
        elif s.status == "improved":
            lines.append(
                f"- {json.dumps(s.name, ensure_ascii=False)} passes with your change (it failed without)"
            )
        elif s.status == "refused":
            lines.append(f"- {json.dumps(s.name, ensure_ascii=False)}: {s.note}")
    if not run.regressed:
        lines.append("No scenario that passes now fails with your change.")
    return "\n".join(lines)
