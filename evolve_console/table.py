"""A keyed, capped table of rows drawn line by line, for views that a flood of runs updates.

Textual's DataTable re-renders every visible cell when its focus or cursor changes (about 0.6 ms
a cell here) and removes rows in time proportional to its size. This table keeps each row's
rendered line until that row changes, so a tab switch, a focus change or a batch of new rows costs
a few dictionary operations and the lines actually on screen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from .columns import WIDTHS, Width, fit
from .lineview import LineView
from .model import MAX_ROWS as MAX_ROWS  # the cap the model keeps its rows to

# How long after new rows moved a following cursor a move of the operator's still counts from the row
# the cursor was on before: about the time it takes to see that the table moved. A key pressed
# sooner was aimed at the row the operator saw, not at the one that just arrived.
UNSEEN_JUMP_S = 0.5


class KeyedTable(LineView, can_focus=True):
    """Rows keyed by id, oldest first, capped at MAX_ROWS.

    It follows new rows (the cursor goes to each new last row) until the operator moves the cursor
    (keys, a click, a row selected from elsewhere): then the rows stay where they are under a cursor
    that stays on its row, what arrives is counted (`unseen`), and the table's last line says so
    (`following paused · +3 new · g: follow`, with `tells_following`; a view may say it elsewhere)
    until `follow()` (`g`, `end`, or a click on that line). With no rows it shows
    `empty`: what will appear there, and when.

    The first line is the header and stays put; the rows scroll under it.

    Over 30 methods: the rows, the cursor, following and the drawing share the lines it keeps drawn
    and the cursor's place, and a third of them are Textual's hooks (its keys, click, resize, focus,
    `render_line`); the columns' widths are `columns.py`'s.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "first", "First row", show=False),
        Binding("end", "last", "Last row", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "keyed-table--header",
        "keyed-table--cursor",
        "keyed-table--even-row",
        "keyed-table--paused",
        "keyed-table--empty",
    }
    DEFAULT_CSS = """
    KeyedTable {
        scrollbar-size-vertical: 1;
        background: $surface;
        color: $foreground;
        & > .keyed-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .keyed-table--even-row { background: $surface-lighten-1 50%; }
        & > .keyed-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .keyed-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        &:dark > .keyed-table--even-row { background: $surface-darken-1 40%; }
        & > .keyed-table--paused { background: $warning 25%; color: $foreground; text-style: bold; }
        & > .keyed-table--empty { color: $text-muted; }
    }
    """

    class RowHighlighted(Message):
        """The cursor is on another row (by key, mouse, or because the table follows new rows)."""

        def __init__(self, table: KeyedTable, cursor_row: int, key: str) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row
            self.key = key

        @property
        def control(self) -> KeyedTable:
            return self.table

    def __init__(
        self,
        columns: Iterable[tuple[str, str]],
        *,
        id: str,
        tells_following: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`tells_following`: the last line says when following is paused (for live rows, where the
        view does not say it itself); `clock`: seconds, for `UNSEEN_JUMP_S`."""
        super().__init__(id=id)
        self.columns = list(columns)
        self.wanted = [WIDTHS.get(key, Width(12, 8)) for key, _ in self.columns]
        self.widths = [w.preferred for w in self.wanted]
        self.cells: dict[str, list[Any]] = {}  # each row's cells by key
        self._order: list[str] = []  # the keys, oldest first: row i is self._order[i]
        self.cursor_row = 0
        self.following = True  # the cursor goes to each new last row (until the operator moves it)
        self.unseen = 0  # rows that arrived while following was paused
        self.tells_following = tells_following
        self.clock = clock
        self._empty: Text = Text()  # what an empty table says
        self._empty_lines: tuple[int, list[Strip]] | None = None  # (width, its lines) as drawn
        self._jumped: tuple[float, str] | None = None  # when following last moved the cursor, and from
        self._lines: dict[str, Strip] = {}  # each row's line without row styles, until it changes
        self._styled: dict[tuple[str, str], Strip] = {}  # (key, row style) -> the line as drawn
        self._header: Strip | None = None
        self._drawn_width = 0  # the view width rows were drawn for
        self._drawn_height = 0  # and its height
        self._component: dict[str, Style] = {}  # component class -> its style, until styles change
        self._highlighted: str | None = None  # the key of the last RowHighlighted posted
        self._stripe: dict[str, int] = {}  # key -> insertion number: stripes stay put as rows go
        self._inserted = 0
        self._update_size()

    # ---- the rows -------------------------------------------------------------------------------

    @property
    def preferred_width(self) -> int:
        """The width at which every column has its preferred width (blanks and scrollbar included)."""
        return sum(w.preferred for w in self.wanted) + len(self.wanted) + 1 + 1

    @property
    def rows(self) -> dict[str, list[Any]]:
        return self.cells

    @property
    def row_count(self) -> int:
        return len(self._order)

    def keys(self) -> list[str]:
        return list(self._order)

    def get_row_index(self, key: str) -> int:
        return self._order.index(key)

    def get_cell(self, key: str, column: str) -> Any:
        return self.cells[key][[k for k, _ in self.columns].index(column)]

    def selected_key(self) -> str | None:
        return self._order[self.cursor_row] if 0 <= self.cursor_row < len(self._order) else None

    @property
    def empty(self) -> Text:
        """What the table says while it has no rows: what will appear there, and when."""
        return self._empty

    @empty.setter
    def empty(self, text: Text | str) -> None:
        new = text if isinstance(text, Text) else Text(text)
        if new.plain != self._empty.plain or new.spans != self._empty.spans:
            self._empty = new
            self._empty_lines = None
            if not self._order:
                self.refresh()

    def upsert(self, rows: list[tuple[str, list[Any]]]) -> None:
        """Add or update rows (oldest first), keeping the newest MAX_ROWS."""
        selected = self.selected_key()
        added, trimmed, selected_changed = self._store(rows, selected)
        highlighted = self._highlighted
        if self.following and (added or selected is None):
            if selected is not None and added:
                self._jumped = (self.clock(), selected)  # the row the operator may still be looking at
            self._place(len(self._order) - 1)
        else:
            if added:
                self.unseen += added
            if selected is not None and selected in self.cells:
                # Rows dropped off the top: keep the cursor, and what is on screen, on the same rows.
                self.cursor_row = self._order.index(selected)
                if trimmed:
                    self.scroll_to(
                        y=max(self.scroll_y - trimmed, 0), animate=False, force=True, immediate=True
                    )
            elif self._order:
                self._place(0)  # the parked row was dropped: the oldest row left
        if (
            selected_changed
            and self._highlighted == highlighted
            and selected is not None
            and selected in self.cells
        ):
            # The selected row itself changed (a run that ended, a session that got a
            # notification): tell whoever shows its details.
            self.post_message(self.RowHighlighted(self, self.cursor_row, selected))
        if self.following and self._drawn_height and not self.scrollable_size.height:
            # Hidden behind another view: draw now the rows it will show when it comes back, so
            # that the key press which shows it does not wait for them.
            for key in self._order[-self._drawn_height :]:
                if key not in self._lines:
                    self._lines[key] = self._line(self.cells[key])
        self.refresh()

    def _store(self, rows: list[tuple[str, list[Any]]], selected: str | None) -> tuple[int, int, bool]:
        """Rows added or updated, the oldest dropped beyond MAX_ROWS: (rows added, rows dropped,
        whether the row `selected` changed)."""
        added = 0
        selected_changed = False
        for key, cells in rows[-MAX_ROWS:]:
            if key in self.cells:
                self._forget(key)
                selected_changed = selected_changed or key == selected
            else:
                self._order.append(key)
                self._stripe[key] = self._inserted = self._inserted + 1
                added += 1
            self.cells[key] = cells
        trimmed = max(len(self._order) - MAX_ROWS, 0)
        if trimmed:
            for key in self._order[:trimmed]:
                del self.cells[key]
                del self._stripe[key]
                self._forget(key)
            del self._order[:trimmed]
        self._update_size()
        return added, trimmed, selected_changed

    def replace_all(self, rows: list[tuple[str, list[Any]]]) -> None:
        """All rows anew (a reload, a filter, rows in another order). While following, the cursor
        is on the last row; while paused, it stays on its row (if that is still there) and so does
        the screen: that row keeps its line, whatever came or went above it."""
        selected, following = self.selected_key(), self.following
        line = self.cursor_row - self.scroll_offset.y  # the selected row's line under the header
        known, unseen = set(self._order), self.unseen
        self.clear()
        self._store(rows, None)
        if following or selected is None or selected not in self.cells:
            self.cursor_row = max(len(self._order) - 1, 0)
        else:
            self.following = False
            self.unseen = unseen + sum(1 for key in self._order if key not in known)
            self._update_size()
            self.cursor_row = self._order.index(selected)
            self.scroll_to(y=max(self.cursor_row - line, 0), animate=False, force=True, immediate=True)
        self._scroll_to_cursor()
        if self._order:
            # Said once, whether or not it moved: its cells may be new (the reload's detail).
            self._highlighted = self._order[self.cursor_row]
            self.post_message(self.RowHighlighted(self, self.cursor_row, self._highlighted))
        self.refresh()

    def clear(self) -> None:
        self.cells.clear()
        self._order.clear()
        self._stripe.clear()
        self._lines.clear()
        self._styled.clear()
        self.cursor_row = 0
        self.unseen = 0
        self.following = True  # nothing to stay on: the first rows to come are followed
        self._jumped = None
        self._update_size()
        self.refresh()

    def follow(self) -> None:
        """Follow new rows again (`g`, `end`): the cursor to the last row."""
        self.following = True
        self.unseen = 0
        self._jumped = None
        self._update_size()
        if self._order:
            self._place(len(self._order) - 1)
        self.refresh()

    def _forget(self, key: str) -> None:
        self._lines.pop(key, None)
        for style in ("cursor", "even", "odd"):
            self._styled.pop((key, style), None)

    @property
    def says_paused(self) -> bool:
        """Whether the last line says that following is paused."""
        return self.tells_following and not self.following and bool(self._order)

    def _update_size(self) -> None:
        # A blank before each column shown and at the end; the header; the line that says following
        # is paused, under the rows (so that the last row can be scrolled above it).
        width = sum(self.widths) + sum(1 for w in self.widths if w) + 1
        size = Size(width, len(self._order) + 1 + self.says_paused)
        if size != self.virtual_size:
            self.set_virtual_size(size)
            if self.following:
                # Scrollbars that come with the new size shrink the view only in the next layout.
                self.call_after_refresh(self._scroll_to_cursor)

    # ---- the cursor -----------------------------------------------------------------------------

    def move_cursor(self, *, row: int, animate: bool = False) -> None:
        """The cursor to `row`, put there by the operator (a key, a click, a row selected from
        another view): following pauses, unless it is where the cursor already was."""
        if self._order and max(0, min(row, len(self._order) - 1)) != self.cursor_row:
            self.following = False
            self._jumped = None
            self._update_size()
        self._place(row)

    def _place(self, row: int) -> None:
        """The cursor to `row` (following or not), on screen, and its row announced."""
        if not self._order:
            self.cursor_row = 0
            return
        row = max(0, min(row, len(self._order) - 1))
        changed = row != self.cursor_row
        self.cursor_row = row
        self._scroll_to_cursor()
        self.refresh()
        key = self._order[row]
        if changed or key != self._highlighted:
            self._highlighted = key
            self.post_message(self.RowHighlighted(self, row, key))

    def _scroll_to_cursor(self) -> None:
        if self.scrollable_size.height <= 1:
            return  # hidden (another view is shown): done on the resize that shows it
        # Lines under the header (and above the line that says following is paused).
        visible = max(self.scrollable_size.height - 1 - self.says_paused, 1)
        top = self.scroll_offset.y
        # force: rows that just made the table taller than its view have no scrollbar until the
        # next layout, and Textual refuses to scroll a view without one.
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, force=True, immediate=True)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False, force=True, immediate=True)

    def _moved_from(self) -> int:
        """The row a move of the operator's counts from: the cursor's, or, when new rows moved it
        a moment ago (UNSEEN_JUMP_S), the row it was on before, which the key was aimed from."""
        jumped = self._jumped
        recent = jumped is not None and self.clock() - jumped[0] < UNSEEN_JUMP_S
        if self.following and recent and jumped is not None and jumped[1] in self.cells:
            return self._order.index(jumped[1])
        return self.cursor_row

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(row=self._moved_from() + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(row=self._moved_from() + direction * max(self.scrollable_size.height - 2, 1))

    def action_first(self) -> None:
        self.move_cursor(row=0)

    def action_last(self) -> None:
        self.follow()

    def on_click(self, event: events.Click) -> None:
        if self.says_paused and event.y == self.scrollable_size.height - 1:
            self.follow()  # the line that says following is paused, and how to follow again
            return
        row = self.scroll_offset.y + event.y - 1
        if event.y >= 1 and row < len(self._order):  # not the header, not the blank below the rows
            self.move_cursor(row=row)

    def on_resize(self) -> None:
        self._drawn_height = self.scrollable_size.height or self._drawn_height
        # Also sent when the table's view is shown again: redraw only if its width changed.
        width = self.scrollable_size.width
        if width and width != self._drawn_width:  # (a hidden table has no width)
            self._drawn_width = width
            widths = fit(self.wanted, width)
            if widths != self.widths:
                self.widths = widths
                self._update_size()
            self._lines.clear()  # drawn to the old width
            self._restyle()
        self._scroll_to_cursor()

    def on_focus(self) -> None:
        self._restyle()  # the cursor's style depends on focus

    def on_blur(self) -> None:
        self._restyle()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._restyle()  # rows keep their drawn cells: those carry only the cells' own styles

    def _restyle(self) -> None:
        self._empty_lines = None
        self._styled.clear()
        self._component.clear()
        self._header = None
        self.refresh()

    def _style(self, component: str) -> Style:
        style = self._component.get(component)
        if style is None:
            style = self._component[component] = self.get_component_rich_style(component)
        return style

    # ---- drawing --------------------------------------------------------------------------------

    def _line(self, cells: list[Any]) -> Strip:
        console = self.app.console
        segments: list[Segment] = []
        for width, value in zip(self.widths, cells, strict=False):
            if width == 0:
                continue  # out of sight in a narrow view
            text = value.copy() if isinstance(value, Text) else Text(str(value).replace("\n", " "))
            text.truncate(width, overflow="ellipsis", pad=True)
            segments.append(Segment(" "))
            rendered = text.render(console)
            if text.style:  # Text.render leaves the text's own style to its caller
                rendered = Segment.apply_style(rendered, console.get_style(text.style))
            segments.extend(rendered)
        # Up to the view's right edge, so that the row's background (stripe, cursor) spans it.
        view = self.scrollable_size.width or self._drawn_width  # (hidden: the width it will have)
        end = max(self.virtual_size.width, view) - sum(self.widths) - sum(1 for w in self.widths if w)
        segments.append(Segment(" " * max(end, 1)))
        return Strip(segments).simplify()

    def _row(self, row: int) -> Strip:
        key = self._order[row]
        kind = "cursor" if row == self.cursor_row else ("even" if self._stripe[key] % 2 else "odd")
        styled = self._styled.get((key, kind))
        if styled is None:
            line = self._lines.get(key)
            if line is None or line.cell_length < self.scrollable_size.width:  # drawn for a narrower view
                line = self._lines[key] = self._line(self.cells[key])
            if kind == "cursor":
                # The cursor's colours win over the cells' own.
                style = self._style("keyed-table--cursor")
                styled = Strip(Segment.apply_style(line, self.base_style, style), line.cell_length)
            elif kind == "even":
                style = self._style("keyed-table--even-row")
                styled = line.apply_style(self.base_style + style)
            else:
                styled = line.apply_style(self.base_style)
            self._styled[(key, kind)] = styled
        return styled

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_size.width
        scroll_x = self.scroll_offset.x
        if y == 0:
            if self._header is None:
                header = self._line([label for _, label in self.columns])
                self._header = header.apply_style(self._style("keyed-table--header"))
            return self._header.crop_extend(scroll_x, scroll_x + width, self.base_style)
        if not self._order:
            lines = self._empty_text_lines(width)
            return lines[y - 1] if y - 1 < len(lines) else Strip.blank(width, self.base_style)
        if self.says_paused and y == self.scrollable_size.height - 1:
            return self._paused_line(width)
        row = self.scroll_offset.y + y - 1  # scroll_offset rounds, as Textual does to redraw
        if row >= len(self._order):
            return Strip.blank(width, self.base_style)
        return self._row(row).crop_extend(scroll_x, scroll_x + width, self.base_style)

    def _paused_line(self, width: int) -> Strip:
        new = f" · +{self.unseen:,} new" if self.unseen else ""
        text = Text(f" following paused{new} · g: follow", no_wrap=True, overflow="ellipsis")
        text.truncate(width, overflow="ellipsis", pad=True)
        style = self.base_style + self._style("keyed-table--paused")
        return Strip(Segment.apply_style(text.render(self.app.console), style), width)

    def _empty_text_lines(self, width: int) -> list[Strip]:
        """`empty`, wrapped at the view's width under a blank line, as drawn."""
        if self._empty_lines is None or self._empty_lines[0] != width:
            console = self.app.console
            style = self.base_style + self._style("keyed-table--empty")
            wrapped = list(self._empty.wrap(console, max(width - 2, 10))) if self._empty.plain else []
            lines = [Strip.blank(width, self.base_style)]
            for line in wrapped:
                segments = [Segment(" "), *line.render(console)]
                lines.append(Strip(Segment.apply_style(segments, style)).crop_extend(0, width, style))
            self._empty_lines = (width, lines)
        return self._empty_lines[1]
