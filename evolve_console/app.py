"""The operator console: watch agents evolve, fire heartbeats, approve or revert their changes.

The app holds the engines it follows (an `Agent` each: its client and its model) and the connection
to each: per agent, one long-lived worker follows the engine's event stream into its model, and a
check asks an engine that has been quiet whether it still answers (each with its own timeouts, so
one engine that hangs holds up nobody else). The events are applied in time-sliced batches (four
times a second), so a flood of hook runs never starves the keyboard; parts the events only
announce, and those a view asks for (`Reload`), are fetched in workers. What changed goes to the
agent's main screen, whose views draw it: each view owns its table, its detail, its keys and their
handlers, and tells the app what it cannot do itself with messages (`messages.py`).

With one agent the console is its main screen. With several it starts on the fleet view (every
agent in a row, `fleet.py`); each agent's main screen is made when first opened, in a screen mode
of its own (its dialogs stay with it), and `0`, `[`, `]` and the palette go between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ClassVar

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
from .fleet import FleetScreen, facts_of
from .fleetrows import SLOW_S, elsewhere
from .help import MOVING, HelpScreen, keys_of
from .keys import AGENT_ACTIONS, APP_KEYS, Where, applies
from .launch import LaunchError, engine_for
from .mainscreen import MainScreen, clear_toasts
from .messages import COMMAND_GROUP, ConnectionChanged, Failed, Reload, SwitchAgent, Toast
from .model import PART_NAMES, ConsoleModel, Part, Update, failure_alert, notice_alert
from .nextstep import Evolve, evolve_command
from .palette import Command, Run
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
QUIET_S = 1.0  # an engine silent this long is asked whether it still answers (its row says when not)
WATCH_S = 0.25  # how often the console looks for engines gone quiet (a row says so within ~2.5 s)
# The first screen mode: the fleet view in a console of several agents (a mode of its own, which
# Textual's "_default" is not: nothing switches back to that one); the main screen with one agent.
FLEET_MODE = "fleet"
STAYS = 24 * 3600.0  # "until dismissed": a toast that long is gone only when clicked


class EvolveConsole(App[None]):
    CSS_PATH = str(Path(__file__).with_name("console.tcss"))  # also for subclasses elsewhere
    TITLE = "evolve"
    BINDINGS: ClassVar[list[BindingType]] = APP_KEYS
    DEFAULT_MODE: ClassVar[str] = FLEET_MODE

    def __init__(
        self,
        target: Target | Sequence[tuple[str, Target]],
        *,
        views: Registry = VIEWS,
        clock: Callable[[], float] = time.time,
        poll_s: float = 5.0,
        bell: bool | None = None,
        evolve: Evolve | None = None,
    ) -> None:
        """`target`: the one engine to follow, or several, each with its agent's name; `evolve`: how
        the operator's shell runs evolve, in the commands the console suggests (default: as
        `nextstep.evolve_command` finds it)."""
        super().__init__()
        # No animations (scrolling jumps): a console that follows a flood of runs needs its frames
        # for the runs.
        self.animation_level = "none"
        named = [("", target)] if isinstance(target, Target) else list(target)
        if not named:
            raise ValueError("the console needs at least one agent")
        shell = evolve if evolve is not None else evolve_command()
        self.agents = [Agent(t, clock, name, shell) for name, t in named]
        self.several = len(self.agents) > 1
        self.views = views  # the registry the main screens are built from
        self.clock = clock
        self.poll_s = poll_s
        # The terminal bell on what needs the operator (a change held for review, a hook that starts
        # failing); EVOLVE_CONSOLE_BELL=0 (or --no-bell) keeps it quiet, the toast stays.
        self.bell_on = bell if bell is not None else os.environ.get("EVOLVE_CONSOLE_BELL", "1") != "0"
        self._mains: dict[str, MainScreen] = {}
        self._current = self.agents[0]  # the agent shown (in the fleet view: the last one opened)
        self.fleet = FleetScreen(self.agents, clock) if self.several else None
        if self.fleet is not None:
            fleet = self.fleet
            self.add_mode(FLEET_MODE, lambda: fleet)
        if not self.several:
            self.main_of(self._current)
        self._agent_workers: dict[str, Worker[None]] = {}  # "<what> <agent>" -> its latest worker
        self._owner: dict[Worker[Any], str] = {}  # a worker the app runs for an agent -> its name
        self._fleet_stale = False
        self._ticks = 0
        self._alerted: int | None = None  # the number of the alert the keys acted on at the last tick

    # ---- typed accessors ------------------------------------------------------------------------

    def main_of(self, agent: Agent) -> MainScreen:
        """The agent's screen of views, made the first time it is asked for."""
        main = self._mains.get(agent.name)
        if main is None:
            main = self._mains[agent.name] = MainScreen.of(agent, self.views, named=self.several)
        return main

    def agent_named(self, name: str | None) -> Agent:
        """The agent of that name; the agent shown for None (or a name no agent has)."""
        return next((a for a in self.agents if a.name == name), self.agent) if name else self.agent

    @property
    def fleet_shown(self) -> bool:
        return self.fleet is not None and self.current_mode == FLEET_MODE

    @property
    def agent(self) -> Agent:
        """The agent shown; in the fleet view, the one selected."""
        if self.fleet is not None and self.fleet_shown:
            return self.fleet.selected() or self._current
        return self._current

    @property
    def main(self) -> MainScreen:
        """The screen of views of the agent shown (under any dialog open)."""
        return self.main_of(self._current)

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
        """The name of the view on screen ("fleet" for the fleet view)."""
        return "fleet" if self.fleet_shown else self.main.shown

    def get_default_screen(self) -> Screen[None]:
        return self.fleet if self.fleet is not None else self.main

    def on_mount(self) -> None:
        for agent in self.agents:
            if self.several:
                self.add_mode(mode_of(agent), lambda agent=agent: self.main_of(agent))  # type: ignore[misc]
            self.render_connection(agent)

    def on_ready(self) -> None:
        # The main screen is composed (the app's own mount may come first): the views can draw.
        self.set_interval(0.25, self.apply_events, name="apply-events")
        self.set_interval(1.0, self.tick_clock, name="countdown")
        self.set_interval(WATCH_S, self.watch_engines, name="watch-engines")
        self.set_timer(self.poll_s, self.poll_counts, name="counts")
        for agent in self.agents:
            self.follow_engine(agent)

    async def on_unmount(self) -> None:
        for agent in self.agents:
            await agent.aclose()

    # ---- following the engines --------------------------------------------------------------

    def _run(
        self,
        what: str,
        agent: Agent,
        work: Coroutine[Any, Any, None],
        *,
        group: str,
        name: str,
        replace: bool = True,
    ) -> None:
        """A worker of the app for `agent`; `replace`: the one before it of the same kind is
        cancelled (the latest wins)."""
        key = f"{what} {agent.name}"
        old = self._agent_workers.get(key)
        if replace and old is not None and not old.is_finished:
            old.cancel()
        worker = self.run_worker(work, name=name, group=group, exit_on_error=False)
        self._agent_workers[key] = worker
        self._owner[worker] = agent.name

    def _agent_busy(self, what: str, agent: Agent) -> bool:
        worker = self._agent_workers.get(f"{what} {agent.name}")
        return worker is not None and not worker.is_finished

    def follow_engine(self, agent: Agent | None = None) -> None:
        """Follow the agent's event stream (anew: a stream that may hang on a dead connection is
        dropped)."""
        agent = agent or self.agent
        self._run("stream", agent, self._follow(agent), group="engine-stream", name=f"follow {agent.name}")

    async def _follow(self, agent: Agent) -> None:
        delay = 0.5
        while True:
            try:
                health = await agent.health(timeout=HEALTH_TIMEOUT_S)
                agent.verify(health)
                since = agent.model.apply_health(health)
                await self.load_all(agent)
                self.post_message(
                    ConnectionChanged(True, f"{agent.target.url} · pid {health.pid}", agent.name)
                )
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
                self.post_message(ConnectionChanged(False, str(exc), agent.name))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                await agent.rediscover()

    def check_engine(self, agent: Agent | None = None) -> None:
        """After a request failed, or the engine went quiet: the engine is down only if its health
        check fails too; then the stream is followed anew (it may hang on a dead connection),
        which says when it is back. Until the check answers, the engine counts as slow."""
        agent = agent or self.agent
        if not self._agent_busy("check", agent):
            if agent.slow_since is None:
                agent.slow_since = self.clock()
            self._run("check", agent, self._check(agent), group="engine-check", name="check the engine")

    async def _check(self, agent: Agent) -> None:
        try:
            await agent.health(timeout=HEALTH_TIMEOUT_S)
        except (EngineGone, EngineError) as exc:
            self.post_message(ConnectionChanged(False, str(exc), agent.name))
            self.follow_engine(agent)

    async def load_all(self, agent: Agent | None = None) -> None:
        """Everything from the journal and git, so history survives console and engine restarts."""
        agent = agent or self.agent
        for part in LOAD_ORDER:
            await self.reload(part, draw=part is not Part.STATUS, agent=agent)
        agent.heard()
        self.render_connection(agent)
        if not agent.first_load.is_set():
            # The hooks failing as the console starts: what is broken, and the change behind it
            # (the engine lists the newest first: the newest alert is the latest failure).
            for failure in reversed(list(agent.model.failures.values())):
                self.alert(failure_alert(failure, since=True), agent)
            # The widgets, styles and history loaded so far live as long as the console. Without
            # this, every full garbage collection walks them all again (about 45 ms here, every
            # few seconds under a flood of runs), and a key press waiting behind one shows late.
            # (Making the later full collections rarer does not pay: the cyclic garbage of the
            # event loop piles up in between, and one collection then takes 60 ms, not 8.)
            gc.collect()
            gc.freeze()
            agent.looked()  # what it held when the console opened is not news
        agent.first_load.set()
        self._fleet_stale = True

    async def reload(self, part: Part, draw: bool = True, agent: Agent | None = None) -> None:
        """Fetch `part` from the agent's engine into its model, and draw it."""
        agent = agent or self.agent
        if await agent.fetch(part) and draw:
            self.draw(part, agent)

    def draw(self, part: Part, agent: Agent | None = None) -> None:
        """Show `part` as the model holds it now: the engine's status in the top bar, the rest in
        the views."""
        agent = agent or self.agent
        self._fleet_stale = True
        if part is Part.STATUS:
            self.render_connection(agent)
        elif (main := self._mains.get(agent.name)) is not None and main.is_mounted:
            main.draw(part)

    def on_reload(self, message: Reload) -> None:
        # The latest request for a part wins (filters typed in quick succession).
        agent = self.agent_named(message.agent)
        self._run(
            f"reload-{message.part}",
            agent,
            self.reload(message.part, agent=agent),
            group=f"reload-{message.part}",
            name=f"load {PART_NAMES[message.part]}",
        )

    async def refresh_parts(self, agent: Agent, parts: set[Part]) -> None:
        for part in REFRESH_ORDER:
            if part in parts:
                await self.reload(part, agent=agent)

    def poll_counts(self) -> None:
        """The journal's exact counts (live events only estimate them), each agent's in a worker of
        its own; an agent whose last read has not finished is skipped. Re-armed each time."""
        try:
            for agent in self.agents:
                if agent.model.connected and not self._agent_busy("counts", agent):
                    self._run(
                        "counts", agent, self._count(agent), group="counts", name="read the journal's counts"
                    )
        finally:
            self.set_timer(self.poll_s, self.poll_counts, name="counts")

    async def _count(self, agent: Agent) -> None:
        with contextlib.suppress(NoMatches):
            await self.reload(Part.COUNTS, agent=agent)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        agent = self.agent_named(message.agent)
        agent.set_connection(message.connected, message.detail)
        self.render_connection(agent)
        self._fleet_stale = True
        main = self._mains.get(agent.name)
        if main is not None and main.is_mounted:
            main.draw(Part.HEARTBEAT)
            main.connection_changed()
        self.refresh_bindings()

    def render_connection(self, agent: Agent | None = None) -> None:
        """The top bar of the agent's main screen (`status.connection_items`)."""
        agent = agent or self.agent
        main = self._mains.get(agent.name)
        if main is not None:
            items = connection_items(
                agent.model, agent.workspace, self.clock(), agent.down_since, agent.heard_at
            )
            main.show_connection(items)

    # ---- applying events in batches ---------------------------------------------------------

    def apply_events(self) -> None:
        # Under a flood, repaint the tables about once a second instead of four times: each
        # repaint of a scrolled table costs real time, and the keyboard must stay responsive.
        self._ticks += 1
        with contextlib.suppress(NoMatches):  # the console is closing
            for agent in self.agents:
                model = agent.model
                if model.waiting > FLOOD and self._ticks % 4:
                    continue
                if model.waiting:
                    self.show_update(model.apply_waiting(), agent)
                stale = model.take_reloads()
                if stale:
                    self._run(
                        "refresh",
                        agent,
                        self.refresh_parts(agent, stale),
                        group="refresh",
                        name="load what the engine announced",
                        replace=False,
                    )
            if not self.fleet_shown and self.several:
                self._current.looked()  # the operator is looking at it: nothing there is news
            if self._fleet_stale:
                self.draw_fleet()

    def show_update(self, update: Update, agent: Agent | None = None) -> None:
        agent = agent or self.agent
        for severity, notice in update.notices:
            self.alert(notice_alert(severity, notice, agent.model.changes), agent)
        for alert in update.alerts:
            self.alert(alert, agent)
        now = self.clock()
        if any([agent.alerts.decided(key, now) for key in update.decided]) and agent is self._current:
            self.show_toasts()  # the toast that waited for that decision goes
        self._fleet_stale = self._fleet_stale or bool(update.redraw or update.runs or update.alerts)
        if Part.STATUS in update.redraw:
            self.render_connection(agent)
        main = self._mains.get(agent.name)
        if main is not None and main.is_mounted:
            main.apply(update)
        screen = self.screen
        if isinstance(screen, ReplayScreen) and agent is self._current:  # replays' progress to its screen
            for record in update.replays:
                screen.follow(record)
        if isinstance(screen, EvalScreen):  # and behaviour checks' to theirs
            for found in update.evals:
                screen.follow(found)

    def draw_fleet(self) -> None:
        """The fleet view's rows, and what waits at the other agents on the shown agent's bar."""
        self._fleet_stale = False
        if self.fleet is None:
            return
        if self.fleet_shown:
            self.fleet.draw()
        else:
            main = self._mains.get(self._current.name)
            if main is not None and main.is_mounted:
                main.elsewhere = elsewhere(facts_of(a) for a in self.agents if a is not self._current)
                main.render_badges()

    def tick_clock(self) -> None:
        now = self.clock()
        with contextlib.suppress(NoMatches):  # the console is closing
            for agent in self.agents:
                if not agent.model.connected:
                    self.render_connection(agent)  # how long the engine has been down
            if self.fleet_shown:
                self.draw_fleet()  # the ages and countdowns of every row
            else:
                main = self._mains.get(self._current.name)
                if main is not None and main.is_mounted:
                    main.tick()
                    current = self._current.alerts.current(now)
                    number = current.number if current is not None else None
                    if number != self._alerted:  # an alert's toast went: the keys that acted on it follow
                        self._alerted = number
                        main.refresh_bindings()
                if self._fleet_stale:
                    self.draw_fleet()

    def watch_engines(self) -> None:
        """Ask an engine gone quiet whether it still answers; in the fleet view, a row whose engine
        has just become slow to answer says so at once, not at the next second's redraw."""
        now = self.clock()
        slow = False
        for agent in self.agents:
            if agent.model.connected and (agent.heard_at is None or now - agent.heard_at > QUIET_S):
                self.check_engine(agent)
            slow = slow or (agent.slow_since is not None and 0 <= now - agent.slow_since - SLOW_S < WATCH_S)
        if slow and self.fleet_shown:
            with contextlib.suppress(NoMatches):
                self.draw_fleet()

    # ---- going between agents ---------------------------------------------------------------

    def on_switch_agent(self, message: SwitchAgent) -> None:
        self.switch_agent(message.agent)

    def switch_agent(self, name: str | None) -> None:
        """Show the agent `name` in its views (None: the fleet view)."""
        if self.fleet is None:
            return
        if name is None:
            if not self.fleet_shown:
                self._current.looked()
                self.switch_mode(FLEET_MODE)
            self.fleet.select(self._current.name)
            self.fleet.draw()
        else:
            agent = self.agent_named(name)
            self._current = agent
            agent.looked()
            self.switch_mode(mode_of(agent))
            self.render_connection(agent)
            self._fleet_stale = True
        self.refresh_bindings()

    def action_show_fleet(self) -> None:
        self.switch_agent(None)

    def action_next_agent(self, step: int) -> None:
        """The next agent (`step` 1) or the previous one (-1), in the fleet's order."""
        index = self.agents.index(self.agent)
        self.switch_agent(self.agents[(index + step) % len(self.agents)].name)

    def commands(self) -> list[tuple[Command, Run]]:
        """The palette's commands of a console of several agents: one to open each, one for all."""
        if not self.several:
            return []

        def go(name: str | None) -> Run:
            async def run() -> None:
                self.switch_agent(name)

            return run

        found = [(Command("agent: all (the fleet view)", "show_fleet", "every agent in a row"), go(None))]
        for agent in self.agents:
            where = agent.workspace or agent.target.url
            found.append(
                (Command(f"agent: {agent.name}", "", f"show {where} in the six views"), go(agent.name))
            )
        return found

    # ---- telling the operator ---------------------------------------------------------------

    def toast(self, message: str, severity: Severity = "information", timeout: float = 8.0) -> None:
        """Tell the operator `message`, about the agent shown (`alert`)."""
        self.alert(Alert(message, severity, timeout=timeout))

    def alert(self, alert: Alert, agent: Agent | None = None, *, named: bool = False) -> None:
        """Tell the operator: a toast (at most a minute, unless it waits for a decision; a long one
        shows its beginning), or, for a long error, a dialog that shows it whole. It is kept with
        the agent it is about (the one shown by default; `named`: its text names the agent
        already), to be read again (`N`), and the keys act on the change it names while its toast
        is shown. In a console of several agents it names its agent."""
        agent = agent or self.agent
        if self.several and not named:
            alert = dataclasses.replace(alert, text=f"{agent.name}: {alert.text}")
        kept = agent.alerts.add(alert, self.clock())
        if kept.severity == "error" and kept.long:
            self.push_screen(AlertScreen([kept]))
        else:
            self._notify(kept)
        if kept.bell and self.bell_on:
            self.bell()
        self._alerted = None  # the keys follow at the next tick, or now
        main = self._mains.get(self._current.name)
        if main is not None and main.is_mounted:
            main.refresh_bindings()

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
        for alert in self._current.alerts.on_screen(now):
            if not (alert.severity == "error" and alert.long):
                self._notify(alert, timeout=max(alert.lasts - (now - alert.at), 1.0))
        main = self._mains.get(self._current.name)
        if main is not None and main.is_mounted:
            main.refresh_bindings()

    def on_toast(self, message: Toast) -> None:
        whose = f"{message.agent}: " if self.several and message.agent else ""
        alert = Alert(
            whose + message.text,
            message.severity,
            timeout=message.timeout,
            change=message.change,
            revert=message.revert,
        )
        self.alert(alert, self.agent_named(message.agent), named=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.group != "engine-stream":
            self.tell_failure(event.worker, self._owner.get(event.worker))
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self._owner.pop(event.worker, None)

    def on_failed(self, message: Failed) -> None:
        self.tell_failure(message.worker, message.agent)

    def tell_failure(self, worker: Worker[object], agent: str | None = None) -> None:
        """A worker failed (the app's own, or a view's, a widget's, a screen's: `Failed`): the
        operator is told what it was doing and why it failed, in words (naming the agent, in a
        console of several)."""
        error = worker.error
        # Workers are named for what they do ("approve the change"); those of the "actions" group
        # send commands, which may have been done although their answer was lost.
        said = failure_text(worker.name or "do that", error, command=worker.group == COMMAND_GROUP)
        if self.several and agent:
            said = f"{agent}: {said}"
        if isinstance(error, EngineGone):
            # One request lost (a connection closed as it was reused, a slow answer) does not mean
            # the engine is gone, and saying so would stop the reloads while the stream goes on:
            # only the health check says the engine is down.
            self.alert(Alert(said, "warning", timeout=8), self.agent_named(agent), named=True)
            self.check_engine(self.agent_named(agent))
        else:
            self.toast(said, "error")

    # ---- its keys ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in AGENT_ACTIONS:
            return self.several  # hidden in a console of one agent
        if self.fleet_shown:
            agent = self.agent
            where = Where("fleet", connected=agent.model.connected, workspace=agent.workspace is not None)
            return applies(action, where, self.views)
        return applies(action, self.main.where(), self.views)

    def action_help(self) -> None:
        """`?`: the keys of the view or dialog on screen; `?` again closes the list."""
        screen = self.screen
        if isinstance(screen, HelpScreen):
            screen.dismiss(None)
            return
        if isinstance(screen, MainScreen):
            view = screen.shown_view
            number = [v.NAME for v in self.views].index(view.NAME) + 1
            title, note = f"Keys in view {number}, {view.LABEL}", MOVING
        elif isinstance(screen, FleetScreen):
            title, note = "Keys of the fleet view (every agent)", MOVING
        else:
            kind = type(screen)
            title = f"Keys of this dialog: {kind.TITLE or 'the dialog'}"
            note = str(getattr(kind, "HELP_NOTE", ""))
        self.push_screen(HelpScreen(title, keys_of(screen, self), note))

    def action_start_engine(self) -> None:
        agent = self.agent
        if agent.workspace and not agent.model.connected:
            whose = (
                f"{agent.name}'s engine ({agent.workspace})"
                if self.several
                else f"the engine for {agent.workspace}"
            )
            self.notify(f"starting {whose}…", timeout=4)
            self.start_engine(agent)

    @work(group=COMMAND_GROUP, exit_on_error=False, thread=True, name="start the engine")
    def start_engine(self, agent: Agent) -> None:
        try:
            engine_for(Path(str(agent.workspace)), create=False)
        except LaunchError as exc:
            self.call_from_thread(self.toast, str(exc), "error")


def mode_of(agent: Agent) -> str:
    """The screen mode of an agent's main screen (and its dialogs)."""
    return f"agent:{agent.name}"
