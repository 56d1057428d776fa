"""The fleet view: every agent the console follows, one row each (`fleetrows.row`), their counts
added up underneath, and enter to open the selected agent in the six views.

It is the screen a console of several agents starts on, and `0` comes back to it from any agent.
It draws from the agents' models only (the app applies their events and redraws it once a second
and after each batch), so an engine that hangs never holds it up: its row says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen

from .agent import Agent
from .fleetrows import COLUMNS, Facts, counts, row, totals
from .keybar import KeyBar
from .line import Line
from .messages import SwitchAgent
from .palette import Command, EvolveCommands, Run
from .table import KeyedTable


def facts_of(agent: Agent) -> Facts:
    return Facts(
        agent.name,
        agent.model,
        agent.down_since,
        agent.slow_since,
        agent.failed_since_looked,
        agent.changes_since_looked,
    )


class FleetScreen(Screen[None]):
    """Every agent in a row; enter opens one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", id="fleet.open", tooltip="Open the selected agent in the six views"),
    ]
    COMMANDS: ClassVar = {EvolveCommands}
    AUTO_FOCUS = "KeyedTable"

    def __init__(self, agents: Iterable[Agent], clock: Callable[[], float]) -> None:
        super().__init__()
        self.agents = list(agents)
        self.clock = clock
        self.title_line = Line(id="connection")
        self.table = KeyedTable(COLUMNS, id="fleet-table")
        self.totals = Line(id="fleet-totals")

    def compose(self) -> ComposeResult:
        yield self.title_line
        yield self.table
        yield self.totals
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.title_line.show(
            Text.assemble(
                (f" evolve · {len(self.agents)} agents ", "bold reverse"),
                (
                    "  enter opens the selected agent · 0 comes back here · [ and ] go to the previous "
                    "and next agent",
                    "dim",
                ),
            )
        )
        self.draw()
        # The first agent selected, not the last: the table follows new rows from the bottom, and a
        # fleet's rows are all there from the start.
        self.table.move_cursor(row=0)

    def draw(self) -> None:
        """Every row and the totals as the agents' models hold them now (only changed rows repaint)."""
        now = self.clock()
        facts = [facts_of(agent) for agent in self.agents]
        self.table.upsert([(f.name, row(f, now)) for f in facts])
        self.totals.show(totals(counts(f, now) for f in facts))

    def selected(self) -> Agent | None:
        key = self.table.selected_key()
        return next((agent for agent in self.agents if agent.name == key), None)

    def select(self, name: str) -> None:
        if name in self.table.rows:
            self.table.move_cursor(row=self.table.get_row_index(name))

    def action_open(self) -> None:
        agent = self.selected()
        if agent is not None:
            self.post_message(SwitchAgent(agent.name))

    def commands(self) -> list[tuple[Command, Run]]:
        return []  # the app's own (one per agent) are added to every screen's
