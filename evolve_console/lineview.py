"""What the console's line-drawn widgets (the tables and the detail panes) share: the `LineView`, and
text in one style (`styled`) and a selection (`selected`) as they draw them."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .textual_private import scroll_update


class LineView(ScrollView):
    """A ScrollView that draws its own lines, with two savings that matter under a flood of runs.

    Its base style is computed once per repaint, not once per line (Textual walks every ancestor's
    styles for it: about 0.2 ms a call here). And a change of its height that does not show or hide
    a scrollbar updates the scrollbars without a layout pass over the whole screen, which
    assigning ``virtual_size`` would cost (20 ms and more here) at every new row or selected run.
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._base: Style | None = None

    @property
    def base_style(self) -> Style:
        """The widget's own style (background and colour), as in ``rich_style``."""
        return self._base if self._base is not None else self.rich_style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._base = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._base = None

    def set_virtual_size(self, size: Size) -> None:
        old = self.virtual_size
        if size == old:
            return
        viewport = self.scrollable_size
        if not viewport.height:
            # Hidden behind another view: the layout that shows it again sizes its scrollbars.
            self.set_reactive(ScrollView.virtual_size, size)
            return
        same_bars = size.width == old.width and (size.height > viewport.height) == (
            old.height > viewport.height
        )
        if not same_bars or not scroll_update(self, size):
            self.virtual_size = size  # scrollbars appear or go: the layout must change
            return
        self.refresh()


def styled(text: str, style: Style) -> Text:
    """Text in one style, as a span (Text.render ignores a Text's own base style)."""
    out = Text(text)
    out.stylize(style)
    return out


def selected(strip: Strip, span: tuple[int, int], style: Style) -> Strip:
    """`strip` with the cells `span` (its end -1: to the end) in the selection's `style` too."""
    start, end = span
    end = strip.cell_length if end == -1 else end
    before, middle, after = strip.divide([start, end, strip.cell_length])
    marked = Strip([Segment(text, (s or Style()) + style, c) for text, s, c in middle], middle.cell_length)
    return Strip.join([before, marked, after])
