"""The operator console: watch the agent evolve, fire heartbeats, approve or revert its changes.

The app holds the engine it follows (`Agent`: its client and the model) and the connection to it:
one long-lived worker follows the engine's event stream into the model, and the events are applied
in time-sliced batches (four times a second), so a flood of hook runs never starves the keyboard;
parts the events only announce, and those a view asks for (`Reload`), are fetched in workers. What
changed goes to the main screen, whose views draw it: each view owns its table, its detail, its keys
and their handlers, and tells the app what it cannot do itself with messages (`messages.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from .agent import Agent
from .alerts import Alert, Severity
from .alertscreen import AlertScreen
from .client import EngineError, EngineGone, Target
from .evals import EvalScreen
from .failures import failure_text
from .help import MOVING, HelpScreen, keys_of
from .keys import APP_KEYS, applies
from .launch import LaunchError, engine_for
from .mainscreen import MainScreen, clear_toasts
from .messages import COMMAND_GROUP, ConnectionChanged, Failed, Reload, Toast
from .model import PART_NAMES, ConsoleModel, Part, Update, failure_alert, notice_alert
from .nextstep import Evolve, evolve_command
from .replay import ReplayScreen
from .status import connection_items
from .views import VIEWS, Registry

FLOOD = 100  # pending events per tick (a quarter second) above which repaints slow down
# Sessions first: the other tables name sessions by their titles.
LOAD_ORDER = (
    Part.STATUS,
    Part.SESSIONS,
    Part.RUNS,
    Part.STAGES,
    Part.CHANGES,
    Part.FAILURES,
    Part.HEARTBEAT,
    Part.TICKS,
    Part.TOOLS,
)
REFRESH_ORDER = (
    Part.RUNS,
    Part.STAGES,
    Part.SESSIONS,
    Part.CHANGES,
    Part.FAILURES,
    Part.HEARTBEAT,
    Part.TICKS,
    Part.STATUS,
    Part.TOOLS,
)
HEALTH_TIMEOUT_S = 10.0  # after a request failed, an engine slower than this to answer counts as down


class EvolveConsole(App[None]):
    CSS_PATH = str(Path(__file__).with_name("console.tcss"))  # also for subclasses elsewhere
    TITLE = "evolve"
    BINDINGS: ClassVar[list[BindingType]] = APP_KEYS

    def __init__(
        self,
        target: Target,
        *,
        views: Registry = VIEWS,
        clock: Callable[[], float] = time.time,
        poll_s: float = 5.0,
        bell: bool | None = None,
        evolve: Evolve | None = None,
    ) -> None:
        """`evolve`: how the operator's shell runs evolve, in the commands the console suggests
        (default: as `nextstep.evolve_command` finds it)."""
        super().__init__()
        # No animations (scrolling jumps): a console that follows a flood of runs needs its frames
        # for the runs.
        self.animation_level = "none"
        self.agent = Agent(target, clock, evolve if evolve is not None else evolve_command())
        self.views = views  # the registry the main screen is built from
        self.clock = clock
        self.poll_s = poll_s
        # The terminal bell on what needs the operator (a change held for review, a hook that starts
        # failing); EVOLVE_CONSOLE_BELL=0 (or --no-bell) keeps it quiet, the toast stays.
        self.bell_on = bell if bell is not None else os.environ.get("EVOLVE_CONSOLE_BELL", "1") != "0"
        self._main = MainScreen.of(self.agent, views)
        self._ticks = 0
        self._alerted: int | None = None  # the number of the alert the keys acted on at the last tick

    # ---- typed accessors ------------------------------------------------------------------------

    @property
    def main(self) -> MainScreen:
        """The screen of views (under any dialog open)."""
        return self._main

    @property
    def model(self) -> ConsoleModel:
        return self.agent.model

    @property
    def engine_connected(self) -> bool:
        return self.agent.model.connected

    @property
    def first_load(self) -> asyncio.Event:
        return self.agent.first_load

    @property
    def shown(self) -> str:
        """The name of the view on screen."""
        return self._main.shown

    def get_default_screen(self) -> Screen[None]:
        return self._main

    def on_mount(self) -> None:
        self.render_connection()

    def on_ready(self) -> None:
        # The main screen is composed (the app's own mount may come first): the views can draw.
        self.set_interval(0.25, self.apply_events, name="apply-events")
        self.set_interval(1.0, self.tick_clock, name="countdown")
        self.set_timer(self.poll_s, self.poll_counts, name="counts")
        self.follow_engine()

    async def on_unmount(self) -> None:
        await self.agent.aclose()

    # ---- following the engine ---------------------------------------------------------------

    @work(exclusive=True, group="engine-stream", exit_on_error=False)
    async def follow_engine(self) -> None:
        agent, delay = self.agent, 0.5
        while True:
            try:
                health = await agent.health()
                since = agent.model.apply_health(health)
                await self.load_all()
                self.post_message(ConnectionChanged(True, f"{agent.target.url} · pid {health.pid}"))
                delay = 0.5
                async for event in agent.client.events(since):
                    agent.model.receive(event)
                    agent.heard()
                    if event.seq % 20 == 0:
                        # Buffered events arrive without the loop ever waiting: let keys and
                        # repaints in between.
                        await asyncio.sleep(0)
                raise EngineGone("the event stream ended")
            except (EngineGone, EngineError) as exc:
                self.post_message(ConnectionChanged(False, str(exc)))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                await agent.rediscover()

    @work(exclusive=True, group="engine-check", exit_on_error=False)
    async def check_engine(self) -> None:
        """After a request failed: the engine is down only if its health check fails too; then the
        stream is followed anew (it may hang on a dead connection), which says when it is back."""
        try:
            await self.agent.health(timeout=HEALTH_TIMEOUT_S)
        except (EngineGone, EngineError) as exc:
            self.post_message(ConnectionChanged(False, str(exc)))
            self.follow_engine()

    async def load_all(self) -> None:
        """Everything from the journal and git, so history survives console and engine restarts."""
        for part in LOAD_ORDER:
            await self.reload(part, draw=part is not Part.STATUS)
        self.agent.heard()
        self.render_connection()
        if not self.first_load.is_set():
            # The hooks failing as the console starts: what is broken, and the change behind it
            # (the engine lists the newest first: the newest alert is the latest failure).
            for failure in reversed(list(self.agent.model.failures.values())):
                self.alert(failure_alert(failure, since=True))
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
        if await self.agent.fetch(part) and draw:
            self.draw(part)

    def draw(self, part: Part) -> None:
        """Show `part` as the model holds it now: the engine's status in the top bar, the rest in
        the views."""
        if part is Part.STATUS:
            self.render_connection()
        else:
            self._main.draw(part)

    def on_reload(self, message: Reload) -> None:
        # The latest request for a part wins (filters typed in quick succession).
        self.run_worker(
            self.reload(message.part),
            name=f"load {PART_NAMES[message.part]}",
            group=f"reload-{message.part}",
            exclusive=True,
            exit_on_error=False,
        )

    @work(group="refresh", exit_on_error=False, name="load what the engine announced")
    async def refresh_parts(self, parts: set[Part]) -> None:
        for part in REFRESH_ORDER:
            if part in parts:
                await self.reload(part)

    @work(exclusive=True, group="counts", exit_on_error=False, name="read the journal's counts")
    async def poll_counts(self) -> None:
        """The journal's exact counts (live events only estimate them); re-armed when done."""
        try:
            if self.engine_connected:
                with contextlib.suppress(NoMatches):
                    await self.reload(Part.COUNTS)
        finally:
            self.set_timer(self.poll_s, self.poll_counts, name="counts")

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        self.agent.set_connection(message.connected, message.detail)
        self.render_connection()
        self._main.draw(Part.HEARTBEAT)
        self._main.connection_changed()
        self.refresh_bindings()

    def render_connection(self) -> None:
        """The top bar (`status.connection_items`), and what follows the engine's status in the views."""
        agent = self.agent
        items = connection_items(agent.model, agent.workspace, self.clock(), agent.down_since, agent.heard_at)
        self._main.show_connection(items)

    # ---- applying events in batches ---------------------------------------------------------

    def apply_events(self) -> None:
        # Under a flood, repaint the tables about once a second instead of four times: each
        # repaint of a scrolled table costs real time, and the keyboard must stay responsive.
        self._ticks += 1
        model = self.agent.model
        if model.waiting > FLOOD and self._ticks % 4:
            return
        with contextlib.suppress(NoMatches):  # the console is closing
            if model.waiting:
                self.show_update(model.apply_waiting())
            stale = model.take_reloads()
            if stale:
                self.refresh_parts(stale)

    def show_update(self, update: Update) -> None:
        model = self.agent.model
        for severity, notice in update.notices:
            self.alert(notice_alert(severity, notice, model.changes))
        for alert in update.alerts:
            self.alert(alert)
        now = self.clock()
        if any([self.agent.alerts.decided(key, now) for key in update.decided]):
            self.show_toasts()  # the toast that waited for that decision goes
        if Part.STATUS in update.redraw:
            self.render_connection()
        self._main.apply(update)
        screen = self.screen
        if isinstance(screen, ReplayScreen):  # replays' progress to the replay screen open
            for record in update.replays:
                screen.follow(record)
        if isinstance(screen, EvalScreen):  # and behaviour checks' to theirs
            for found in update.evals:
                screen.follow(found)

    def tick_clock(self) -> None:
        with contextlib.suppress(NoMatches):  # the console is closing
            if not self.agent.model.connected:
                self.render_connection()  # how long the engine has been down
            self._main.tick()
            current = self.agent.alerts.current(self.clock())
            number = current.number if current is not None else None
            if number != self._alerted:  # an alert's toast went: the keys that acted on it follow
                self._alerted = number
                self._main.refresh_bindings()

    # ---- telling the operator ---------------------------------------------------------------

    def toast(self, message: str, severity: Severity = "information", timeout: float = 8.0) -> None:
        """Tell the operator `message` (`alert`)."""
        self.alert(Alert(message, severity, timeout=timeout))

    def alert(self, alert: Alert) -> None:
        """Tell the operator: a toast (at most a minute, unless it waits for a decision; a long one
        shows its beginning), or, for a long error, a dialog that shows it whole. It is kept, to be
        read again (`N`), and the keys act on the change it names while its toast is shown."""
        kept = self.agent.alerts.add(alert, self.clock())
        if kept.severity == "error" and kept.long:
            self.push_screen(AlertScreen([kept]))
        else:
            self._notify(kept)
        if kept.bell and self.bell_on:
            self.bell()
        self._alerted = None  # the keys follow at the next tick, or now
        self._main.refresh_bindings()

    def _notify(self, alert: Alert, timeout: float | None = None) -> None:
        self.notify(
            alert.toast_text(),
            title=alert.toast_title(),
            severity=alert.severity,
            timeout=alert.lasts if timeout is None else timeout,
            markup=False,
        )

    def show_toasts(self) -> None:
        """The toasts of the alerts still on screen, anew (one of them went before its time)."""
        clear_toasts(self)
        now = self.clock()
        for alert in self.agent.alerts.on_screen(now):
            if not (alert.severity == "error" and alert.long):
                self._notify(alert, timeout=max(alert.lasts - (now - alert.at), 1.0))
        self._main.refresh_bindings()

    def on_toast(self, message: Toast) -> None:
        alert = Alert(
            message.text,
            message.severity,
            timeout=message.timeout,
            change=message.change,
            revert=message.revert,
        )
        self.alert(alert)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.group != "engine-stream":
            self.tell_failure(event.worker)

    def on_failed(self, message: Failed) -> None:
        self.tell_failure(message.worker)

    def tell_failure(self, worker: Worker[object]) -> None:
        """A worker failed (the app's own, or a view's, a widget's, a screen's: `Failed`): the
        operator is told what it was doing and why it failed, in words."""
        error = worker.error
        # Workers are named for what they do ("approve the change"); those of the "actions" group
        # send commands, which may have been done although their answer was lost.
        said = failure_text(worker.name or "do that", error, command=worker.group == COMMAND_GROUP)
        if isinstance(error, EngineGone):
            # One request lost (a connection closed as it was reused, a slow answer) does not mean
            # the engine is gone, and saying so would stop the reloads while the stream goes on:
            # only the health check says the engine is down.
            self.alert(Alert(said, "warning", timeout=8))
            self.check_engine()
        else:
            self.toast(said, "error")

    # ---- its keys ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return applies(action, self._main.where(), self.views)

    def action_help(self) -> None:
        """`?`: the keys of the view or dialog on screen; `?` again closes the list."""
        screen = self.screen
        if isinstance(screen, HelpScreen):
            screen.dismiss(None)
            return
        if screen is self._main:
            view = self._main.shown_view
            number = [v.NAME for v in self.views].index(view.NAME) + 1
            title, note = f"Keys in view {number}, {view.LABEL}", MOVING
        else:
            kind = type(screen)
            title = f"Keys of this dialog: {kind.TITLE or 'the dialog'}"
            note = str(getattr(kind, "HELP_NOTE", ""))
        self.push_screen(HelpScreen(title, keys_of(screen, self), note))

    def action_start_engine(self) -> None:
        workspace = self.agent.workspace
        if workspace and not self.agent.model.connected:
            self.notify(f"starting the engine for {workspace}…", timeout=4)
            self.start_engine()

    @work(group=COMMAND_GROUP, exit_on_error=False, thread=True, name="start the engine")
    def start_engine(self) -> None:
        try:
            engine_for(Path(str(self.agent.workspace)), create=False)
        except LaunchError as exc:
            self.call_from_thread(self.toast, str(exc), "error")
