"""The agents of a console and their screens: which agent is shown, and going between them.

With one agent the console is its main screen. With several it starts on the fleet view (every
agent in a row, `fleet.py`); each agent's main screen is made when first opened, in a screen mode
of its own (its dialogs stay with it), and `0`, `[`, `]` and the palette go between them. What the
other agents hold that waits for the operator shows on the shown agent's view bar (`elsewhere`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.screen import Screen

from .agent import Agent
from .evals import EvalScreen
from .fleet import FleetScreen, facts_of
from .fleetrows import elsewhere
from .help import MOVING, HelpScreen, keys_of
from .keys import AGENT_ACTIONS, Where, applies
from .mainscreen import MainScreen
from .model import Update
from .palette import Command, Run
from .replay import ReplayScreen
from .views import Registry

# The first screen mode: the fleet view in a console of several agents (a mode of its own, which
# Textual's "_default" is not: nothing switches back to that one); the main screen with one agent.
FLEET_MODE = "fleet"


def mode_of(agent: Agent) -> str:
    """The screen mode of an agent's main screen (and its dialogs)."""
    return f"agent:{agent.name}"


class AgentScreens:
    """The agents (`agents`, in the fleet's order), the main screen of each, the fleet view (None
    with one agent), the agent shown (`current`; in the fleet view, the last one opened), and
    whether the fleet's rows and badges need drawing again (`stale`)."""

    def __init__(
        self, app: App[Any], agents: list[Agent], views: Registry, clock: Callable[[], float]
    ) -> None:
        if not agents:
            raise ValueError("the console needs at least one agent")
        self.app = app
        self.agents = agents
        self.several = len(agents) > 1
        self.views = views  # the registry the main screens are built from
        self.current = agents[0]
        self.stale = False
        self._mains: dict[str, MainScreen] = {}
        self.fleet = FleetScreen(agents, clock) if self.several else None
        if self.fleet is not None:
            fleet = self.fleet
            app.add_mode(FLEET_MODE, lambda: fleet)
        else:
            self.main_of(self.current)

    def add_modes(self) -> None:
        """A screen mode for each agent's main screen, in a console of several."""
        if self.several:
            for agent in self.agents:
                self.app.add_mode(mode_of(agent), lambda agent=agent: self.main_of(agent))  # type: ignore[misc]

    def main_of(self, agent: Agent) -> MainScreen:
        """The agent's screen of views, made the first time it is asked for."""
        main = self._mains.get(agent.name)
        if main is None:
            main = self._mains[agent.name] = MainScreen.of(agent, self.views, named=self.several)
        return main

    def made(self, agent: Agent) -> MainScreen | None:
        """The agent's main screen, if it was made."""
        return self._mains.get(agent.name)

    def mounted(self, agent: Agent) -> MainScreen | None:
        """The agent's main screen, if it is made and mounted (it can be drawn)."""
        main = self._mains.get(agent.name)
        return main if main is not None and main.is_mounted else None

    def named(self, name: str | None) -> Agent:
        """The agent of that name; the agent shown for None (or a name no agent has)."""
        return next((a for a in self.agents if a.name == name), self.shown) if name else self.shown

    @property
    def fleet_shown(self) -> bool:
        return self.fleet is not None and self.app.current_mode == FLEET_MODE

    @property
    def shown(self) -> Agent:
        """The agent shown; in the fleet view, the one selected."""
        if self.fleet is not None and self.fleet_shown:
            return self.fleet.selected() or self.current
        return self.current

    def switch(self, name: str | None) -> Agent | None:
        """Show the agent `name` in its views (None: the fleet view); the agent now shown, None for
        the fleet view (or in a console of one agent, where there is nothing to switch)."""
        if self.fleet is None:
            return None
        if name is None:
            if not self.fleet_shown:
                self.current.looked()
                self.app.switch_mode(FLEET_MODE)
            self.fleet.select(self.current.name)
            self.fleet.draw()
            return None
        agent = self.named(name)
        self.current = agent
        agent.looked()
        self.app.switch_mode(mode_of(agent))
        self.stale = True
        return agent

    def next_name(self, step: int) -> str:
        """The name of the next agent (`step` 1) or the previous one (-1), in the fleet's order."""
        index = self.agents.index(self.shown)
        return self.agents[(index + step) % len(self.agents)].name

    def commands(self, switch: Callable[[str | None], None]) -> list[tuple[Command, Run]]:
        """The palette's commands of a console of several agents: one to open each, one for all."""
        if not self.several:
            return []

        def go(name: str | None) -> Run:
            async def run() -> None:
                switch(name)

            return run

        found = [(Command("agent: all (the fleet view)", "show_fleet", "every agent in a row"), go(None))]
        for agent in self.agents:
            where = agent.workspace or agent.target.url
            found.append(
                (Command(f"agent: {agent.name}", "", f"show {where} in the six views"), go(agent.name))
            )
        return found

    def draw_fleet(self) -> None:
        """The fleet view's rows, and what waits at the other agents on the shown agent's bar."""
        self.stale = False
        if self.fleet is None:
            return
        if self.fleet_shown:
            self.fleet.draw()
        elif (main := self.mounted(self.current)) is not None:
            main.elsewhere = elsewhere(facts_of(a) for a in self.agents if a is not self.current)
            main.render_badges()

    def help_of(self, screen: Screen[Any]) -> HelpScreen:
        """`?`'s list of the keys of `screen`: a view's, the fleet view's or a dialog's."""
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
        return HelpScreen(title, keys_of(screen, self.app), note)

    def applies(self, action: str) -> bool | None:
        """Whether the app's key `action` applies on the screen shown (`keys.applies`)."""
        if action in AGENT_ACTIONS:
            return self.several  # hidden in a console of one agent
        if self.fleet_shown:
            agent = self.shown
            where = Where("fleet", connected=agent.model.connected, workspace=agent.workspace is not None)
            return applies(action, where, self.views)
        return applies(action, self.main_of(self.current).where(), self.views)

    def tick(self) -> bool:
        """Once a second: the fleet view's ages and countdowns, or the shown main screen's; True
        when a main screen ticked (its keys may follow an alert gone)."""
        if self.fleet_shown:
            self.draw_fleet()
            return False
        main = self.mounted(self.current)
        if main is not None:
            main.tick()
        if self.stale:
            self.draw_fleet()
        return main is not None

    def follow(self, screen: Screen[Any], update: Update, agent: Agent) -> None:
        """The progress of replays (of the agent shown) and behaviour checks, to their screen."""
        if isinstance(screen, ReplayScreen) and agent is self.current:
            for record in update.replays:
                screen.follow(record)
        if isinstance(screen, EvalScreen):
            for found in update.evals:
                screen.follow(found)
