"""A change replayed on the agent's recorded traffic: its progress, the figures per stage, and each
difference with the changed words marked.

The engine runs the replay and computes the differences word by word (the segments of each
`FieldDiff`); this module only draws them, so that another diff rendering can replace `render_diff`
without touching the rest. The screen learns of progress from the app, which follows the event
stream (`ReplayScreen.follow`), and fetches the whole result when the replay ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, ProgressBar, Static
from textual.worker import Worker

from engine.protocol import calls
from engine.protocol.calls import Call
from engine.protocol.records import (
    ReplayProgress,
    ReplayResult,
    StageComparison,
    grouped_by_differences,
    inputs_named,
)
from engine.protocol.text import absence, grouped_by_failures, short_target, shorten

from .client import EngineClient, EngineError
from .help import HELP_KEY
from .messages import pass_failure_up
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


class ReplayScreen(ModalScreen[None]):
    """Replays a change in the engine, with its progress, then shows the figures and the differences.
    Escape closes it (a replay under way goes on in the engine, and its result is kept); `c` cancels."""

    # Its own styles, so that the screen can move or be replaced as one piece.
    DEFAULT_CSS = """
    ReplayScreen { align: center middle; }
    ReplayScreen #replay-dialog {
        width: 95%; height: 95%; padding: 0 1; background: $surface; border: thick $primary;
    }
    ReplayScreen #replay-progress { height: 1; margin: 1 0 0 0; }
    ReplayScreen #replay-status { height: 1; color: $text-muted; }
    ReplayScreen #replay-body { height: 1fr; margin-top: 1; }
    ReplayScreen #replay-buttons { height: 3; }
    ReplayScreen #replay-buttons Button { margin-right: 2; }
    """
    TITLE = "replay of a change"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="replay.close", tooltip="Close (a replay under way goes on)"),
        Binding("c", "cancel", "Cancel replay", id="replay.cancel", tooltip="Stop the replay under way"),
        HELP_KEY,
    ]

    def __init__(self, client: Callable[[], EngineClient], change: ChangeEntry) -> None:
        super().__init__()
        self._client = client
        self.change = change
        self.target = change.pending_id or change.key
        self.replay_id: str | None = None
        self.result: ReplayResult | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="replay-dialog"):
            yield Label(Text(f"Replay: {self.change.subject}", style="bold"), id="replay-title")
            yield ProgressBar(total=None, show_eta=False, id="replay-progress")
            yield Static("starting…", id="replay-status", markup=False)
            with VerticalScroll(id="replay-body"):
                yield Static("", id="replay-report", markup=False)
            with Horizontal(id="replay-buttons"):
                yield Button("Cancel replay (c)", variant="warning", id="replay-cancel")
                yield Button("Close (escape)", id="replay-close")

    def on_mount(self) -> None:
        self.start()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        pass_failure_up(self, event)

    @property
    def running(self) -> bool:
        return self.result is None or self.result.state == "running"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return True if self.running else None
        return True

    @work(exclusive=True, group="replay-start", exit_on_error=False, name="start the replay")
    async def start(self) -> None:
        started = await self._client().send(start_replay(self.change))
        self.replay_id = started.id
        # It may have ended before its id came back: ask once, events do the rest.
        self.show(await self._client().send(calls.replay_status(started.id)))

    def follow(self, record: ReplayProgress | ReplayResult) -> None:
        """A replay event from the engine's stream (the app passes each one on)."""
        if record.target != self.target or (self.replay_id is not None and record.id != self.replay_id):
            return
        if isinstance(record, ReplayProgress):
            if self.running:
                self._progress(record.done, record.total, record.message)
        elif self.replay_id is not None:
            self.fetch(record.id)

    @work(exclusive=True, group="replay-fetch", exit_on_error=False, name="load the replay's result")
    async def fetch(self, replay_id: str) -> None:
        self.show(await self._client().send(calls.replay_status(replay_id)))

    def show(self, result: ReplayResult) -> None:
        if self.result is not None and self.result.state != "running" and result.state == "running":
            return  # an answer older than the end already shown
        self.result = result
        if result.state == "running":
            self._progress(result.done, result.total, "replaying")
            return
        bar = self.query_one("#replay-progress", ProgressBar)
        bar.update(
            total=max(result.total, 1),
            progress=max(result.total, 1) if result.state == "done" else result.done,
        )
        self.query_one("#replay-status", Static).update(
            f"{result.state} in {result.duration_ms / 1000:.1f} s"
            + (f": {result.error}" if result.error else "")
            + f" · {result.total} replays of recorded inputs"
        )
        self.query_one("#replay-report", Static).update(report(result))
        self.query_one("#replay-cancel", Button).disabled = True
        self.refresh_bindings()

    def _progress(self, done: int, total: int, message: str) -> None:
        bar = self.query_one("#replay-progress", ProgressBar)
        if total:
            bar.update(total=total, progress=done)
        self.query_one("#replay-status", Static).update(f"{message}: {done} of {total}" if total else message)

    @on(Button.Pressed, "#replay-cancel")
    def action_cancel(self) -> None:
        if self.running and self.replay_id is not None:
            self.cancel_replay(self.replay_id)

    @work(group="replay-cancel", exit_on_error=False, name="cancel the replay")
    async def cancel_replay(self, replay_id: str) -> None:
        try:
            await self._client().send(calls.replay_cancel(replay_id))
        except EngineError as exc:  # it ended meanwhile
            self.notify(str(exc), timeout=5)
            return
        self.query_one("#replay-status", Static).update("cancelling…")

    @on(Button.Pressed, "#replay-close")
    def action_close(self) -> None:
        self.dismiss(None)
