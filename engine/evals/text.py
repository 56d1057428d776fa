"""Behaviour checks as text for people (`evolve eval`): the line that says it all, a table of the
scenarios before and after, then each scenario that changed: which expectations failed, the two
answers with the changed words marked, the tool calls of each version."""

from __future__ import annotations

from engine.protocol.records import EvalRun, ScenarioComparison
from engine.protocol.text import short_target
from engine.replay.text import ANSI, marked

STATUS = {
    "regressed": "REGRESSED",
    "improved": "improved",
    "passing": "passes",
    "failing": "fails",
    "refused": "refused",
    "differs": "differs",
    "same": "same",
}


def render(run: EvalRun, color: bool = False) -> str:
    out: list[str] = []
    files = ", ".join(run.files)
    what = "re-asked turns" if run.mode == "turns" else "behaviour checks"
    out.append(f"{what} of {run.kind} {short_target(run.target)} “{run.title}” ({files})")
    out.append(f"  before: {run.before}")
    out.append(f"  after:  {run.after}")
    runs = f"{run.repeat} run{'s' if run.repeat != 1 else ''} per scenario per version"
    out.append(f"  model:  {run.model or '(unknown)'}, {runs}")
    out.append(f"  {run.state} in {run.duration_ms / 1000:.1f} s: {run.summary}")
    for warning in run.warnings:
        out.append(f"  note: {warning}")
    if run.scenarios:
        width = max(len("scenario"), *(len(s.name) for s in run.scenarios))
        width = min(width, 60)
        out.append("")
        out.append(f"{'scenario':<{width}}  before  after")
        for s in run.scenarios:
            figures = f"{s.passed_before}/{s.repeat}", f"{s.passed_after}/{s.repeat}"
            if s.status == "refused":
                figures = "-", "-"
            status = STATUS.get(s.status, s.status)
            if color and s.status == "regressed":
                status = f"{ANSI['-']}{status}{ANSI['reset']}"
            out.append(f"{_cut(s.name, width):<{width}}  {figures[0]:>6}  {figures[1]:>5}  {status}")
    for s in run.scenarios:
        out.extend(_details(s, run.mode, color))
    return "\n".join(out) + "\n"


def _details(s: ScenarioComparison, mode: str, color: bool) -> list[str]:
    if s.status in ("passing", "same"):
        return []
    out = ["", f"{s.name}: {STATUS.get(s.status, s.status)}"]
    if s.note:
        out.append(f"  {s.note}")
    if s.status == "refused":
        return out
    for version, failures in (("before", s.failed_before), ("after", s.failed_after)):
        for failure in failures:
            out.append(f"  failed {version}: {failure}")
    out.append(f"  answer before: {_one_line(s.answer_before)}")
    if s.answer_before == s.answer_after:
        out.append("  answer after:  (the same)")
    else:
        out.append("  answer after:  " + marked(s.answer_diff, color).replace("\n", "\n                 "))
    if s.tools_before != s.tools_after or mode == "turns":
        out.append("  tools before: " + ("; ".join(s.tools_before) or "none"))
        out.append("  tools after:  " + ("; ".join(s.tools_after) or "none"))
    return out


def _one_line(text: str) -> str:
    return text.replace("\n", "\n                 ") if text else "(no answer)"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
