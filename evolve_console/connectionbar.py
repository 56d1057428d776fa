"""The connection bar at the top of the main screen: the engine, the workspace, opencode, the
engine's configuration problems and its address, wrapped onto a second line when they do not fit,
never cut within one (`config: 2 errors, … (c: read)` stays whole in any terminal) but the address,
which is cut at the line's end rather than take a line of its own."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.message import Message

from .status import Pieces
from .wrapbar import WrapBar

ADDRESS_AT_LEAST = 16  # cells for the engine's address at a line's end ("  http://127.0.0…")


class ConnectionBar(WrapBar):
    """The pieces of `status.connection_items`; a click anywhere on it posts `ConnectionBar.Clicked`
    (which shows the engine's configuration problems in full, when it has any)."""

    class Clicked(Message):
        """The bar was clicked."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._items: list[Text] = []

    def show(self, bar: Pieces) -> None:
        """The bar's pieces anew (`status.connection_items`); repainted only when they changed."""
        items = [*bar.pieces, *([bar.address] if bar.address else [])]
        if [(i.plain, i.spans, i.style) for i in items] != [(i.plain, i.spans, i.style) for i in self._items]:
            self._items = [item.copy() for item in items]
            self.cut_last = ADDRESS_AT_LEAST if bar.address else 0
            self.changed()

    def items(self) -> list[Text]:
        return self._items

    def on_click(self, event: events.Click) -> None:
        self.post_message(self.Clicked())
