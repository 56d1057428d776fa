"""The console's commands in the command palette (ctrl+p), with namespaced titles.

The palette asks the screen it was opened on for its commands (`Commands`): the main screen lists
the console-wide ones, each view's own (`View.COMMANDS`) and one `view:` command per view of the
registry, so a new view brings its commands with it. The app adds its own on every screen: with
several agents, an `agent:` command per agent and one for the fleet view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from textual.command import Hit, Hits, Provider


@dataclass(frozen=True)
class Command:
    """A command: its title in the palette ("change: approve selected"), the action it runs, and what
    it does. `show`: a view's command shows its view first; without, it acts only while its view
    is shown (a decision on "the selected change" needs the changes view's selection)."""

    title: str
    action: str
    help: str = ""
    show: bool = True


Run = Callable[[], Awaitable[None]]


@runtime_checkable
class Commands(Protocol):
    """A screen that offers commands: each with what runs it."""

    def commands(self) -> Iterable[tuple[Command, Run]]: ...


class EvolveCommands(Provider):
    async def search(self, query: str) -> Hits:
        # The screen's commands, then the app's (going to another agent works from every screen).
        found = [*(self.screen.commands() if isinstance(self.screen, Commands) else ())]
        if isinstance(self.app, Commands):
            found += self.app.commands()
        matcher = self.matcher(query)
        for command, run in found:
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(score, matcher.highlight(command.title), run, help=command.help)
