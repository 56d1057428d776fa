"""A bar of items (keys, views, the connection's pieces) that wraps onto as many lines as its width
needs, never cutting an item (but a last one that may be): in a narrow terminal every key and every
view stays in sight and clickable."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.widget import Widget

Placed = list[list[int]]  # the items of each line, by index


def place(widths: list[int], width: int, cut_last: int = 0) -> Placed:
    """The items (their widths in cells, in order) laid out in lines of `width` cells: each line
    takes items while they fit; an item wider than a whole line has a line of its own. With
    `cut_last`, the last item stays on the line before it, cut, when that line has that many cells
    left for it (rather than taking a line of its own)."""
    lines: Placed = [[]]
    used = 0
    last = len(widths) - 1
    for index, cells in enumerate(widths):
        stays_cut = index == last and cut_last and width - used >= cut_last
        if lines[-1] and used + cells > width and not stays_cut:
            lines.append([])
            used = 0
        lines[-1].append(index)
        used += cells
    return lines if lines[0] else []


class WrapBar(Widget, can_focus=False):
    """Items drawn one after the other, wrapped onto more lines when they do not fit; a click on an
    item calls `clicked(index)`. Subclasses say what the items are (`items`)."""

    DEFAULT_CSS = """
    WrapBar { height: auto; }
    """
    ALLOW_SELECT = False

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._spans: list[tuple[int, int, int, int]] = []  # (line, start x, end x, item index)
        self._lines = 1  # lines at the width last drawn
        self.cut_last = 0  # cells left on a line for which the last item stays on it, cut (0: never)

    def items(self) -> list[Text]:
        """Each item's text, with its own styles and spacing (leading blank included)."""
        return []

    def clicked(self, index: int) -> None:
        """The item `index` was clicked."""

    def item_at(self, x: int, y: int) -> int | None:
        for line, start, end, index in self._spans:
            if line == y and start <= x < end:
                return index
        return None

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(len(place([item.cell_len for item in self.items()], width, self.cut_last)), 1)

    def changed(self) -> None:
        """The items changed: repaint, and lay the screen out again if that takes more or fewer lines."""
        lines = self.get_content_height(self.size, self.size, self.size.width) if self.size.width else 1
        self.refresh(layout=lines != self._lines)

    def render(self) -> Text:
        items = self.items()
        width = self.size.width or sum(item.cell_len for item in items)
        placed = place([item.cell_len for item in items], width, self.cut_last)
        self._lines = max(len(placed), 1)
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        self._spans = []
        for y, line in enumerate(placed):
            if y:
                out.append("\n")
            x = 0
            for index in line:
                item = items[index]
                if x + item.cell_len > width and x:  # the last item, cut to the line's end
                    item = item.copy()
                    item.truncate(width - x, overflow="ellipsis")
                out.append_text(item)
                self._spans.append((y, x, x + item.cell_len, index))
                x += item.cell_len
        return out

    def on_click(self, event: events.Click) -> None:
        found = self.item_at(event.x, event.y)
        if found is not None:
            self.clicked(found)
