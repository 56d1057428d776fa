"""The operator console: watch agents evolve, fire heartbeats, approve or revert their changes.

The app holds the agents and routes: each agent's connection is its follower (`follower.py`), its
screens and the fleet view are `agentscreens.py`'s, what the operator is told the notifier's
(`notifier.py`). Events are applied in batches four times a second (a flood of hook runs never
starves the keyboard), and what changed goes to the agent's main screen, whose views own their
tables, details, keys and handlers, and ask the app for what they cannot do with `messages.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from .agent import Agent
from .agentscreens import FLEET_MODE, AgentScreens
from .alerts import Alert
from .client import Target
from .follower import WATCH_S, Followers
from .help import HelpScreen
from .keys import APP_KEYS
from .launch import LaunchError, engine_for
from .mainscreen import MainScreen
from .messages import COMMAND_GROUP, ConnectionChanged, Failed, Reload, SwitchAgent, Toast
from .model import ConsoleModel, Part, Update
from .nextstep import Evolve, evolve_command
from .notifier import Notifier
from .palette import Command, Run
from .status import connection_items
from .views import VIEWS, Registry


class EvolveConsole(App[None]):
    """The app: it holds the agents and the client of each, and routes the messages of the views,
    the followers and the clock to the screen or object whose job they are.

    Over 30 methods: half of them are Textual's (its lifecycle, message handlers, keys and their
    check), and six typed accessors the tests and the screens read; each does one step of routing."""

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
        shell = evolve if evolve is not None else evolve_command()
        self.agents = [Agent(t, clock, name, shell) for name, t in named]
        self.screens = AgentScreens(self, self.agents, views, clock)
        self.fleet = self.screens.fleet
        self.clock = clock
        self.poll_s = poll_s
        # The terminal bell on what needs the operator (a change held for review, a hook that starts
        # failing); EVOLVE_CONSOLE_BELL=0 (or --no-bell) keeps it quiet, the toast stays.
        bell_on = bell if bell is not None else os.environ.get("EVOLVE_CONSOLE_BELL", "1") != "0"
        self.notifier = Notifier(self, self.screens, clock, bell_on)
        self.followers = Followers(self.agents, self)
        self._ticks = 0

    # ---- typed accessors ------------------------------------------------------------------------

    @property
    def agent(self) -> Agent:
        """The agent shown; in the fleet view, the one selected."""
        return self.screens.shown

    @property
    def main(self) -> MainScreen:
        """The screen of views of the agent shown (under any dialog open)."""
        return self.screens.main_of(self.screens.current)

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
        return "fleet" if self.screens.fleet_shown else self.main.shown

    def get_default_screen(self) -> Screen[None]:
        return self.fleet if self.fleet is not None else self.main

    def on_mount(self) -> None:
        self.screens.add_modes()
        for agent in self.agents:
            self.render_connection(agent)

    def on_ready(self) -> None:
        # The main screen is composed (the app's own mount may come first): the views can draw.
        self.set_interval(0.25, self.apply_events, name="apply-events")
        self.set_interval(1.0, self.tick_clock, name="countdown")
        self.set_interval(WATCH_S, self.watch_engines, name="watch-engines")
        self.set_timer(self.poll_s, self.poll_counts, name="counts")
        self.followers.follow()

    async def on_unmount(self) -> None:
        for agent in self.agents:
            await agent.aclose()

    # ---- the engines' parts, drawn ----------------------------------------------------------

    async def reload(self, part: Part, draw: bool = True, agent: Agent | None = None) -> None:
        """Fetch `part` from the agent's engine into its model, and draw it: the engine's status in
        the top bar, the rest in the views."""
        agent = agent or self.agent
        if await agent.fetch(part) and draw:
            self.screens.stale = True
            if part is Part.STATUS:
                self.render_connection(agent)
            elif (main := self.screens.mounted(agent)) is not None:
                main.draw(part)

    def loaded(self, agent: Agent, first: bool) -> None:
        """Everything was loaded from the agent's engine (`first`: since the console started)."""
        self.render_connection(agent)
        if first:
            self.notifier.failing(agent)
        self.screens.stale = True

    def render_connection(self, agent: Agent | None = None) -> None:
        """The top bar of the agent's main screen (`status.connection_items`)."""
        agent = agent or self.agent
        if (main := self.screens.made(agent)) is not None:
            items = connection_items(
                agent.model, agent.workspace, self.clock(), agent.down_since, agent.heard_at
            )
            main.show_connection(items)

    def on_reload(self, message: Reload) -> None:
        self.followers.of(self.screens.named(message.agent)).reload(message.part)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        agent = self.screens.named(message.agent)
        agent.set_connection(message.connected, message.detail)
        self.render_connection(agent)
        self.screens.stale = True
        if (main := self.screens.mounted(agent)) is not None:
            main.draw(Part.HEARTBEAT)
            main.connection_changed()
        self.refresh_bindings()

    def poll_counts(self) -> None:
        """The journal's exact counts, each agent's in a worker of its own. Re-armed each time."""
        try:
            self.followers.count()
        finally:
            self.set_timer(self.poll_s, self.poll_counts, name="counts")

    def watch_engines(self) -> None:
        """Ask an engine gone quiet whether it still answers; in the fleet view, a row whose engine
        has just become slow to answer says so at once, not at the next second's redraw."""
        if self.followers.watch(self.clock()) and self.screens.fleet_shown:
            with contextlib.suppress(NoMatches):
                self.screens.draw_fleet()

    # ---- applying events in batches ---------------------------------------------------------

    def apply_events(self) -> None:
        self._ticks += 1  # under a flood, an agent's batch waits (`Follower.batch`)
        with contextlib.suppress(NoMatches):  # the console is closing
            for agent in self.agents:
                if (update := self.followers.of(agent).batch(self._ticks)) is not None:
                    self.show_update(update, agent)
            if not self.screens.fleet_shown and self.screens.several:
                self.screens.current.looked()  # the operator is looking at it: nothing there is news
            if self.screens.stale:
                self.screens.draw_fleet()

    def show_update(self, update: Update, agent: Agent) -> None:
        self.notifier.update(update, agent)
        self.screens.stale = self.screens.stale or bool(update.redraw or update.runs or update.alerts)
        if Part.STATUS in update.redraw:
            self.render_connection(agent)
        if (main := self.screens.mounted(agent)) is not None:
            main.apply(update)
        self.screens.follow(self.screen, update, agent)

    def tick_clock(self) -> None:
        now = self.clock()
        with contextlib.suppress(NoMatches):  # the console is closing
            for agent in self.agents:
                if not agent.model.connected:
                    self.render_connection(agent)  # how long the engine has been down
            if self.screens.tick():
                self.notifier.keys_follow(now)

    # ---- going between agents ---------------------------------------------------------------

    def on_switch_agent(self, message: SwitchAgent) -> None:
        self.switch_agent(message.agent)

    def switch_agent(self, name: str | None) -> None:
        """Show the agent `name` in its views (None: the fleet view)."""
        if self.fleet is None:
            return
        if (agent := self.screens.switch(name)) is not None:
            self.render_connection(agent)
        self.refresh_bindings()

    def action_show_fleet(self) -> None:
        self.switch_agent(None)

    def action_next_agent(self, step: int) -> None:
        """The next agent (`step` 1) or the previous one (-1), in the fleet's order."""
        self.switch_agent(self.screens.next_name(step))

    def commands(self) -> list[tuple[Command, Run]]:
        """The palette's commands of the app: with several agents, one to open each, one for all."""
        return self.screens.commands(self.switch_agent)

    # ---- telling the operator ---------------------------------------------------------------

    def alert(self, alert: Alert, agent: Agent | None = None, *, named: bool = False) -> None:
        """Tell the operator about `agent` (the one shown by default): `Notifier.alert`."""
        self.notifier.alert(alert, agent, named=named)

    def on_toast(self, message: Toast) -> None:
        self.notifier.toast_of(message)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        owner = self.followers.owner(event)
        if event.state is WorkerState.ERROR and event.worker.group != "engine-stream":
            self.tell_failure(event.worker, owner)

    def on_failed(self, message: Failed) -> None:
        self.tell_failure(message.worker, message.agent)

    def tell_failure(self, worker: Worker[object], agent: str | None = None) -> None:
        """A worker failed: the operator is told (`Notifier.failure`), and the engine checked when
        the failure may mean it is gone."""
        if self.notifier.failure(worker, agent):
            self.followers.of(self.screens.named(agent)).check(self.clock())

    # ---- its keys ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.screens.applies(action)

    def action_help(self) -> None:
        """`?`: the keys of the view or dialog on screen; `?` again closes the list."""
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
        else:
            self.push_screen(self.screens.help_of(self.screen))

    def action_start_engine(self) -> None:
        agent = self.agent
        if agent.workspace and not agent.model.connected:
            several = self.screens.several
            whose = (
                f"{agent.name}'s engine ({agent.workspace})"
                if several
                else f"the engine for {agent.workspace}"
            )
            self.notify(f"starting {whose}…", timeout=4)
            self.start_engine(agent)

    @work(group=COMMAND_GROUP, exit_on_error=False, thread=True, name="start the engine")
    def start_engine(self, agent: Agent) -> None:
        try:
            engine_for(Path(str(agent.workspace)), create=False)
        except LaunchError as exc:
            self.call_from_thread(self.notifier.toast, str(exc), "error")
