"""View 1, hook runs: every execution of a hook script, with filters, and the selected run in detail
(a failed one with the error's own last line and the change most likely behind it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Input, Label, Static, Switch

from engine.protocol import HookRun, calls
from engine.protocol.records import Failure

from ..agent import Agent
from ..alerts import REVERT_KEY, SHOW_KEY, Named
from ..client import EngineError
from ..detail import DetailPane, Part
from ..format import as_json, clock_time, date_time, duration
from ..line import Line
from ..messages import Reload
from ..model import ConsoleModel, RunFilter, Update
from ..model import Part as ModelPart
from ..nextstep import connect_steps, without_opencode
from ..palette import Command
from ..status import runs_line
from ..table import KeyedTable
from .base import FOLLOW, MORE, OPEN, TableView


def status_text(run: HookRun) -> Text:
    if run.error:
        return Text("failed", style="bold red")
    return Text("ok", style="green")


class RunsView(TableView):
    """Live hook runs with filters, and the selected run in detail (fetched when selected: the
    table holds only what it shows)."""

    NAME = "runs"
    LABEL = "Hook runs"
    PARTS = frozenset({ModelPart.RUNS, ModelPart.COUNTS})
    BINDINGS: ClassVar[list[BindingType]] = [
        OPEN,
        FOLLOW,
        Binding("x", "toggle_failures", "Failures", id="runs.failures", tooltip="Show only failed runs"),
        MORE,
    ]
    ENGINE_KEYS = frozenset({"toggle_failures"})  # reloads the runs
    EMPTY = (
        "Hook runs appear here as the hooks run: when the engine discovers them (at its start, and "
        "after a change to hooks/), at each stage of a session of a connected opencode (its requests, "
        "messages and tool calls), and at each heartbeat tick."
    )
    COMMANDS = (
        Command("runs: follow new runs", "follow", "jump to the newest run and keep following"),
        Command("runs: failures only", "toggle_failures", "show only failed hook runs"),
    )

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent)
        self.run: HookRun | None = None  # the selected run, in full
        self.cause: Failure | None = None  # the failure it is part of, when it failed
        self._guide: Text | None = None  # how to connect opencode, shown above the runs while none is

    def compose(self) -> ComposeResult:
        guide = Static("", id="connect-guide", classes="guide", markup=False)
        guide.display = False  # until the engine says that no opencode is connected
        yield guide
        with Horizontal(id="run-filters", classes="filters"):
            yield Input(placeholder="stage", id="filter-stage")
            yield Input(placeholder="hook", id="filter-hook")
            yield Input(placeholder="session", id="filter-session")
            yield Label("failures only", classes="switch-label")
            yield Switch(id="filter-failed")
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("time", "time"),
                    ("stage", "stage"),
                    ("hook", "hook"),
                    ("session", "session"),
                    ("duration", "duration"),
                    ("status", "status"),
                ],
                id="runs-table",
            )
            yield DetailPane("select a run", id="run-detail", classes="detail")
        yield Line(id="runs-status", classes="status-line")

    def status_changed(self) -> None:
        """While the engine says no opencode is connected, the way to connect one (and the demo)
        above the runs, in place of the silence of a table that gets no new row."""
        super().status_changed()
        model = self.model
        guide = None
        if without_opencode(model) and model.status is not None:
            guide = connect_steps(model.status.workspace, self.agent.evolve)
        if guide != self._guide:
            self._guide = guide
            panel = self.query_one("#connect-guide", Static)
            panel.update(guide or "")
            if panel.display != (guide is not None):
                panel.display = guide is not None
                # A widget shown and repainted in one frame may be laid out without the lines
                # that moved marked for painting (Textual 8.2 rebuilds its map of the screen as it
                # meets the new widget, so the layout after it sees nothing change): those lines
                # would keep what was there. One whole repaint, once laid out.
                self.call_after_refresh(self.screen.refresh)

    def empty_text(self) -> Text:
        """What will appear, or that the filters hide everything (the way to connect opencode is
        above the table, not in it)."""
        applied = self.model.run_filter
        if applied == RunFilter():
            return Text(self.EMPTY)
        fields = [f"{k} {v}" for k, v in applied.params().items() if k != "failed"]
        said = ", ".join(fields + (["failures only"] if applied.failed else []))
        how = " or ".join(
            (["empty a field and press enter"] if fields else [])
            + (["x: failed or not"] if applied.failed else [])
        )
        return Text(f"No hook run matches the filters ({said}): {how}.")

    def run_filter(self) -> RunFilter:
        """The filters as the fields and the switch show them now."""
        fields = {
            name: self.query_one(f"#filter-{name}", Input).value.strip() or None
            for name in ("stage", "hook", "session")
        }
        return RunFilter(**fields, failed=self.query_one("#filter-failed", Switch).value)

    @staticmethod
    def row(run: HookRun, name: Callable[[str | None], str]) -> tuple[str, list[Any]]:
        return str(run.id), [
            clock_time(run.started_at),
            run.stage or "",
            run.hook or "",
            name(run.session),
            duration(run.duration_ms),
            status_text(run),
        ]

    def show_run(self, run: HookRun, name: Callable[[str | None], str], cause: Failure | None = None) -> None:
        head = Text()
        head.append(f"{run.stage}  hooks/{run.hook}", style="bold")
        session = f"{name(run.session)} ({run.session})" if run.session else "-"
        head.append(f"\nsession {session} · started {date_time(run.started_at)}")
        head.append(f" · {duration(run.duration_ms)}")
        if run.exit_code is not None:
            head.append(f" · exit {run.exit_code}")
        if run.signal:
            head.append(f" · killed by {run.signal}", style="red")
        stderr = run.stderr or ""
        if run.stderr_truncated:
            stderr += "\n[stderr was cut by the engine at 256 KiB]"
        lines = run.stdout_lines or []
        parts = [Part("error", "error", run.error or "", empty="(no error)")]
        if cause is not None:
            parts.append(Part("cause", "why it failed", cause_text(cause)))
        self.query_one(DetailPane).show(
            head,
            [
                *parts,
                Part("stderr", "stderr", stderr),
                Part("result", "parsed result", "" if run.result is None else as_json(run.result)),
                Part(
                    "stdout", "stdout lines", "\n".join(f"{i + 1:>4}  {line}" for i, line in enumerate(lines))
                ),
                Part("logs", "log lines", "\n".join(str(x) for x in run.logs or [])),
                Part("input", "input (JSON on stdin)", as_json(run.input)),
            ],
        )

    # ---- drawing ---------------------------------------------------------------------------------

    def draw(self, part: ModelPart) -> None:
        if part is ModelPart.RUNS:
            name = self.agent.name_session
            self.table.replace_all([self.row(r, name) for r in self.model.runs.values()])
            self._drop_stale_run()
        self.render_counts()

    def apply(self, update: Update) -> None:
        if update.runs:
            name = self.agent.name_session
            self.table.upsert([self.row(r, name) for r in update.runs])
        self.render_counts()

    def tick(self) -> None:
        self.render_counts()  # "received live" and the rows shown move on

    def looked_at(self) -> None:
        self.model.looked_at_runs()  # the failures are seen now

    def render_counts(self) -> None:
        """The line under the runs (`status.runs_line`)."""
        table = self.table
        self.query_one(Line).show(runs_line(self.model, table.row_count, table.following, table.unseen))

    def _drop_stale_run(self) -> None:
        """The selected run is no longer listed (a filter): its details go too."""
        if self.run is not None and self.run.id not in self.table.rows:
            self.run, self.cause = None, None
            self.query_one(DetailPane).show(Text("select a run"), [])

    # ---- the selected run ------------------------------------------------------------------------

    def highlighted(self, key: str) -> None:
        self.render_counts()
        self.load_run(key)

    @work(exclusive=True, group="run-detail", exit_on_error=False, name="load the hook run")
    async def load_run(self, run_id: str) -> None:
        await asyncio.sleep(0.05)  # cursor moving fast: only the row it stops on is fetched
        run = await self.agent.run(run_id)
        cause = None
        if run.error is not None:
            try:
                cause = await self.agent.client.send(calls.run_cause(run_id))
            except EngineError:
                cause = None  # the journal no longer has what explains it
        self.run, self.cause = run, cause
        self.show_run(run, self.agent.name_session, cause)
        self.screen.refresh_bindings()  # the keys that show and revert its cause

    def named_change(self) -> Named | None:
        """A failed run names the change most likely behind its failure."""
        cause = self.cause
        if cause is None or cause.suspect is None or self.run is None or self.run.id != self.selected_key():
            return None
        suspect = cause.suspect
        return Named(suspect.sha, suspect.sha if suspect.origin != "initial" else None)

    @classmethod
    def session_of(cls, model: ConsoleModel, key: str | None, run: HookRun | None = None) -> str | None:
        """`run`: the selected run in full, which knows its session before the list does, when it
        is that row."""
        if run is not None and run.id == key:
            return run.session
        found = model.runs.get(key) if key else None
        return found.session if found else None

    def selected_session(self) -> str | None:
        return self.session_of(self.model, self.selected_key(), self.run)

    # ---- keys and filters ------------------------------------------------------------------------

    def action_follow(self) -> None:
        super().action_follow()
        self.render_counts()

    def action_toggle_failures(self) -> None:
        switch = self.query_one("#filter-failed", Switch)
        switch.value = not switch.value

    def focus_filter(self) -> None:
        """The first filter field takes the focus (`/`, from any view)."""
        self.screen.set_focus(self.query_one("#filter-stage", Input))

    @on(Input.Submitted, "#run-filters Input")
    @on(Switch.Changed, "#filter-failed")
    def filters_changed(self) -> None:
        self.model.run_filter = self.run_filter()
        self.table.empty = self.empty_text()
        self.post_message(Reload(ModelPart.RUNS))


def cause_text(cause: Failure) -> str:
    """A failed run's failure as the operator reads it: the error's own last line, where, the change
    most likely behind it (or that none explains it), what the stage fell back to."""
    lines = [f"{cause.error}" + (f" (at {cause.where})" if cause.where else "")]
    if cause.exit and cause.exit != cause.error:
        lines.append(f"the run: {cause.exit}")
    lines.append(cause.cause or "no change explains it")
    if cause.suspect is not None:
        suspect = cause.suspect
        lines.append(f"that change: {suspect.sha[:10]} “{suspect.subject}” ({suspect.because})")
        keys = f"{SHOW_KEY}: show it in view 5"
        if suspect.origin != "initial":
            keys += f" · {REVERT_KEY}: revert it"
        lines.append(keys)
    if cause.fallback:
        lines.append(cause.fallback)
    state = {"started": "failing", "failing": "failing", "cleared": "runs fine again"}.get(
        cause.state, cause.state
    )
    lines.append(f"{state}: {cause.runs} failed run{'s' if cause.runs != 1 else ''} at {cause.stage}")
    return "\n".join(lines)
