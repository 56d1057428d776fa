"""A one-line text widget for text that changes often (the runs' counts)."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class Line(Widget):
    """One line of text that changes often (counts). Unlike Static.update, a
    change repaints only this line: no layout pass over the whole screen."""

    DEFAULT_CSS = """
    Line { height: 1; width: 1fr; }
    """

    text: reactive[Text] = reactive(Text(), layout=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)

    def show(self, text: Text | str) -> None:
        new = text if isinstance(text, Text) else Text(text)
        if new.plain != self.text.plain or new.spans != self.text.spans:
            self.text = new

    def render(self) -> Text:
        out = self.text.copy()
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out
