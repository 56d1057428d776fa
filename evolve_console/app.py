"""The operator console: watch the agent evolve, fire heartbeats, approve or revert its changes.

One long-lived worker follows the engine's event stream; events are applied to the screen in
time-sliced batches (four times a second), so a flood of hook runs never starves the keyboard.
Everything else is a request to the engine's API in a worker, never on the event loop's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import Counter, deque
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
from textual.reactive import reactive
from textual.widgets import Button, Input, Switch
from textual.worker import Worker, WorkerState

from .client import EngineClient, EngineError, EngineGone, Target
from .detail import DetailPane
from .format import as_json, short
from .keybar import KeyBar
from .line import Line
from .screens import ConfirmScreen, MoreScreen, ResultScreen, StageScreen
from .table import MAX_ROWS, KeyedTable
from .textual_private import skip_own_layout
from .viewbar import ViewBar
from .views import (
    ChangesView,
    HeartbeatView,
    RunsView,
    SessionsView,
    StagesView,
    run_summary,
)

HISTORY_LIMIT = 500
VIEWS = [  # (view id, key, label): the view bar, the view keys and the palette's view commands
    ("runs", "1", "Hook runs"),
    ("stages", "2", "Stage results"),
    ("sessions", "3", "Sessions"),
    ("heartbeat", "4", "Heartbeat"),
    ("changes", "5", "Self-modifications"),
]
FLOOD = 100  # pending events per tick (a quarter second) above which repaints slow down


class EngineStatus(Message):
    """The connection to the engine changed (latest wins)."""

    def __init__(self, connected: bool, detail: str) -> None:
        super().__init__()
        self.connected = connected
        self.detail = detail

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineStatus)


class EvolveCommands(Provider):
    """Console actions in the command palette, with namespaced titles."""

    COMMANDS: ClassVar[list[tuple[str, str, str]]] = [
        ("heartbeat: fire now", "fire_heartbeat", "run one heartbeat tick now"),
        ("heartbeat: pause or resume", "toggle_pause", "stop or restart the heartbeat timer"),
        ("change: approve selected", "approve", "record an approval of the selected change in git"),
        ("change: revert selected", "revert", "undo the selected change with a new commit"),
        ("change: reject selected pending change", "reject", "drop a change that awaits review"),
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

    engine_connected: reactive[bool] = reactive(False)

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
        self.last_seq: int | None = None
        self.engine_pid: int | None = None
        self.engine_detail = "connecting…"
        self.status: dict[str, Any] = {}
        self.heartbeat: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.events_seen = Counter[str]()
        self._pending: list[dict[str, Any]] = []
        self.applied_seq = 0  # the seq of the newest event applied to the screen
        self._applied_runs: deque[tuple[int, dict[str, Any]]] = deque(maxlen=MAX_ROWS)
        self._ticks = 0
        self._dirty: set[str] = set()
        self.changes: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.dispatches: dict[str, dict[str, Any]] = {}
        self.run_detail: dict[str, Any] | None = None
        self.first_load = asyncio.Event()
        self.shown = "runs"  # the view on screen

    # ---- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Line(id="connection")
        yield ViewBar(VIEWS, shown=self.shown, id="views")
        pages = {
            "runs": RunsView,
            "stages": StagesView,
            "sessions": SessionsView,
            "heartbeat": HeartbeatView,
            "changes": ChangesView,
        }
        for view, _, _ in VIEWS:
            page = pages[view](id=view, classes="page")
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
                if health.get("pid") != self.engine_pid:
                    # A new engine process numbers its events from 1 again.
                    self.engine_pid, self.last_seq = health.get("pid"), None
                    self.applied_seq = 0
                    self._applied_runs.clear()
                if self.last_seq is None:
                    # Events from here on are replayed after the history is loaded, so a run
                    # recorded in between is in one or the other (rows are keyed: no duplicates).
                    self.last_seq = int(health.get("seq") or 0)
                await self.load_all()
                self.post_message(EngineStatus(True, f"{self.target.url} · pid {health.get('pid')}"))
                delay = 0.5
                async for event in self.client.events(self.last_seq):
                    seq = int(event.get("seq") or 0)
                    if self.last_seq is not None and seq > self.last_seq + 1:
                        self._dirty.add("runs")  # events were dropped on the way: reload from the journal
                    self.last_seq = seq
                    self._pending.append(event)
                    if seq % 20 == 0:
                        # Buffered events arrive without the loop ever waiting: let keys and
                        # repaints in between.
                        await asyncio.sleep(0)
                raise EngineGone("the event stream ended")
            except (EngineGone, EngineError) as exc:
                self.post_message(EngineStatus(False, f"{exc}; retrying"))
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
        self.status = await self.client.get("/v1/status")
        await self.reload_runs()
        dispatches = (await self.client.get("/v1/dispatches", limit=HISTORY_LIMIT))["dispatches"]
        self.dispatches = {d["id"]: d for d in dispatches}
        self.query_one("#stages-table", KeyedTable).replace_all(
            [StagesView.row(d) for d in reversed(dispatches)]
        )
        await self.reload_sessions()
        await self.reload_changes()
        await self.reload_heartbeat()
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

    async def reload_runs(self) -> None:
        view = self.query_one(RunsView)
        params = {**view.filters(), "limit": HISTORY_LIMIT}
        applied = self.applied_seq
        data = await self.client.get("/v1/runs", **params)
        self.counts = data.get("counts") or {}
        runs = [run_summary(r) for r in reversed(data["runs"])]
        # Runs applied from the stream while the request was out may be newer than its answer.
        runs += [run for seq, run in self._applied_runs if seq > applied]
        self.query_one("#runs-table", KeyedTable).replace_all([RunsView.row(r) for r in runs])
        self.render_counts()

    async def reload_sessions(self) -> None:
        sessions = (await self.client.get("/v1/sessions"))["sessions"]
        self.sessions = {s["id"]: s for s in sessions}
        table = self.query_one("#sessions-table", KeyedTable)
        rows = [SessionsView.row(s) for s in sessions]
        if set(table.rows) - {r[0] for r in rows}:
            table.replace_all(rows)
        else:
            table.upsert(rows)

    async def reload_changes(self) -> None:
        data = await self.client.get("/v1/changes", limit=HISTORY_LIMIT)
        entries: list[dict[str, Any]] = []
        for c in reversed(data["changes"]):
            entries.append({**c, "key": c["sha"]})
        for p in data.get("pending") or []:
            if p.get("status") == "pending":
                entries.append(
                    {
                        "key": p["id"],
                        "pending_id": p["id"],
                        "origin": "pending",
                        "time": p.get("created_at"),
                        "subject": f"{p.get('message')} (awaits review)",
                        "files": [p.get("file")],
                        "trailers": {
                            "tool": p.get("tool"),
                            "session": p.get("session"),
                            "call": p.get("call_id"),
                        },
                    }
                )
        self.changes = {e["key"]: e for e in entries}
        view = self.query_one(ChangesView)
        table = self.query_one("#changes-table", KeyedTable)
        rows = [view.row(e) for e in entries]
        if set(table.rows) - set(self.changes):
            table.replace_all(rows)
        else:
            table.upsert(rows)
        self.refresh_bindings()

    async def reload_heartbeat(self) -> None:
        self.heartbeat = await self.client.get("/v1/heartbeat")
        self.query_one(HeartbeatView).show_status(self.heartbeat, self.clock())

    def on_engine_status(self, message: EngineStatus) -> None:
        self.engine_connected = message.connected
        self.engine_detail = message.detail
        self.render_connection()

    def render_connection(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.engine_connected:
            text.append(" engine ● connected ", style="bold reverse green")
        else:
            text.append(" engine ○ disconnected ", style="bold reverse red")
        text.append(f" {short(self.engine_detail, 70)}  ")
        opencode = self.status.get("opencode") or []
        if opencode:
            modes = ", ".join(sorted({str(c.get("mode")) for c in opencode}))
            text.append(f" opencode ● {len(opencode)} connected ({modes}) ", style="bold reverse green")
        else:
            text.append(" opencode ○ not connected ", style="bold reverse yellow")
        errors = self.status.get("config_errors") or []
        if errors:
            text.append(
                f"  config: {len(errors)} errors (last good config in use): {short(errors[0], 60)}",
                style="bold red",
            )
        workspace = self.status.get("workspace") or self.target.workspace
        if workspace:
            text.append(f"  workspace {workspace}", style="dim")
        self.query_one("#connection", Line).show(text)

    def render_counts(self) -> None:
        table = self.query_one("#runs-table", KeyedTable)
        text = (
            f"{self.counts.get('runs', 0):,} runs in the journal · {self.counts.get('failed_runs', 0):,} failed · "
            f"{self.events_seen['hook_run']:,} received live · showing {table.row_count:,}"
        )
        if not table.following and table.unseen:
            text += f"  · +{table.unseen:,} new (g to follow)"
        self.query_one("#runs-status", Line).show(text)

    # ---- applying events in batches ---------------------------------------------------------

    def apply_events(self) -> None:
        # Under a flood, repaint the tables about once a second instead of four times: each
        # repaint of a scrolled table costs real time, and the keyboard must stay responsive.
        self._ticks += 1
        if len(self._pending) > FLOOD and self._ticks % 4:
            return
        with contextlib.suppress(NoMatches):  # the console is closing
            self._apply_events()

    def _apply_events(self) -> None:
        if not self._pending:
            self._flush_dirty()
            return
        events, self._pending = self._pending, []
        self.applied_seq = int(events[-1].get("seq") or 0)
        runs: dict[str, dict[str, Any]] = {}
        stages: list[dict[str, Any]] = []
        matches = self.query_one(RunsView).matcher()
        for event in events:
            kind = event.get("kind", "")
            self.events_seen[kind] += 1
            data = event.get("data") or {}
            if kind == "hook_run":
                # Counts come from the journal (poll_counts): exact, also when the journal trims.
                if matches(data):
                    runs[data["id"]] = summary = run_summary(data)
                    self._applied_runs.append((int(event.get("seq") or 0), summary))
            elif kind == "stage":
                stages.append(data)
            elif kind in ("session_frozen", "notification", "opencode"):
                self._dirty.add("sessions")
                if kind == "opencode":
                    self._dirty.add("status")
            elif kind in ("commit", "review", "pending"):
                self._dirty.add("changes")
            elif kind == "heartbeat":
                self._dirty.add("heartbeat")
            elif kind in ("config", "hooks_discovered"):
                self._dirty.add("status")
            elif kind in ("warning", "error"):
                self.notify(
                    short(f"{data.get('source')}: {data.get('message')}", 300),
                    severity="error" if kind == "error" else "warning",
                    timeout=8,
                )
        with self.batch_update():
            if runs:
                # Only the newest rows can be on screen: a flood costs the table no more than that.
                newest = list(runs.values())[-MAX_ROWS:]
                self.query_one("#runs-table", KeyedTable).upsert([RunsView.row(r) for r in newest])
            if stages:
                for d in stages:
                    self.dispatches[d["id"]] = d
                table = self.query_one("#stages-table", KeyedTable)
                table.upsert([StagesView.row(d) for d in stages])
                if len(self.dispatches) > 2 * MAX_ROWS:  # keep the details of the rows shown
                    self.dispatches = {k: v for k, v in self.dispatches.items() if k in table.rows}
            self.render_counts()
        self._flush_dirty()

    def _flush_dirty(self) -> None:
        if self._dirty and self.engine_connected:
            dirty, self._dirty = self._dirty, set()
            self.refresh_parts(dirty)

    @work(group="refresh", exit_on_error=False)
    async def refresh_parts(self, parts: set[str]) -> None:
        if "runs" in parts:
            await self.reload_runs()
        if "sessions" in parts:
            await self.reload_sessions()
        if "changes" in parts:
            await self.reload_changes()
        if "heartbeat" in parts:
            await self.reload_heartbeat()
        if "status" in parts:
            self.status = await self.client.get("/v1/status")
            self.render_connection()

    @work(exclusive=True, group="counts", exit_on_error=False)
    async def poll_counts(self) -> None:
        """The journal's exact counts (live events only estimate them); re-armed when done."""
        try:
            if self.engine_connected:
                self.counts = (await self.client.get("/v1/runs", limit=0)).get("counts") or self.counts
                with contextlib.suppress(NoMatches):
                    self.render_counts()
        finally:
            self.set_timer(self.poll_s, self.poll_counts, name="counts")

    def tick_clock(self) -> None:
        with contextlib.suppress(NoMatches):  # the console is closing
            if self.heartbeat and self.shown == "heartbeat":
                self.query_one(HeartbeatView).show_status(self.heartbeat, self.clock())
            self.render_counts()

    # ---- selection and details --------------------------------------------------------------

    @on(KeyedTable.RowHighlighted, "#runs-table")
    def run_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.render_counts()
        self.load_run(event.key)

    @work(exclusive=True, group="run-detail", exit_on_error=False)
    async def load_run(self, run_id: str) -> None:
        await asyncio.sleep(0.05)  # cursor moving fast: only the row it stops on is fetched
        run = await self.client.get(f"/v1/runs/{run_id}")
        self.run_detail = run
        self.query_one(RunsView).show_run(run)

    @on(KeyedTable.RowHighlighted, "#stages-table")
    def stage_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        d = self.dispatches.get(event.key)
        if d:
            self.query_one(StagesView).show_dispatch(d)

    @on(KeyedTable.RowHighlighted, "#sessions-table")
    def session_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.load_session(event.key)

    @work(exclusive=True, group="session-detail", exit_on_error=False)
    async def load_session(self, session_id: str) -> None:
        self.query_one(SessionsView).show_session(await self.client.get(f"/v1/sessions/{session_id}"))

    @on(KeyedTable.RowHighlighted, "#changes-table")
    def change_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.refresh_bindings()
        if event.key in self.changes:
            self.load_change(event.key)

    @work(exclusive=True, group="change-detail", exit_on_error=False)
    async def load_change(self, key: str) -> None:
        change = self.changes[key]
        if change.get("pending_id"):
            pending = await self.client.get(f"/v1/pending/{change['pending_id']}")
            self.query_one(ChangesView).show_change(change, pending.get("diff") or "", False)
        else:
            diff = await self.client.get(f"/v1/changes/{key}/diff")
            self.query_one(ChangesView).show_change(change, diff["diff"], diff.get("truncated", False))

    # ---- filters ----------------------------------------------------------------------------

    @on(Input.Submitted, "#run-filters Input")
    @on(Switch.Changed, "#filter-failed")
    def filters_changed(self) -> None:
        self.apply_filters()

    @work(exclusive=True, group="run-filter", exit_on_error=False)
    async def apply_filters(self) -> None:
        await self.reload_runs()

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
            if self.heartbeat and tab == "heartbeat":
                self.query_one(HeartbeatView).show_status(self.heartbeat, self.clock())
        # The focus goes with the view, in the same frame (every focus change repaints the whole
        # screen); a widget of a hidden view must not keep it.
        tables = new.query(KeyedTable)
        self.screen.set_focus(tables.first() if tables else None)

    @on(ViewBar.Selected)
    def view_selected(self, event: ViewBar.Selected) -> None:
        self.action_show_tab(event.view)

    def selected_change(self) -> dict[str, Any] | None:
        if self.shown != "changes":
            return None
        key = self.query_one("#changes-table", KeyedTable).selected_key()
        return self.changes.get(key) if key else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that only mean something in some views are shown only there.
        tab = self.shown
        if action in ("follow", "toggle_failures"):
            return tab == "runs" or (action == "follow" and tab in ("stages", "changes"))
        if action == "more":
            return tab in ("runs", "stages", "sessions")
        if action in ("approve", "revert", "reject"):
            change = self.selected_change()
            if change is None:
                return None if tab == "changes" else False
            pending = bool(change.get("pending_id"))
            if action == "reject" and not pending:
                return None
            if action == "revert" and (pending or change.get("origin") == "initial"):
                return None
        return True

    def refresh_bindings(self) -> None:
        super().refresh_bindings()
        try:
            change = self.selected_change()
            self.query_one("#change-approve", Button).disabled = change is None
            self.query_one("#change-revert", Button).disabled = (
                change is None or bool(change.get("pending_id")) or change.get("origin") == "initial"
            )
            self.query_one("#change-reject", Button).disabled = change is None or not change.get("pending_id")
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
        await self.reload_heartbeat()

    @on(Button.Pressed, "#hb-pause")
    @on(Button.Pressed, "#hb-resume")
    def action_toggle_pause(self) -> None:
        self.toggle_pause()

    @work(group="actions", exit_on_error=False)
    async def toggle_pause(self) -> None:
        paused = bool(self.heartbeat.get("paused"))
        self.heartbeat = await self.client.post(f"/v1/heartbeat/{'resume' if paused else 'pause'}")
        self.query_one(HeartbeatView).show_status(self.heartbeat, self.clock())
        self.notify("heartbeat resumed" if paused else "heartbeat paused", timeout=3)

    @on(Button.Pressed, "#change-approve")
    def action_approve(self) -> None:
        change = self.selected_change()
        if change is not None:
            self.approve_change(change)

    @work(group="actions", exit_on_error=False)
    async def approve_change(self, change: dict[str, Any]) -> None:
        if change.get("pending_id"):
            await self.client.post(f"/v1/pending/{change['pending_id']}/approve")
            self.notify(f"installed: {change.get('subject')}", timeout=5)
        else:
            await self.client.post(f"/v1/changes/{change['sha']}/approve")
            self.notify(f"approved {str(change['sha'])[:10]}", timeout=5)
        await self.reload_changes()

    @on(Button.Pressed, "#change-revert")
    def action_revert(self) -> None:
        change = self.selected_change()
        if change is None or change.get("pending_id"):
            return
        question = f"Revert {str(change['sha'])[:10]} “{short(change.get('subject'), 60)}”?"
        detail = (
            "A new commit undoes it (history is kept); hooks and prompts reload at once.\nFiles: "
            + ", ".join(change.get("files") or [])
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.revert_change(change)

        self.push_screen(ConfirmScreen(question, detail), confirmed)

    @work(group="actions", exit_on_error=False)
    async def revert_change(self, change: dict[str, Any]) -> None:
        try:
            result = await self.client.post(f"/v1/changes/{change['sha']}/revert")
        except EngineError as exc:
            self.notify(str(exc), title="revert refused", severity="error", timeout=12)
            return
        self.notify(f"reverted {str(change['sha'])[:10]} as {result['sha'][:10]}", timeout=6)
        await self.reload_changes()

    @on(Button.Pressed, "#change-reject")
    def action_reject(self) -> None:
        change = self.selected_change()
        if change is not None and change.get("pending_id"):
            self.reject_change(change)

    @work(group="actions", exit_on_error=False)
    async def reject_change(self, change: dict[str, Any]) -> None:
        await self.client.post(f"/v1/pending/{change['pending_id']}/reject")
        self.notify(f"rejected: {change.get('subject')}", timeout=5)
        await self.reload_changes()

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
            self.post_message(EngineStatus(False, f"{error}; retrying"))
            self.notify(str(error), severity="warning", timeout=5)
        else:
            self.notify(
                f"{type(error).__name__}: {error}",
                title=event.worker.name or "error",
                severity="error",
                timeout=10,
            )
