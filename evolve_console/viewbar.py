"""The view bar under the connection bar: the views as labels, the one shown marked, with what waits
for the operator in each (changes to review, failures not yet seen)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive

from .wrapbar import WrapBar

FLEET = "fleet"  # the view bar's entry of the fleet view, in a console of several agents


class ViewBar(WrapBar):
    """The views as a line of labels ("1 Hook runs  2 Stage results  …"), the shown one marked,
    wrapped onto a second line when they do not fit. A click on a label posts `ViewBar.Selected`
    with its view.

    Text rather than Textual's tabs: switching views then restyles nothing but this line, and the
    screen has four fewer levels of containers to lay out and draw.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {"viewbar--view", "viewbar--shown", "viewbar--badge"}
    DEFAULT_CSS = """
    ViewBar {
        height: auto;
        background: $panel;
        & > .viewbar--view { color: $text-muted; }
        & > .viewbar--shown { color: $text; background: $primary 40%; text-style: bold; }
        & > .viewbar--badge { color: $warning; text-style: bold; }
    }
    """

    # The marked label is as wide as the others: a new view shown never changes the lines.
    shown: reactive[str] = reactive("", layout=False)

    class Selected(Message):
        """A view's label was clicked."""

        def __init__(self, view: str) -> None:
            super().__init__()
            self.view = view

    def __init__(
        self,
        views: list[tuple[str, str, str]],
        *,
        shown: str,
        id: str | None = None,
        agent: str | None = None,
    ) -> None:
        """`views`: (view id, key, label) of each view; `agent`: the name of the agent shown, in a
        console of several (it leads the bar, after the entry of the fleet view, `FLEET`)."""
        super().__init__(id=id)
        self.agent = agent
        self.views = [(FLEET, "0", "All agents"), *views] if agent is not None else views
        self.set_reactive(ViewBar.shown, shown)
        self.badges: dict[str, str] = {}  # view -> what waits there for the operator ("2 pending")

    def set_badges(self, badges: dict[str, str]) -> None:
        """What waits in each view, shown beside its label; repaints only when it changed."""
        if badges != self.badges:
            self.badges = dict(badges)
            self.changed()

    def items(self) -> list[Text]:
        normal = self.get_component_rich_style("viewbar--view")
        marked = self.get_component_rich_style("viewbar--shown")
        badge = self.get_component_rich_style("viewbar--badge")
        items = []
        for view, key, label in self.views:
            style = marked if view == self.shown else normal
            item = Text(" ")
            item.append(f" {key} {label}", style=style)
            if self.badges.get(view):
                item.append(f" {self.badges[view]}", style=style + badge)
            item.append(" ", style=style)
            items.append(item)
            if view == FLEET and self.agent is not None:
                items.append(Text.assemble(" ", (f" agent {self.agent} ▸", marked)))
        return items

    def clicked(self, index: int) -> None:
        # Not a simulated key press: a focused filter field would take the digit.
        if self.agent is not None and index >= 1:
            index -= 1  # the agent's name is no view
        self.post_message(self.Selected(self.views[index][0]))
