"""The detail pane beside a table: a heading and titled sections of bounded text, drawn line by line.

One scrolling widget for the whole pane rather than a widget per section: showing another run
wraps its text once and draws only the lines on screen, with no layout pass over a dozen widgets,
which matters while a flood of runs keeps the selection moving.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.syntax import Syntax
from rich.text import Text
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip

from .format import preview
from .lineview import LineView

MORE_HINT = "press m to see more"


@dataclass(frozen=True)
class Part:
    """One section of the pane: `text` is shown up to the preview bound, `empty` when it is blank."""

    id: str
    title: str
    text: str
    empty: str = "(none)"
    language: str | None = None  # highlight the text as this language (e.g. "diff")


class DetailPane(LineView, can_focus=True):
    """A heading and sections of plain text; long fields are cut, with the rest behind `m`."""

    DEFAULT_CSS = """
    DetailPane { scrollbar-gutter: stable; }
    """

    def __init__(self, placeholder: str, *, id: str, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.head = Text(placeholder)
        self.parts: list[Part] = []
        self.bodies: dict[str, str] = {}  # part id -> the text shown for it (cut, cleaned)
        self.truncated: list[Part] = []  # parts cut at the bound, in order
        self._text = Text(placeholder)
        self._wrapped: list[Text] = []  # the text's lines at the current width
        self._strips: list[Strip] = []
        self._width = -1  # the width `_strips` were wrapped at
        self._shown_width = 0  # the width it had when last shown

    def show(self, head: Text, parts: list[Part]) -> None:
        self.head = head
        self.parts = parts
        self.bodies = {}
        self.truncated = []
        text = head.copy()
        for part in parts:
            body, more = preview(part.text)
            self.bodies[part.id] = body
            text.append(f"\n\n{part.title}\n", style="bold")
            if not body:
                text.append(part.empty, style="dim")
            elif part.language:
                text.append_text(Syntax(body, part.language, theme="ansi_dark").highlight(body))
            else:
                text.append(body.rstrip("\n"))  # a final newline would show as a blank line
            if more:
                self.truncated.append(part)
                text.append(f"\n… {more:,} more characters ({MORE_HINT})", style="bold italic yellow")
        self._text = text
        self._width = -1
        if self.text_selection is not None:
            self.screen.clear_selection()  # it was made on the text shown before
        self.scroll_to(0, 0, animate=False, immediate=True)
        self._wrap()
        self.refresh()

    @property
    def plain(self) -> str:
        return self._text.plain

    def on_resize(self) -> None:
        self._wrap()

    def notify_style_update(self) -> None:
        # Sent on every focus change and theme change: the wrapped lines do not depend on the
        # widget's style (it is applied as lines are drawn), so a repaint is all it takes.
        super().notify_style_update()
        self.refresh()

    def _wrap(self) -> None:
        # Hidden behind another view the pane has no width: wrap for the width it had, so that
        # the key press which shows it again does not wait for the wrapping.
        width = self.scrollable_size.width or self._shown_width
        if width <= 0 or width == self._width:
            return
        self._shown_width = width
        self._width = width
        console = self.app.console
        self._wrapped = list(self._text.wrap(console, width, overflow="fold"))
        self._strips = [self._strip(line) for line in self._wrapped]
        self.set_virtual_size(Size(width, len(self._strips)))

    def _strip(self, line: Text) -> Strip:
        return Strip(line.render(self.app.console), line.cell_len)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_size.width
        row = self.scroll_offset.y + y  # rounded, as Textual rounds when it decides to redraw
        if row >= len(self._strips):
            return Strip.blank(width, self.base_style)
        strip = self._strips[row]
        selection = self.text_selection
        if selection is not None and (span := selection.get_span(row)) is not None:
            line = self._wrapped[row].copy()
            start, end = span
            line.stylize(
                self.screen.get_component_rich_style("screen--selection"),
                start,
                len(line) if end == -1 else end,
            )
            strip = self._strip(line)
        # Offsets tell Textual which character is under the mouse, for selecting text to copy.
        base = self.base_style
        return strip.apply_style(base).crop_extend(0, width, base).apply_offsets(0, row)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(line.plain for line in self._wrapped)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()
