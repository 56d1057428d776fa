"""The view bar under the connection bar: the views as labels, the one shown marked, with what waits
for the operator in each (changes to review, failures not yet seen)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget


class ViewBar(Widget, can_focus=False):
    """The views as one line of labels ("1 Hook runs  2 Stage results  …"), the shown one marked.
    A click on a label posts `ViewBar.Selected` with its view.

    One line of text rather than Textual's tabs: switching views then restyles nothing but this
    line, and the screen has four fewer levels of containers to lay out and draw.
    """

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {"viewbar--view", "viewbar--shown", "viewbar--badge"}
    DEFAULT_CSS = """
    ViewBar {
        height: 1;
        background: $panel;
        & > .viewbar--view { color: $text-muted; }
        & > .viewbar--shown { color: $text; background: $primary 40%; text-style: bold; }
        & > .viewbar--badge { color: $warning; text-style: bold; }
    }
    """

    shown: reactive[str] = reactive("", layout=False)

    class Selected(Message):
        """A view's label was clicked."""

        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(self, views: list[tuple[str, str, str]], *, shown: str, id: str | None = None) -> None:
        """`views`: (view id, key, label) of each view."""
        super().__init__(id=id)
        self.views = views
        self.set_reactive(ViewBar.shown, shown)
        self.badges: dict[str, str] = {}  # view -> what waits there for the operator ("2 pending")
        self._spans: list[tuple[int, int, str]] = []  # (start x, end x, view)

    def set_badges(self, badges: dict[str, str]) -> None:
        """What waits in each view, shown beside its label; repaints only when it changed."""
        if badges != self.badges:
            self.badges = dict(badges)
            self.refresh()

    def render(self) -> Text:
        normal = self.get_component_rich_style("viewbar--view")
        marked = self.get_component_rich_style("viewbar--shown")
        badge = self.get_component_rich_style("viewbar--badge")
        text = Text(no_wrap=True, overflow="ellipsis")
        self._spans = []
        for view, key, label in self.views:
            text.append(" ")
            start = text.cell_len
            style = marked if view == self.shown else normal
            text.append(f" {key} {label}", style=style)
            if self.badges.get(view):
                text.append(f" {self.badges[view]}", style=style + badge)
            text.append(" ", style=style)
            self._spans.append((start, text.cell_len, view))
        return text

    def on_click(self, event: events.Click) -> None:
        # Not a simulated key press: a focused filter field would take the digit.
        for start, end, view in self._spans:
            if start <= event.x < end:
                self.post_message(self.Selected(view))
