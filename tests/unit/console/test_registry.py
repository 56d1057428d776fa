"""A view is one module and one line of the registry: the console built from the registry without
an existing view (the tool calls) has no trace of it, and with that one line back it has the view
on its number key, in the view bar and the palette, with nothing else added. (A new view against a
real engine: tests/console/test_views.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

from rich.text import Text

from evolve_console.app import EvolveConsole
from evolve_console.client import Target
from evolve_console.viewbar import ViewBar
from evolve_console.views import VIEWS, Registry, ToolCallsView

WITHOUT = tuple(view for view in VIEWS if view is not ToolCallsView)


@contextlib.contextmanager
def nothing_listens() -> Iterator[Target]:
    """An address where no engine answers (the console says so and keeps asking): a port held bound
    without listening, so that no process of a parallel run starts a server there meanwhile."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield Target(f"http://127.0.0.1:{held.getsockname()[1]}", "token")


def shown_by(views: Registry) -> tuple[str, str, list[str], str]:
    """The view bar, the view the last number key shows, the palette's views, the view of the key
    after the last."""

    async def main() -> tuple[str, str, list[str], str]:
        with nothing_listens() as target:
            app = EvolveConsole(target, views=views)
            async with app.run_test(size=(160, 40)) as pilot:
                await pilot.pause()
                rendered = app.query_one(ViewBar).render()
                bar = rendered.plain if isinstance(rendered, Text) else str(rendered)
                await pilot.press(str(len(views)))
                last = app.shown
                await pilot.press(str(len(views) + 1))
                beyond = app.shown
                titles = [
                    command.title for command, _ in app.main.commands() if command.title.startswith("view: ")
                ]
        return bar, last, titles, beyond

    return asyncio.run(main())


def test_a_view_left_out_of_the_registry_is_nowhere_and_one_line_brings_it_back() -> None:
    bar, last, titles, beyond = shown_by(WITHOUT)
    assert "Tool calls" not in bar and "5 Self-modifications" in bar, bar
    assert last == "changes" and beyond == "changes", "5 is the last view; 6 is no key"
    assert "view: tool calls" not in titles and len(titles) == 5, titles

    bar, last, titles, beyond = shown_by((*WITHOUT, ToolCallsView))
    assert "6 Tool calls" in bar, bar
    assert last == "tools" and beyond == "tools", "6 shows it; 7 is no key"
    assert titles[-1] == "view: tool calls" and len(titles) == 6, titles
