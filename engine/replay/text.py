"""A replay's result as text for people (`evolve replay`): the figures per stage, then each
difference once, with the inputs that show it, and the failures with their errors."""

from __future__ import annotations

from engine.protocol.records import ReplayResult, StageComparison, grouped_by_differences, inputs_named
from engine.protocol.text import absence, grouped_by_failures, short_target, shorten

ANSI = {"-": "\x1b[31m", "+": "\x1b[32m", "~": "\x1b[2m", "reset": "\x1b[0m"}
MARKS = {"-": ("[-", "-]"), "+": ("{+", "+}"), "~": ("{~", "~}")}
CONTEXT = 80  # unchanged characters shown on each side of a change


def render(result: ReplayResult, color: bool = False) -> str:
    out: list[str] = []
    files = ", ".join(result.files)
    out.append(f"replay of {result.kind} {short_target(result.target)} “{result.title}” ({files})")
    out.append(f"  before: {result.before}")
    out.append(f"  after:  {result.after}")
    out.append(
        f"  {result.state} in {result.duration_ms / 1000:.1f} s"
        + (f": {result.error}" if result.error else "")
    )
    for warning in result.warnings:
        out.append(f"  note: {warning}")
    if result.stages:
        out.append("")
        out.append(
            f"{'stage':<20} {'inputs':>6} {'changed':>7} {'same':>5} {'failed':>6}  before/after  volatile"
        )
        for stage in result.stages:
            out.append(_figures(stage))
    for stage in result.stages:
        out.extend(_details(stage, color))
    return "\n".join(out) + "\n"


def _figures(stage: StageComparison) -> str:
    if stage.note and not stage.inputs:
        return f"{stage.stage:<20} {0:>6}  {stage.note}"
    failures = f"{stage.failed_before}/{stage.failed_after}"
    return (
        f"{stage.stage:<20} {stage.inputs:>6} {stage.changed:>7} {stage.unchanged:>5} {stage.failed:>6}"
        f"  {failures:<12}  {', '.join(stage.volatile) or '-'}"
    )


def _details(stage: StageComparison, color: bool) -> list[str]:
    out: list[str] = []
    changed = [c for c in stage.comparisons if c.status == "changed"]
    if changed:
        out.append("")
        out.append(f"{stage.stage}: {len(changed)} of {stage.inputs} results changed")
        for diffs, sources in grouped_by_differences(list(changed)):
            out.append(f"  in {inputs_named(sources)}:")
            for diff in diffs:
                out.append(f"    {diff.label}{absence(diff)}:")
                out.extend("      " + line for line in marked(diff.segments, color).split("\n"))
    failed = [c for c in stage.comparisons if c.status == "failed"]
    if failed:
        out.append("")
        out.append(f"{stage.stage}: {len(failed)} of {stage.inputs} inputs failed")
        for lines, sources in grouped_by_failures(failed):
            out.append(f"  in {inputs_named(sources)}:")
            out.extend(f"    {line}" for line in lines)
    return out


def marked(segments: list[list[str]], color: bool = False) -> str:
    """Segments with `[-removed-]`, `{+added+}`, `{~volatile~}` (coloured on a terminal), long unchanged
    stretches shortened."""
    out: list[str] = []
    for index, (op, text) in enumerate(segments):
        if op == "=":
            out.append(shorten(text, CONTEXT, first=index == 0, last=index == len(segments) - 1))
            continue
        start, end = MARKS.get(op, ("", ""))
        if color:
            out.append(f"{ANSI.get(op, '')}{start}{text}{end}{ANSI['reset']}")
        else:
            out.append(f"{start}{text}{end}")
    return "".join(out) or "(empty)"
