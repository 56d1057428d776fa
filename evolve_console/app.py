"""The operator console: watch the agent evolve, fire heartbeats, approve or revert its changes.

One long-lived worker follows the engine's event stream into the model (`model.py`); the events are
applied and drawn in time-sliced batches (four times a second), so a flood of hook runs never
starves the keyboard. Everything else is a request to the engine's API in a worker, never on the
event loop's path. The app only draws what the model holds and sends the operator's commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.command import Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Button, Input, Switch
from textual.worker import Worker, WorkerState

from engine.protocol import HookRun, SessionInfo
from engine.protocol.records import ReplayProgress, ReplayResult

from .client import EngineClient, EngineError, EngineGone, Target
from .detail import DetailPane
from .format import as_json, short
from .keybar import KeyBar
from .line import Line
from .model import ChangeEntry, ConsoleModel, Part, Update
from .replay import ReplayScreen, replay_line, replay_route
from .screens import ConfirmScreen, MoreScreen, ResultScreen, StageScreen
from .table import KeyedTable
from .textual_private import skip_own_layout
from .viewbar import ViewBar
from .views import PAGES, VIEWS, ChangesView, HeartbeatView, RunsView, SessionsView, StagesView

FLOOD = 100  # pending events per tick (a quarter second) above which repaints slow down
LOAD_ORDER = (Part.STATUS, Part.RUNS, Part.STAGES, Part.SESSIONS, Part.CHANGES, Part.HEARTBEAT)


class ConnectionChanged(Message):
    """The connection to the engine changed (latest wins)."""

    def __init__(self, connected: bool, detail: str) -> None:
        super().__init__()
        self.connected = connected
        self.detail = detail

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ConnectionChanged)


class EvolveCommands(Provider):
    """Console actions in the command palette, with namespaced titles."""

    COMMANDS: ClassVar[list[tuple[str, str, str]]] = [
        ("heartbeat: fire now", "fire_heartbeat", "run one heartbeat tick now"),
        ("heartbeat: pause or resume", "toggle_pause", "stop or restart the heartbeat timer"),
        ("change: approve selected", "approve", "record an approval of the selected change in git"),
        ("change: revert selected", "revert", "undo the selected change with a new commit"),
        ("change: reject selected pending change", "reject", "drop a change that awaits review"),
        ("change: replay selected", "replay", "what the change does to the agent's recorded traffic"),
        ("stage: run by hand", "run_stage", "dispatch a stage to every hook with an input you edit"),
        ("runs: follow new runs", "show_tab('runs');follow", "jump to the newest run and keep following"),
        ("runs: failures only", "show_tab('runs');toggle_failures", "show only failed hook runs"),
        *[(f"view: {label.lower()}", f"show_tab('{view}')", "") for view, _, label in VIEWS],
    ]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        app = self.app
        assert isinstance(app, EvolveConsole)
        for title, action, help_text in self.COMMANDS:
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), _runner(app, action), help=help_text)


def _runner(app: App[Any], action: str) -> Callable[[], Any]:
    async def run() -> None:
        for step in action.split(";"):  # e.g. switch to a view, then act in it
            await app.run_action(step)

    return run


class EvolveConsole(App[None]):
    CSS_PATH = str(Path(__file__).with_name("console.tcss"))  # also for subclasses elsewhere
    TITLE = "evolve"
    AUTO_FOCUS = "#runs-table"  # the arrow keys move through the runs at once
    COMMANDS = App.COMMANDS | {EvolveCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "q",
            "quit",
            "Quit",
            id="app.quit",
            tooltip="Close the console (the engine keeps running)",
        ),
        # The view keys are shown in the view bar ("1 Hook runs"), not in the key bar.
        *[
            Binding(key, f"show_tab('{view}')", label, id=f"view.{view}", show=False)
            for view, key, label in VIEWS
        ],
        Binding("f", "fire_heartbeat", "Fire", id="heartbeat.fire", tooltip="Run one heartbeat tick now"),
        Binding(
            "p", "toggle_pause", "Pause/resume", id="heartbeat.pause", tooltip="Pause or resume the timer"
        ),
        Binding("a", "approve", "Approve", id="change.approve", tooltip="Approve the selected change"),
        Binding(
            "r", "revert", "Revert", id="change.revert", tooltip="Revert the selected change (asks first)"
        ),
        Binding("d", "reject", "Reject", id="change.reject", tooltip="Reject the selected pending change"),
        Binding(
            "e",
            "replay",
            "Replay",
            id="change.replay",
            tooltip="Replay the selected change on recorded traffic: what it changes for the agent",
        ),
        Binding("s", "run_stage", "Run stage", id="stage.run", tooltip="Dispatch a stage by hand"),
        Binding("g", "follow", "Follow", id="runs.follow", tooltip="Jump to the newest row and follow"),
        Binding("x", "toggle_failures", "Failures", id="runs.failures", tooltip="Show only failed runs"),
        Binding(
            "slash", "focus_filter", "Filter", id="runs.filter", tooltip="Filter runs by stage, hook, session"
        ),
        Binding(
            "m", "more", "More", id="detail.more", tooltip="See the selected run's truncated fields in full"
        ),
    ]

    def __init__(
        self, target: Target, *, clock: Callable[[], float] = time.time, poll_s: float = 5.0
    ) -> None:
        super().__init__()
        # No animations (scrolling jumps): a console that follows a flood of runs needs its frames
        # for the runs.
        self.animation_level = "none"
        self.target = target
        self.client = EngineClient(target)
        self.clock = clock
        self.poll_s = poll_s
        self.model = ConsoleModel()
        self.run_detail: HookRun | None = None  # the selected run, in full
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
                    if event.seq % 20 == 0:
                        # Buffered events arrive without the loop ever waiting: let keys and
                        # repaints in between.
                        await asyncio.sleep(0)
                raise EngineGone("the event stream ended")
            except (EngineGone, EngineError) as exc:
                self.post_message(ConnectionChanged(False, f"{exc}; retrying"))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                await self.rediscover()

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
        if self.model.apply_reload(part, data, since=since) and draw:
            self.draw(part)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        self.model.set_connection(message.connected, message.detail)
        self.render_connection()

    # ---- drawing the model ------------------------------------------------------------------

    def draw(self, part: Part) -> None:
        """Show `part` as the model holds it now."""
        model = self.model
        if part is Part.RUNS:
            self.query_one("#runs-table", KeyedTable).replace_all(
                [RunsView.row(r) for r in model.runs.values()]
            )
            self.render_counts()
        elif part is Part.COUNTS:
            self.render_counts()
        elif part is Part.STAGES:
            self.query_one("#stages-table", KeyedTable).replace_all(
                [StagesView.row(d) for d in model.dispatches.values()]
            )
        elif part is Part.SESSIONS:
            self._draw_rows("#sessions-table", [SessionsView.row(s) for s in model.sessions.values()])
        elif part is Part.CHANGES:
            view = self.query_one(ChangesView)
            self._draw_rows("#changes-table", [view.row(c) for c in model.changes.values()])
            self.refresh_bindings()
        elif part is Part.HEARTBEAT:
            if model.heartbeat is not None:
                self.query_one(HeartbeatView).show_status(model.heartbeat, self.clock())
        elif part is Part.STATUS:
            self.render_connection()

    def _draw_rows(self, table_id: str, rows: list[tuple[str, list[Any]]]) -> None:
        """All rows of a table anew, moving none that stays (a reload of sessions or changes)."""
        table = self.query_one(table_id, KeyedTable)
        if set(table.rows) - {key for key, _ in rows}:
            table.replace_all(rows)
        else:
            table.upsert(rows)

    def render_connection(self) -> None:
        model = self.model
        text = Text(no_wrap=True, overflow="ellipsis")
        if model.connected:
            text.append(" engine ● connected ", style="bold reverse green")
        else:
            text.append(" engine ○ disconnected ", style="bold reverse red")
        text.append(f" {short(model.detail, 70)}  ")
        opencode = model.status.opencode if model.status else []
        if opencode:
            modes = ", ".join(sorted({str(c.mode) for c in opencode}))
            text.append(f" opencode ● {len(opencode)} connected ({modes}) ", style="bold reverse green")
        else:
            text.append(" opencode ○ not connected ", style="bold reverse yellow")
        errors = model.status.config_errors if model.status else []
        if errors:
            text.append(
                f"  config: {len(errors)} errors (last good config in use): {short(errors[0], 60)}",
                style="bold red",
            )
        workspace = (model.status.workspace if model.status else None) or self.target.workspace
        if workspace:
            text.append(f"  workspace {workspace}", style="dim")
        self.query_one("#connection", Line).show(text)

    def render_counts(self) -> None:
        table = self.query_one("#runs-table", KeyedTable)
        counts, live = self.model.counts, self.model.events_seen["hook_run"]
        text = (
            f"{counts.get('runs', 0):,} runs in the journal · {counts.get('failed_runs', 0):,} failed · "
            f"{live:,} received live · showing {table.row_count:,}"
        )
        if not table.following and table.unseen:
            text += f"  · +{table.unseen:,} new (g to follow)"
        self.query_one("#runs-status", Line).show(text)

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
            self._reload_stale()

    def _show(self, update: Update) -> None:
        for severity, notice in update.notices:
            self.notify(
                short(f"{notice.source}: {notice.message}", 300),
                severity="error" if severity == "error" else "warning",
                timeout=8,
            )
        with self.batch_update():
            if update.runs:
                self.query_one("#runs-table", KeyedTable).upsert([RunsView.row(r) for r in update.runs])
            if update.stages:
                self.query_one("#stages-table", KeyedTable).upsert([StagesView.row(d) for d in update.stages])
            for part in update.redraw - {Part.RUNS, Part.STAGES}:
                self.draw(part)
            self.render_counts()
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

    def _reload_stale(self) -> None:
        parts = self.model.take_reloads()
        if parts:
            self.refresh_parts(parts)

    @work(group="refresh", exit_on_error=False)
    async def refresh_parts(self, parts: set[Part]) -> None:
        for part in (Part.RUNS, Part.STAGES, Part.SESSIONS, Part.CHANGES, Part.HEARTBEAT, Part.STATUS):
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
                self.query_one(HeartbeatView).show_status(self.model.heartbeat, self.clock())
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
        self.query_one(RunsView).show_run(run)

    @on(KeyedTable.RowHighlighted, "#stages-table")
    def stage_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        d = self.model.dispatches.get(event.key)
        if d:
            self.query_one(StagesView).show_dispatch(d)

    @on(KeyedTable.RowHighlighted, "#sessions-table")
    def session_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.load_session(event.key)

    @work(exclusive=True, group="session-detail", exit_on_error=False)
    async def load_session(self, session_id: str) -> None:
        session = SessionInfo.from_dict(await self.client.get(f"/v1/sessions/{session_id}"))
        self.query_one(SessionsView).show_session(session)

    @on(KeyedTable.RowHighlighted, "#changes-table")
    def change_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.refresh_bindings()
        change = self.model.changes.get(event.key)
        if change is not None:
            self.load_change(change)

    @work(exclusive=True, group="change-detail", exit_on_error=False)
    async def load_change(self, change: ChangeEntry) -> None:
        try:
            replay: ReplayResult | None = ReplayResult.from_dict(await self.client.get(replay_route(change)))
        except EngineError:
            replay = None  # none yet
        extra = replay_line(replay)
        if change.pending_id:
            pending = await self.client.get(f"/v1/pending/{change.pending_id}")
            self.query_one(ChangesView).show_change(change, pending.get("diff") or "", False, extra)
        else:
            diff = await self.client.get(f"/v1/changes/{change.key}/diff")
            self.query_one(ChangesView).show_change(change, diff["diff"], diff.get("truncated", False), extra)

    # ---- filters ----------------------------------------------------------------------------

    @on(Input.Submitted, "#run-filters Input")
    @on(Switch.Changed, "#filter-failed")
    def filters_changed(self) -> None:
        self.model.run_filter = self.query_one(RunsView).run_filter()
        self.apply_filters()

    @work(exclusive=True, group="run-filter", exit_on_error=False)
    async def apply_filters(self) -> None:
        await self.reload(Part.RUNS)

    # ---- actions ----------------------------------------------------------------------------

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
            if self.model.heartbeat and tab == "heartbeat":
                self.query_one(HeartbeatView).show_status(self.model.heartbeat, self.clock())
        # The focus goes with the view, in the same frame (every focus change repaints the whole
        # screen); a widget of a hidden view must not keep it.
        tables = new.query(KeyedTable)
        self.screen.set_focus(tables.first() if tables else None)

    @on(ViewBar.Selected)
    def view_selected(self, event: ViewBar.Selected) -> None:
        self.action_show_tab(event.view)

    def selected_change(self) -> ChangeEntry | None:
        if self.shown != "changes":
            return None
        key = self.query_one("#changes-table", KeyedTable).selected_key()
        return self.model.changes.get(key) if key else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that only mean something in some views are shown only there.
        tab = self.shown
        if action in ("follow", "toggle_failures"):
            return tab == "runs" or (action == "follow" and tab in ("stages", "changes"))
        if action == "more":
            return tab in ("runs", "stages", "sessions")
        if action in ("approve", "revert", "reject", "replay"):
            change = self.selected_change()
            if change is None:
                return None if tab == "changes" else False
            if action == "reject" and not change.pending_id:
                return None
            if action == "revert" and not change.revertible:
                return None
        return True

    def refresh_bindings(self) -> None:
        super().refresh_bindings()
        try:
            change = self.selected_change()
            self.query_one("#change-approve", Button).disabled = change is None
            self.query_one("#change-revert", Button).disabled = change is None or not change.revertible
            self.query_one("#change-reject", Button).disabled = change is None or not change.pending_id
        except Exception:
            pass  # not mounted yet

    @on(Button.Pressed, "#hb-fire")
    def action_fire_heartbeat(self) -> None:
        self.notify("heartbeat: firing now…", timeout=3)
        self.fire_heartbeat()

    @work(group="actions", exit_on_error=False)
    async def fire_heartbeat(self) -> None:
        result = (await self.client.post("/v1/heartbeat/fire", timeout=3600))["result"]
        reason = f": {result['reason']}" if result.get("reason") else ""
        self.notify(
            f"heartbeat {result['outcome']}{reason}",
            severity="information" if result["outcome"] == "ok" else "warning",
            timeout=8,
        )
        await self.reload(Part.HEARTBEAT)

    @on(Button.Pressed, "#hb-pause")
    @on(Button.Pressed, "#hb-resume")
    def action_toggle_pause(self) -> None:
        self.toggle_pause()

    @work(group="actions", exit_on_error=False)
    async def toggle_pause(self) -> None:
        paused = bool(self.model.heartbeat and self.model.heartbeat.paused)
        since = self.model.applied_seq
        status = await self.client.post(f"/v1/heartbeat/{'resume' if paused else 'pause'}")
        self.model.apply_reload(Part.HEARTBEAT, status, since=since)
        self.draw(Part.HEARTBEAT)
        self.notify("heartbeat resumed" if paused else "heartbeat paused", timeout=3)

    @on(Button.Pressed, "#change-approve")
    def action_approve(self) -> None:
        change = self.selected_change()
        if change is not None:
            self.approve_change(change)

    @work(group="actions", exit_on_error=False)
    async def approve_change(self, change: ChangeEntry) -> None:
        if change.pending_id:
            await self.client.post(f"/v1/pending/{change.pending_id}/approve")
            self.notify(f"installed: {change.subject}", timeout=5)
        else:
            await self.client.post(f"/v1/changes/{change.key}/approve")
            self.notify(f"approved {change.key[:10]}", timeout=5)
        await self.reload(Part.CHANGES)

    @on(Button.Pressed, "#change-revert")
    def action_revert(self) -> None:
        change = self.selected_change()
        if change is None or change.pending_id:
            return
        question = f"Revert {change.key[:10]} “{short(change.subject, 60)}”?"
        detail = (
            "A new commit undoes it (history is kept); hooks and prompts reload at once.\nFiles: "
            + ", ".join(change.files)
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.revert_change(change)

        self.push_screen(ConfirmScreen(question, detail), confirmed)

    @work(group="actions", exit_on_error=False)
    async def revert_change(self, change: ChangeEntry) -> None:
        try:
            result = await self.client.post(f"/v1/changes/{change.key}/revert")
        except EngineError as exc:
            self.notify(str(exc), title="revert refused", severity="error", timeout=12)
            return
        self.notify(f"reverted {change.key[:10]} as {result['sha'][:10]}", timeout=6)
        await self.reload(Part.CHANGES)

    @on(Button.Pressed, "#change-reject")
    def action_reject(self) -> None:
        change = self.selected_change()
        if change is not None and change.pending_id:
            self.reject_change(change)

    def action_replay(self) -> None:
        change = self.selected_change()
        if change is not None:
            self.push_screen(ReplayScreen(lambda: self.client, change))

    @work(group="actions", exit_on_error=False)
    async def reject_change(self, change: ChangeEntry) -> None:
        await self.client.post(f"/v1/pending/{change.pending_id}/reject")
        self.notify(f"rejected: {change.subject}", timeout=5)
        await self.reload(Part.CHANGES)

    def action_run_stage(self) -> None:
        def chosen(request: dict[str, Any] | None) -> None:
            if request:
                self.run_stage(request)

        self.push_screen(StageScreen(), chosen)

    @work(group="actions", exit_on_error=False)
    async def run_stage(self, request: dict[str, Any]) -> None:
        result = await self.client.post(
            f"/v1/stages/{request['stage']}",
            {"context": request["context"], "session": request["session"]},
            timeout=600,
        )
        summary = f"{request['stage']}: {len(result.get('hooks') or [])} hooks"
        if result.get("failed"):
            summary += f", failed: {', '.join(result['failed'])}"
        if result.get("recovered"):
            summary += ", recover stepped in"
        self.push_screen(ResultScreen(summary, as_json(result.get("merged"))))

    def action_follow(self) -> None:
        table_id = {"runs": "#runs-table", "stages": "#stages-table", "changes": "#changes-table"}.get(
            self.shown
        )
        if table_id:
            self.query_one(table_id, KeyedTable).follow()
            self.render_counts()

    def action_toggle_failures(self) -> None:
        switch = self.query_one("#filter-failed", Switch)
        switch.value = not switch.value

    def action_focus_filter(self) -> None:
        self.action_show_tab("runs")
        self.screen.set_focus(self.query_one("#filter-stage", Input))

    def action_more(self) -> None:
        pane = {"runs": "#run-detail", "stages": "#stage-detail", "sessions": "#session-detail"}.get(
            self.shown
        )
        if pane is None:
            return
        truncated = self.query_one(pane, DetailPane).truncated
        if not truncated:
            self.notify("nothing is truncated here", timeout=3)
            return
        self.push_screen(MoreScreen(truncated[0].title, truncated[0].text))

    # ---- errors of workers ------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is not WorkerState.ERROR or event.worker.group == "engine-stream":
            return
        error = event.worker.error
        if isinstance(error, EngineGone):
            self.post_message(ConnectionChanged(False, f"{error}; retrying"))
            self.notify(str(error), severity="warning", timeout=5)
        else:
            self.notify(
                f"{type(error).__name__}: {error}",
                title=event.worker.name or "error",
                severity="error",
                timeout=10,
            )
