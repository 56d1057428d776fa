"""The operator console: watch the agent evolve, fire heartbeats, approve or revert its changes.

One long-lived worker follows the engine's event stream into the model (`model.py`); the events are
applied and drawn in time-sliced batches (four times a second), so a flood of hook runs never
starves the keyboard. Everything else is a request to the engine's API in a worker, never on the
event loop's path. The app only draws what the model holds and sends the operator's commands; what
it draws and says comes from the modules named for each concern (`status`, `keys`, `navigation`,
`decisions`, `controls`, `changesource`, `turn`, the views), which a test can call without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Button, Input, Switch
from textual.worker import Worker, WorkerState

from engine.protocol import HookRun, SessionInfo
from engine.protocol.records import ReplayProgress

from . import controls, decisions
from .changesource import change_diff, latest_replay, whole_file
from .client import EngineClient, EngineError, EngineGone, Target
from .detail import DetailPane
from .diffmodel import FileDiff
from .format import session_label, short
from .keybar import KeyBar
from .keys import BINDINGS, Where, applies
from .launch import LaunchError, engine_for
from .line import Line
from .model import ChangeEntry, ConsoleModel, Part, Update
from .navigation import session_of
from .palette import EvolveCommands
from .replay import ReplayScreen, replay_line
from .screens import (
    ConfirmScreen,
    MoreScreen,
    RejectScreen,
    ResultScreen,
    RevertChoice,
    RevertScreen,
    StageScreen,
)
from .section import Section
from .status import badges, connection_line, has_problems, problems_text, runs_line
from .table import KeyedTable
from .textual_private import skip_own_layout
from .turn import TurnScreen, load_turn
from .viewbar import ViewBar
from .views import PAGES, VIEWS, ChangesView, HeartbeatView, RunsView, SessionsView, StagesView, ToolCallsView

FLOOD = 100  # pending events per tick (a quarter second) above which repaints slow down
# Sessions first: the other tables name sessions by their titles.
LOAD_ORDER = (Part.STATUS, Part.SESSIONS, Part.RUNS, Part.STAGES, Part.CHANGES, Part.HEARTBEAT, Part.TOOLS)
REFRESH_ORDER = (Part.RUNS, Part.STAGES, Part.SESSIONS, Part.CHANGES, Part.HEARTBEAT, Part.STATUS, Part.TOOLS)
TABLES = {
    "runs": "#runs-table",
    "stages": "#stages-table",
    "sessions": "#sessions-table",
    "changes": "#changes-table",
    "tools": "#tools-table",
}
DETAILS = {
    "runs": "#run-detail",
    "stages": "#stage-detail",
    "sessions": "#session-detail",
    "tools": "#tool-detail",
}
LONG_ERROR = 120  # characters beyond which an error's toast stays until clicked away
HEALTH_TIMEOUT_S = 10.0  # after a request failed, an engine slower than this to answer counts as down
STAYS = 24 * 3600.0  # "until dismissed": a toast that long is gone only when clicked


class ConnectionChanged(Message):
    """The connection to the engine changed (latest wins)."""

    def __init__(self, connected: bool, detail: str) -> None:
        super().__init__()
        self.connected = connected
        self.detail = detail

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ConnectionChanged)


class EvolveConsole(App[None]):
    CSS_PATH = str(Path(__file__).with_name("console.tcss"))  # also for subclasses elsewhere
    TITLE = "evolve"
    AUTO_FOCUS = "#runs-table"  # the arrow keys move through the runs at once
    COMMANDS = App.COMMANDS | {EvolveCommands}
    BINDINGS: ClassVar[list[BindingType]] = BINDINGS

    def __init__(
        self,
        target: Target,
        *,
        clock: Callable[[], float] = time.time,
        poll_s: float = 5.0,
        bell: bool | None = None,
    ) -> None:
        super().__init__()
        # No animations (scrolling jumps): a console that follows a flood of runs needs its frames
        # for the runs.
        self.animation_level = "none"
        self.target = target
        self.client = EngineClient(target)
        self.clock = clock
        self.poll_s = poll_s
        # The terminal bell on what needs the operator (a change held for review, a hook that starts
        # failing); EVOLVE_CONSOLE_BELL=0 (or --no-bell) keeps it quiet, the toast stays.
        self.bell_on = bell if bell is not None else os.environ.get("EVOLVE_CONSOLE_BELL", "1") != "0"
        self.model = ConsoleModel()
        self.run_detail: HookRun | None = None  # the selected run, in full
        self.session_detail: SessionInfo | None = None  # the selected session, with its history
        self.schemas_open = False  # the sessions view shows the tools' schemas
        self.needs_review_only = False  # the changes view shows only what needs review
        self.trail: list[tuple[str, str | None]] = []  # (view, selected key) to go back to
        self.down_since: float | None = None  # when the engine stopped answering
        self.heard_at: float | None = None  # when the engine last answered
        self._titles: dict[str, str | None] = {}  # the session titles the tables were drawn with
        self._ticks = 0
        self.first_load = asyncio.Event()
        self.shown = "runs"  # the view on screen

    @property
    def engine_connected(self) -> bool:
        return self.model.connected

    # ---- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Line(id="connection")
        yield ViewBar(VIEWS, shown=self.shown, id="views")
        for view, _, _ in VIEWS:
            page = PAGES[view](id=view, classes="page")
            page.display = view == self.shown
            yield page
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.set_interval(0.25, self.apply_events, name="apply-events")
        self.set_interval(1.0, self.tick_clock, name="countdown")
        self.set_timer(self.poll_s, self.poll_counts, name="counts")
        self.render_connection()
        self.follow_engine()

    async def on_unmount(self) -> None:
        await self.client.aclose()

    # ---- following the engine ---------------------------------------------------------------

    @work(exclusive=True, group="engine-stream", exit_on_error=False)
    async def follow_engine(self) -> None:
        delay = 0.5
        while True:
            try:
                health = await self.client.get("/v1/health")
                since = self.model.apply_health(health)
                await self.load_all()
                self.post_message(ConnectionChanged(True, f"{self.target.url} · pid {health.get('pid')}"))
                delay = 0.5
                async for event in self.client.events(since):
                    self.model.receive(event)
                    self.heard_at = self.clock()
                    if event.seq % 20 == 0:
                        # Buffered events arrive without the loop ever waiting: let keys and
                        # repaints in between.
                        await asyncio.sleep(0)
                raise EngineGone("the event stream ended")
            except (EngineGone, EngineError) as exc:
                self.post_message(ConnectionChanged(False, str(exc)))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                await self.rediscover()

    @work(exclusive=True, group="engine-check", exit_on_error=False)
    async def check_engine(self) -> None:
        """After a request failed: the engine is down only if its health check fails too; then the
        stream is followed anew (it may hang on a dead connection), which says when it is back."""
        try:
            await self.client.request("GET", "/v1/health", timeout=HEALTH_TIMEOUT_S)
        except (EngineGone, EngineError) as exc:
            self.post_message(ConnectionChanged(False, str(exc)))
            self.follow_engine()

    async def rediscover(self) -> None:
        """A restarted engine has a new address or token: read its announcement again."""
        found = Target.announced(self.target.workspace) if self.target.workspace else None
        if found is not None and found != self.target:
            await self.client.aclose()
            self.target = found
            self.client = EngineClient(found)

    async def load_all(self) -> None:
        """Everything from the journal and git, so history survives console and engine restarts."""
        for part in LOAD_ORDER:
            await self.reload(part, draw=part is not Part.STATUS)
        self.heard_at = self.clock()
        self.render_connection()
        if not self.first_load.is_set():
            # The widgets, styles and history loaded so far live as long as the console. Without
            # this, every full garbage collection walks them all again (about 45 ms here, every
            # few seconds under a flood of runs), and a key press waiting behind one shows late.
            # (Making the later full collections rarer does not pay: the cyclic garbage of the
            # event loop piles up in between, and one collection then takes 60 ms, not 8.)
            gc.collect()
            gc.freeze()
        self.first_load.set()

    async def reload(self, part: Part, draw: bool = True) -> None:
        """Fetch `part` from the engine into the model, and draw it."""
        route, params = self.model.query(part)
        since = self.model.applied_seq
        data = await self.client.get(route, **params)
        self.heard_at = self.clock()
        if self.model.apply_reload(part, data, since=since) and draw:
            self.draw(part)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        if message.connected:
            self.down_since = None
        elif self.down_since is None:
            self.down_since = self.clock()
        self.model.set_connection(message.connected, message.detail)
        self.render_connection()
        self.draw(Part.HEARTBEAT)
        self.refresh_bindings()

    # ---- naming ---------------------------------------------------------------------------------

    def name_session(self, session: str | None) -> str:
        """A session as the tables name it: its title, else the end of its id."""
        found = self.model.sessions.get(session) if session else None
        return session_label(session, found.title if found else None)

    # ---- drawing the model ------------------------------------------------------------------

    def draw(self, part: Part) -> None:
        """Show `part` as the model holds it now."""
        model = self.model
        name = self.name_session
        if part is Part.RUNS:
            self.query_one("#runs-table", KeyedTable).replace_all(
                [RunsView.row(r, name) for r in model.runs.values()]
            )
            self._drop_stale_run()
            self.render_counts()
        elif part is Part.COUNTS:
            self.render_counts()
        elif part is Part.STAGES:
            self.query_one("#stages-table", KeyedTable).replace_all(
                [StagesView.row(d, name) for d in model.dispatches.values()]
            )
        elif part is Part.SESSIONS:
            self._draw_rows("#sessions-table", [SessionsView.row(s) for s in model.sessions.values()])
            self._refresh_session_detail()
            titles = {sid: s.title for sid, s in model.sessions.items()}
            if titles != self._titles:  # the other tables name sessions by title: name them anew
                self._titles = titles
                for named in (Part.RUNS, Part.STAGES, Part.TOOLS, Part.CHANGES):
                    self.draw(named)
        elif part is Part.CHANGES:
            view = self.query_one(ChangesView)
            shown = [c for c in model.changes.values() if c.needs_review or not self.needs_review_only]
            self._draw_rows("#changes-table", [view.row(c, name) for c in shown])
            self.render_badges()
            self.refresh_bindings()
        elif part is Part.HEARTBEAT:
            if model.heartbeat is not None:
                as_of = None if model.connected else self.heard_at
                self.query_one(HeartbeatView).show_status(model.heartbeat, self.clock(), as_of, name)
        elif part is Part.STATUS:
            self.render_connection()
        elif part is Part.TOOLS:
            self.query_one("#tools-table", KeyedTable).replace_all(
                [ToolCallsView.row(c, name) for c in model.tool_calls.values()]
            )

    def _draw_rows(self, table_id: str, rows: list[tuple[str, list[Any]]]) -> None:
        """All rows of a table anew, moving none that stays (a reload of sessions or changes)."""
        table = self.query_one(table_id, KeyedTable)
        if set(table.rows) - {key for key, _ in rows}:
            table.replace_all(rows)
        else:
            table.upsert(rows)

    def render_connection(self) -> None:
        """The top bar (`status.connection_line`)."""
        line = connection_line(
            self.model, self.target.workspace, self.clock(), self.down_since, self.heard_at
        )
        self.query_one("#connection", Line).show(line)

    def render_counts(self) -> None:
        table = self.query_one("#runs-table", KeyedTable)
        line = runs_line(self.model, table.row_count, table.following, table.unseen)
        self.query_one("#runs-status", Line).show(line)

    def render_badges(self) -> None:
        """What waits for the operator, beside each view's label."""
        if self.shown == "runs":
            self.model.looked_at_runs()
        self.query_one(ViewBar).set_badges(badges(self.model))

    # ---- applying events in batches ---------------------------------------------------------

    def apply_events(self) -> None:
        # Under a flood, repaint the tables about once a second instead of four times: each
        # repaint of a scrolled table costs real time, and the keyboard must stay responsive.
        self._ticks += 1
        if self.model.waiting > FLOOD and self._ticks % 4:
            return
        with contextlib.suppress(NoMatches):  # the console is closing
            if self.model.waiting:
                self._show(self.model.apply_waiting())
            stale = self.model.take_reloads()
            if stale:
                self.refresh_parts(stale)

    def _show(self, update: Update) -> None:
        for severity, notice in update.notices:
            self.toast(
                f"{notice.source}: {notice.message}", severity="error" if severity == "error" else "warning"
            )
        for alert in update.alerts:
            self.toast(alert, severity="warning", timeout=12)
            if self.bell_on:
                self.bell()
        name = self.name_session
        with self.batch_update():
            if update.runs:
                self.query_one("#runs-table", KeyedTable).upsert([RunsView.row(r, name) for r in update.runs])
            if update.stages:
                self.query_one("#stages-table", KeyedTable).upsert(
                    [StagesView.row(d, name) for d in update.stages]
                )
            if update.tools:
                self.query_one("#tools-table", KeyedTable).upsert(
                    [ToolCallsView.row(c, name) for c in update.tools]
                )
            for part in update.redraw - {Part.RUNS, Part.STAGES, Part.TOOLS}:
                self.draw(part)
            self.render_counts()
            self.render_badges()
        if update.replays:
            self._show_replays(update)

    def _show_replays(self, update: Update) -> None:
        """Replay events to the replay screen open, and the end of one to the selected change."""
        screen = self.screen
        for record in update.replays:
            if isinstance(screen, ReplayScreen):
                screen.follow(record)
        selected = self.selected_change()
        ended = {r.target for r in update.replays if not isinstance(r, ReplayProgress)}
        if selected is not None and (selected.pending_id or selected.key) in ended:
            self.load_change(selected)

    def toast(self, message: str, severity: str = "information", timeout: float = 8.0) -> None:
        """A notification; a long error stays until clicked away, so that it can be read whole."""
        long = severity == "error" and len(message) > LONG_ERROR
        self.notify(short(message, 2000), severity=severity, timeout=STAYS if long else timeout)  # type: ignore[arg-type]

    @work(group="refresh", exit_on_error=False)
    async def refresh_parts(self, parts: set[Part]) -> None:
        for part in REFRESH_ORDER:
            if part in parts:
                await self.reload(part)

    @work(exclusive=True, group="counts", exit_on_error=False)
    async def poll_counts(self) -> None:
        """The journal's exact counts (live events only estimate them); re-armed when done."""
        try:
            if self.engine_connected:
                with contextlib.suppress(NoMatches):
                    await self.reload(Part.COUNTS)
        finally:
            self.set_timer(self.poll_s, self.poll_counts, name="counts")

    def tick_clock(self) -> None:
        with contextlib.suppress(NoMatches):  # the console is closing
            if self.model.heartbeat and self.shown == "heartbeat":
                self.draw(Part.HEARTBEAT)
            if not self.model.connected:
                self.render_connection()  # how long the engine has been down
            self.render_counts()

    # ---- selection and details --------------------------------------------------------------

    @on(KeyedTable.RowHighlighted, "#runs-table")
    def run_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.render_counts()
        self.load_run(event.key)

    @work(exclusive=True, group="run-detail", exit_on_error=False)
    async def load_run(self, run_id: str) -> None:
        await asyncio.sleep(0.05)  # cursor moving fast: only the row it stops on is fetched
        run = HookRun.from_dict(await self.client.get(f"/v1/runs/{run_id}"))
        self.run_detail = run
        self.query_one(RunsView).show_run(run, self.name_session)

    def _drop_stale_run(self) -> None:
        """The selected run is no longer listed (a filter): its details go too."""
        table = self.query_one("#runs-table", KeyedTable)
        if self.run_detail is not None and self.run_detail.id not in table.rows:
            self.run_detail = None
            self.query_one("#run-detail", DetailPane).show(Text("select a run"), [])

    @on(KeyedTable.RowHighlighted, "#stages-table")
    def stage_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        d = self.model.dispatches.get(event.key)
        if d:
            self.query_one(StagesView).show_dispatch(d, self.name_session)

    @on(KeyedTable.RowHighlighted, "#sessions-table")
    def session_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.load_session(event.key)

    @work(exclusive=True, group="session-detail", exit_on_error=False)
    async def load_session(self, session_id: str) -> None:
        session = SessionInfo.from_dict(await self.client.get(f"/v1/sessions/{session_id}"))
        self.session_detail = session
        self.query_one(SessionsView).show_session(session, self.schemas_open)

    def _refresh_session_detail(self) -> None:
        """The selected session changed (busy, tokens, a notification): show it anew."""
        key = self.query_one("#sessions-table", KeyedTable).selected_key()
        known = self.model.sessions.get(key) if key else None
        shown = self.session_detail
        if (
            known is not None
            and shown is not None
            and shown.id == key
            and known.updated_at != shown.updated_at
        ):
            self.load_session(key)

    @on(KeyedTable.RowHighlighted, "#changes-table")
    def change_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.refresh_bindings()
        change = self.model.changes.get(event.key)
        if change is not None:
            self.load_change(change)

    @work(exclusive=True, group="change-detail", exit_on_error=False)
    async def load_change(self, change: ChangeEntry) -> None:
        view = self.query_one(ChangesView)
        extra = replay_line(await latest_replay(self.client, change))
        prepared, truncated = await change_diff(self.client, change)
        view.show_change(change, prepared, truncated, self.name_session, extra)

    @on(KeyedTable.RowHighlighted, "#tools-table")
    def tool_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        call = self.model.tool_calls.get(event.key)
        if call is not None:
            self.query_one(ToolCallsView).show_call(call, self.name_session)

    # ---- filters ----------------------------------------------------------------------------

    @on(Input.Submitted, "#run-filters Input")
    @on(Switch.Changed, "#filter-failed")
    def filters_changed(self) -> None:
        self.model.run_filter = self.query_one(RunsView).run_filter()
        self.apply_filters()

    @work(exclusive=True, group="run-filter", exit_on_error=False)
    async def apply_filters(self) -> None:
        await self.reload(Part.RUNS)

    # ---- views and navigation ---------------------------------------------------------------

    def action_show_tab(self, tab: str) -> None:
        old, new = self.query_one(f"#{self.shown}"), self.query_one(f"#{tab}")
        if new is not old:
            self.shown = tab
            old.display, new.display = False, True
            # Lay the screen out once, now (the screen's layout covers both pages).
            skip_own_layout(old)
            skip_own_layout(new)
            self.screen.refresh(layout=True, repaint=False)  # the layout repaints what it moved
            self.query_one(ViewBar).shown = tab
            self.refresh_bindings()
            if tab == "heartbeat":
                self.draw(Part.HEARTBEAT)
            if tab == "runs":
                self.render_badges()  # the failures are seen now
        # The focus goes with the view, in the same frame (every focus change repaints the whole
        # screen); a widget of a hidden view must not keep it.
        # (A view's table, or its diff when the diff takes the full width.)
        self.screen.set_focus(next((w for w in new.query("KeyedTable, DiffView") if w.display), None))

    @on(ViewBar.Selected)
    def view_selected(self, event: ViewBar.Selected) -> None:
        self.action_show_tab(event.view)

    def selected_key(self, view: str | None = None) -> str | None:
        table_id = TABLES.get(view or self.shown)
        return self.query_one(table_id, KeyedTable).selected_key() if table_id else None

    def go(self, view: str, key: str | None) -> None:
        """Show `view` with the row `key` selected; escape comes back here."""
        self.trail.append((self.shown, self.selected_key()))
        self._show_row(view, key)

    def _show_row(self, view: str, key: str | None) -> None:
        self.action_show_tab(view)
        table_id = TABLES.get(view)
        if key is None or table_id is None:
            return
        table = self.query_one(table_id, KeyedTable)
        if key in table.rows:
            table.move_cursor(row=table.get_row_index(key))
        else:
            self.toast(f"{key} is not among the rows shown in this view", severity="warning", timeout=5)

    def action_open(self) -> None:
        """Enter: a change opens the turn that made it; a run or a tool call opens its session."""
        view, key = self.shown, self.selected_key()
        if key is None:
            return
        if view == "changes":
            change = self.model.changes.get(key)
            if change is not None:
                self.open_turn(change)
        elif view in ("runs", "tools", "stages"):
            self.action_open_session()

    def action_open_session(self) -> None:
        session = session_of(self.model, self.shown, self.selected_key(), self.run_detail)
        if not session:
            self.toast("no session here", severity="warning", timeout=4)
        elif session not in self.model.sessions:
            self.toast(f"the engine knows no session {session}", severity="warning", timeout=5)
        else:
            self.go("sessions", session)

    def action_go_back(self) -> None:
        """Escape: out of a filter field, else back to where the last enter came from."""
        focused = self.focused
        if isinstance(focused, Input):
            self.screen.set_focus(self.query_one(TABLES[self.shown], KeyedTable))
            return
        if self.trail:
            view, key = self.trail.pop()
            self._show_row(view, key)

    @work(group="actions", exit_on_error=False)
    async def open_turn(self, change: ChangeEntry) -> None:
        """The turn that made a change: its call, its hook runs, its session, on a screen."""
        turn = await load_turn(self.client, change)
        if turn is None:
            self.toast("this change was not made by the agent in a session", severity="warning", timeout=5)
            return

        def done(where: tuple[str, str] | None) -> None:
            if where is not None:
                view = "runs" if where[0] == "run" else "sessions"
                self.go(view, where[1])

        self.push_screen(TurnScreen(turn), done)

    # ---- what a key can do where ------------------------------------------------------------

    def selected_change(self) -> ChangeEntry | None:
        if self.shown != "changes":
            return None
        key = self.query_one("#changes-table", KeyedTable).selected_key()
        return self.model.changes.get(key) if key else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        where = Where(
            view=self.shown,
            change=self.selected_change(),
            typing=isinstance(self.focused, Input),
            back=bool(self.trail),
            connected=self.model.connected,
            problems=has_problems(self.model.status),
            workspace=self.target.workspace is not None,
        )
        return applies(action, where)

    def refresh_bindings(self) -> None:
        super().refresh_bindings()
        try:
            for action in ("approve", "revert", "reject"):  # the buttons mirror the keys
                self.query_one(f"#change-{action}", Button).disabled = (
                    self.check_action(action, ()) is not True
                )
        except NoMatches:
            pass  # not mounted yet

    # ---- the heartbeat ----------------------------------------------------------------------

    @on(Button.Pressed, "#hb-fire")
    def action_fire_heartbeat(self) -> None:
        self.notify("heartbeat: firing now…", timeout=3)
        self.fire_heartbeat()

    @work(group="actions", exit_on_error=False)
    async def fire_heartbeat(self) -> None:
        said, severity = await controls.fire(self.client)
        self.toast(said, severity=severity)
        await self.reload(Part.HEARTBEAT)

    @on(Button.Pressed, "#hb-pause")
    @on(Button.Pressed, "#hb-resume")
    def action_toggle_pause(self) -> None:
        self.toggle_pause()

    @work(group="actions", exit_on_error=False)
    async def toggle_pause(self) -> None:
        paused = bool(self.model.heartbeat and self.model.heartbeat.paused)
        since = self.model.applied_seq
        status = await controls.set_paused(self.client, not paused)
        self.model.apply_reload(Part.HEARTBEAT, status, since=since)
        self.draw(Part.HEARTBEAT)
        self.notify("heartbeat resumed" if paused else "heartbeat paused", timeout=3)

    # ---- changes ----------------------------------------------------------------------------

    @on(Button.Pressed, "#change-approve")
    def action_approve(self) -> None:
        change = self.selected_change()
        if change is None:
            return
        question = decisions.approve_question(change)
        if question is None:
            self.approve_change(change)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.approve_change(change)

        self.push_screen(ConfirmScreen(*question), confirmed)

    @work(group="actions", exit_on_error=False)
    async def approve_change(self, change: ChangeEntry) -> None:
        self.notify(await decisions.approve(self.client, change), timeout=5)
        await self.reload(Part.CHANGES)

    @on(Button.Pressed, "#change-revert")
    def action_revert(self) -> None:
        change = self.selected_change()
        if change is not None and change.revertible:
            self.ask_revert(change)

    @work(group="actions", exit_on_error=False)
    async def ask_revert(self, change: ChangeEntry) -> None:
        impact = await decisions.revert_impact(self.client, change)

        def chosen(choice: RevertChoice | None) -> None:
            if choice is not None:
                self.revert_change(change, choice)

        self.push_screen(
            RevertScreen(decisions.revert_question(change), change.files, impact, self.name_session), chosen
        )

    @work(group="actions", exit_on_error=False)
    async def revert_change(self, change: ChangeEntry, choice: RevertChoice) -> None:
        outcome = await decisions.revert(self.client, change, choice)
        if outcome.refused:
            self.toast(outcome.text, severity="error")
            return
        self.notify(outcome.text, timeout=6)
        await self.reload(Part.CHANGES)

    @on(Button.Pressed, "#change-reject")
    def action_reject(self) -> None:
        change = self.selected_change()
        if change is None or not change.awaits_decision:
            return

        def reason(given: str | None) -> None:
            if given is not None:
                self.reject_change(change, given)

        self.push_screen(RejectScreen(change.subject), reason)

    @work(group="actions", exit_on_error=False)
    async def reject_change(self, change: ChangeEntry, reason: str) -> None:
        self.notify(await decisions.reject(self.client, change, reason), timeout=5)
        await self.reload(Part.CHANGES)

    def action_replay(self) -> None:
        change = self.selected_change()
        if change is not None:
            self.push_screen(ReplayScreen(lambda: self.client, change))

    def action_toggle_needs_review(self) -> None:
        self.needs_review_only = not self.needs_review_only
        self.draw(Part.CHANGES)
        self.notify("only what needs review" if self.needs_review_only else "every change", timeout=2)

    # ---- other actions ----------------------------------------------------------------------

    def action_run_stage(self) -> None:
        def chosen(request: dict[str, Any] | None) -> None:
            if request:
                self.run_stage(request)

        self.push_screen(StageScreen(), chosen)

    @work(group="actions", exit_on_error=False)
    async def run_stage(self, request: dict[str, Any]) -> None:
        self.push_screen(ResultScreen(*await controls.run_stage(self.client, request)))

    def action_follow(self) -> None:
        table_id = TABLES.get(self.shown)
        if table_id:
            self.query_one(table_id, KeyedTable).follow()
            self.render_counts()

    def action_toggle_failures(self) -> None:
        switch = self.query_one("#filter-failed", Switch)
        switch.value = not switch.value

    def action_focus_filter(self) -> None:
        self.action_show_tab("runs")
        self.screen.set_focus(self.query_one("#filter-stage", Input))

    def action_toggle_schemas(self) -> None:
        self.schemas_open = not self.schemas_open
        if self.session_detail is not None:
            self.query_one(SessionsView).show_session(self.session_detail, self.schemas_open)

    def action_more(self) -> None:
        if self.shown == "heartbeat":
            section = self.query_one("#hb-last", Section)
            self.push_screen(MoreScreen("last tick", section.full_text))
            return
        pane = DETAILS.get(self.shown)
        if pane is None:
            return
        truncated = self.query_one(pane, DetailPane).truncated
        if not truncated:
            self.notify("nothing is truncated here", timeout=3)
            return
        self.push_screen(MoreScreen(truncated[0].title, truncated[0].text))

    def action_problems(self) -> None:
        status = self.model.status
        if status is None:
            return
        self.push_screen(MoreScreen("the engine's configuration problems", problems_text(status)))

    @on(Line.Clicked, "#connection")
    def connection_clicked(self) -> None:
        if self.check_action("problems", ()):
            self.action_problems()

    def action_start_engine(self) -> None:
        if self.target.workspace and not self.model.connected:
            self.notify(f"starting the engine for {self.target.workspace}…", timeout=4)
            self.start_engine()

    @work(group="actions", exit_on_error=False, thread=True)
    def start_engine(self) -> None:
        try:
            engine_for(Path(str(self.target.workspace)), create=False)
        except LaunchError as exc:
            self.call_from_thread(self.toast, str(exc), "error")

    # ---- reading a diff (self-modifications) --------------------------------------------------

    def action_diff_wide(self) -> None:
        view = self.query_one(ChangesView)
        view.set_wide(not view.wide)

    def action_diff_split(self) -> None:
        self.query_one(ChangesView).toggle_split()

    def action_diff_file(self) -> None:
        change = self.selected_change()
        file = self.query_one(ChangesView).file_to_show(change)
        if change is not None and file is not None:
            self.load_whole_file(change, file)

    @work(exclusive=True, group="change-file", exit_on_error=False)
    async def load_whole_file(self, change: ChangeEntry, file: FileDiff) -> None:
        whole = await whole_file(self.client, change, file)
        self.query_one(ChangesView).show_whole(change.key, file, whole)

    # ---- errors of workers ------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is not WorkerState.ERROR or event.worker.group == "engine-stream":
            return
        error = event.worker.error
        if isinstance(error, EngineGone):
            # One request lost (a connection closed as it was reused, a slow answer) does not mean
            # the engine is gone, and saying so would stop the reloads while the stream goes on:
            # only the health check says the engine is down.
            self.notify(f"{event.worker.name or 'request'}: {error}", severity="warning", timeout=5)
            self.check_engine()
        else:
            self.toast(f"{event.worker.name or 'error'}: {type(error).__name__}: {error}", severity="error")
