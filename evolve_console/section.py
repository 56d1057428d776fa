"""A titled block of text cut at a bound (the heartbeat view's last tick)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Static

from .format import preview


class Section(Vertical):
    """A titled block of the detail pane whose body is plain text, cut at a bound."""

    DEFAULT_CSS = """
    Section { height: auto; margin-bottom: 1; }
    Section > .section-title { color: $text-muted; text-style: bold; }
    Section > .section-body { height: auto; }
    """

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.full_text = ""

    def compose(self) -> ComposeResult:
        yield Label(self.title, classes="section-title")
        yield Static("", classes="section-body", markup=False)

    def show(self, text: str, empty: str = "(none)") -> None:
        self.full_text = text
        body, more = preview(text)
        rendered = Text(body or empty, style="" if body else "dim")
        if more:
            rendered.append(f"\n… {more:,} more characters (press m to see more)", style="bold italic")
        self.query_one(".section-body", Static).update(rendered)
        self.set_class(bool(more), "-truncated")
