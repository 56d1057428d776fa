"""A change replayed on the agent's recorded traffic: its progress, the figures per stage, and each
difference with the changed words marked.

The engine runs the replay and computes the differences word by word (the segments of each
`FieldDiff`); this module only draws them, so that another diff rendering can replace `render_diff`
without touching the rest. The screen learns of progress from the app, which follows the event
stream (`ReplayScreen.follow`), and fetches the whole result when the replay ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import ClassVar, TypeGuard

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType

from engine.protocol import calls
from engine.protocol.calls import Call
from engine.protocol.records import (
    ReplayCancelled,
    ReplayProgress,
    ReplayResult,
    StageComparison,
    grouped_by_differences,
    inputs_named,
)
from engine.protocol.text import absence, grouped_by_failures, short_target, shorten

from .help import HELP_KEY
from .jobscreen import JobScreen, job_css
from .model import ChangeEntry

CONTEXT = 160  # unchanged characters shown on each side of a change
SEGMENT_STYLES = {"-": "bold red strike", "+": "bold green", "~": "dim italic"}


def start_replay(change: ChangeEntry) -> Call[ReplayResult]:
    """The call that replays a change: a commit's and a held change's replays are different routes."""
    if change.pending_id:
        return calls.replay_pending(change.pending_id)
    return calls.replay(change.key)


# ---- drawing a result ------------------------------------------------------------------------------


def replay_line(result: ReplayResult | None) -> Text:
    """One line for the changes view's detail pane: the latest replay of the selected change."""
    text = Text()
    if result is None:
        text.append("replay: none yet (e to replay it on recorded traffic)", style="dim")
        return text
    if result.state == "running":
        text.append(f"replay: running, {result.done} of {result.total} (e shows it)", style="yellow")
        return text
    when = time.strftime("%H:%M:%S", time.gmtime(result.finished_at or result.started_at))
    text.append(f"replay of {when} UTC: ", style="bold")
    if result.state != "done":
        text.append(f"{result.state}" + (f": {result.error}" if result.error else ""), style="red")
        return text
    parts = []
    for stage in result.stages:
        if not stage.inputs:
            continue
        found = f"{stage.stage} {stage.changed} of {stage.inputs} changed"
        if stage.failed:
            found += f", {stage.failed} failed"
        parts.append(found)
    text.append(" · ".join(parts) or "no recorded inputs", style="bold magenta" if _changed(result) else "")
    text.append(" (e for the differences)", style="dim")
    return text


def _changed(result: ReplayResult) -> bool:
    return any(s.changed or s.failed for s in result.stages)


def report(result: ReplayResult) -> RenderableType:
    """The whole result: what was compared, the figures per stage, the differences, the failures."""
    head = Text()
    head.append(f"{result.kind} {short_target(result.target)} “{result.title}”", style="bold")
    head.append(f"  ({', '.join(result.files)})\n")
    head.append(f"before: {result.before}\nafter:  {result.after}\n", style="dim")
    # How it ended (or how far it is) is the status line above the report.
    for warning in result.warnings:
        head.append(f"note: {warning}\n", style="yellow")
    parts: list[RenderableType] = [head]
    if result.stages:
        parts.append(figures(result.stages))
    for stage in result.stages:
        parts.extend(_stage_details(stage))
    return Group(*parts)


def figures(stages: Iterable[StageComparison]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column, justify in (
        ("stage", "left"),
        ("inputs", "right"),
        ("changed", "right"),
        ("unchanged", "right"),
        ("failed before/after", "right"),
        ("volatile (left out)", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for stage in stages:
        if stage.note and not stage.inputs:
            table.add_row(stage.stage, "0", "", "", "", Text(stage.note, style="dim"))
            continue
        table.add_row(
            stage.stage,
            str(stage.inputs),
            Text(str(stage.changed), style="bold magenta" if stage.changed else ""),
            str(stage.unchanged),
            Text(f"{stage.failed_before}/{stage.failed_after}", style="bold red" if stage.failed else ""),
            ", ".join(stage.volatile) or "-",
        )
    return table


def _stage_details(stage: StageComparison) -> list[RenderableType]:
    out: list[RenderableType] = []
    changed = [c for c in stage.comparisons if c.status == "changed"]
    if changed:
        text = Text()
        text.append(
            f"\n{stage.stage}: {len(changed)} of {stage.inputs} results changed", style="bold underline"
        )
        text.append("\n")
        for diffs, sources in grouped_by_differences(list(changed)):
            text.append(f"in {inputs_named(sources)}:\n", style="bold")
            for diff in diffs:
                text.append(f"  {diff.label}{absence(diff)}\n", style="italic")
                text.append_text(render_diff(diff.segments))
                text.append("\n")
        out.append(text)
    failed = [c for c in stage.comparisons if c.status == "failed"]
    if failed:
        text = Text()
        text.append(f"\n{stage.stage}: {len(failed)} of {stage.inputs} inputs failed", style="bold underline")
        text.append("\n")
        for lines, sources in grouped_by_failures(failed):
            text.append(f"in {inputs_named(sources)}:\n", style="bold")
            text.append("".join(f"  {line}\n" for line in lines), style="red")
        out.append(text)
    return out


def render_diff(segments: list[list[str]]) -> Text:
    """A field's text after the change, removed words struck out in red, added ones in green,
    volatile ones dimmed; long unchanged stretches shortened."""
    text = Text()
    for index, (op, part) in enumerate(segments):
        if op == "=":
            text.append(shorten(part, CONTEXT, first=index == 0, last=index == len(segments) - 1))
        else:
            text.append(part, style=SEGMENT_STYLES.get(op, ""))
    if not segments:
        text.append("(empty)", style="dim")
    return text


# ---- the screen --------------------------------------------------------------------------------------


class ReplayScreen(JobScreen[ReplayProgress, ReplayResult]):
    """Replays a change in the engine, with its progress, then shows the figures and the differences.
    Escape closes it (a replay under way goes on in the engine, and its result is kept); `c` cancels."""

    DEFAULT_CSS = job_css("ReplayScreen", "replay", status_height="1")
    TITLE = "replay of a change"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="replay.close", tooltip="Close (a replay under way goes on)"),
        Binding("c", "cancel", "Cancel replay", id="replay.cancel", tooltip="Stop the replay under way"),
        HELP_KEY,
    ]
    PREFIX = "replay"
    HEADING = "Replay"
    CANCEL_LABEL = "Cancel replay (c)"
    RUNNING = "replaying"
    CANCELLING = "cancelling…"
    WORKERS = ("start the replay", "load the replay's result", "cancel the replay")

    @property
    def replay_id(self) -> str | None:
        return self.job_id

    def start_call(self) -> Call[ReplayResult]:
        return start_replay(self.change)

    def status_call(self, job_id: str) -> Call[ReplayResult]:
        return calls.replay_status(job_id)

    def cancel_call(self, job_id: str) -> Call[ReplayCancelled]:
        return calls.replay_cancel(job_id)

    def is_progress(self, record: ReplayProgress | ReplayResult) -> TypeGuard[ReplayProgress]:
        return isinstance(record, ReplayProgress)

    def report(self, result: ReplayResult) -> RenderableType:
        return report(result)

    def ended(self, result: ReplayResult) -> str:
        return super().ended(result) + f" · {result.total} replays of recorded inputs"
