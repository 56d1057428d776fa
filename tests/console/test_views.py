"""A new view is one module and one line of the registry: a view defined here, added to the registry
and nothing else, is in the view bar, on its number key, with its keys in the key bar, in the
palette, and drawn when the model changes, against a real engine."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widget import Widget

from evolve_console.app import EvolveConsole
from evolve_console.keybar import KeyBar
from evolve_console.messages import Toast
from evolve_console.model import Part
from evolve_console.table import KeyedTable
from evolve_console.viewbar import ViewBar
from evolve_console.views import VIEWS, View
from tests.console.conftest import (
    SIZE,
    connected,
    edit_prompt,
    notifications,
    settle,
    text_of,
    wait_until,
)
from tests.support.engine_process import EngineProcess


class CommitsView(View):
    """The workspace's commits by subject, and a key that counts them."""

    NAME = "commits"
    LABEL = "Commits"
    PARTS = frozenset({Part.CHANGES})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("k", "count", "Count", id="commits.count", tooltip="How many commits are listed"),
    ]

    def compose(self) -> ComposeResult:
        yield KeyedTable([("change", "change")], id="commits-table")

    def draw(self, part: Part) -> None:
        commits = [c for c in self.model.changes.values() if c.sha]
        self.query_one(KeyedTable).replace_all([(c.key, [c.subject]) for c in commits])

    def focus_target(self) -> Widget | None:
        return self.query_one(KeyedTable)

    def action_count(self) -> None:
        self.post_message(Toast(f"{self.query_one(KeyedTable).row_count} commits"))


def test_a_view_added_to_the_registry_is_shown_keyed_and_drawn(engine: EngineProcess) -> None:
    seen: list[Message] = []

    async def main() -> None:
        app = EvolveConsole(engine.target, views=(*VIEWS, CommitsView))
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await connected(pilot)
            bar = text_of(app.query_one(ViewBar))
            assert "6 Tool calls" in bar and "7 Commits" in bar, bar
            keys = app.query_one(KeyBar)
            assert "Count" not in text_of(keys), "its keys are its own: not in the other views"

            await pilot.press("7")
            assert app.shown == "commits"
            table = app.query_one("#commits-table", KeyedTable)
            assert app.focused is table, "the focus goes with the view"
            commits = [c for c in app.model.changes.values() if c.sha]
            assert commits and table.keys() == [c.key for c in commits], "drawn once loaded"
            await wait_until(pilot, lambda: "k Count" in text_of(keys), "its key in the key bar")

            await pilot.press("k")
            await wait_until(
                pilot,
                lambda: ("information", "", f"{len(commits)} commits") in notifications(seen),
                "its key to act",
            )

            await asyncio.to_thread(edit_prompt, engine, "Answer plainly", "Answer tersely")
            await wait_until(
                pilot, lambda: table.row_count == len(commits) + 1, "the new commit drawn on the update"
            )
            assert str(table.get_cell(table.keys()[-1], "change")) == "edit prompt chat.md"

            await pilot.press("1")
            assert app.shown == "runs"
            await wait_until(pilot, lambda: "k Count" not in text_of(keys), "its key gone with it")
            titles = {command.title: run for command, run in app.main.commands()}
            await titles["view: commits"]()
            assert app.shown == "commits", "the palette shows it"
            await settle(pilot)

    asyncio.run(main())
