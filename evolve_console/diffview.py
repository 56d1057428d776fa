"""The diff of a change as an operator reads it: syntax-highlighted by file type, the words that
changed marked inside changed lines, unified or side by side, long lines wrapped with a mark.

A line-drawn widget like the tables and the detail pane. The diff is parsed and measured once
(`diffprepare`, in a worker thread for a large one); the rows at the current width are counted
once per width and mode (`difflayout`); only the rows on screen are drawn, and kept until the
width, the mode or the styles change. Syntax highlighting and the word comparison (`diffmarks`)
run on the first draw of a line, a few hundred lines at a time, so a 2 MB diff opens as fast as a
small one.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip

from .diffcolours import LAYERS, Depth, depth_of, layer_styles
from .difflayout import MIN_SPLIT, Item, Layout, build_layout, file_notes, item_key
from .diffmarks import LineMarks
from .diffmodel import Diff, FileDiff, Line, whole_file
from .diffprepare import CR, NO_NEWLINE, Prepared, prepare, wrapped_rows
from .lineview import LineView, selected, styled

BLOCK = 64  # rows of one wrapped line drawn together
MAX_CACHED = 4_000  # drawn blocks kept; more are dropped (a long scroll through a huge diff)
CONTINUATION = "↪"  # at the start of each further row of a wrapped line

BACKGROUNDS = {
    "added",
    "removed",
    "added-word",
    "removed-word",
    "filler",
}  # styles that only colour the background


class DiffView(LineView, can_focus=True):
    """A head (subject, origin, trailers, review) above the diff of one change, in one scrolling pane.

    Over 30 methods: drawing a row (unified, a side, a line's colours) shares the widget's caches
    of drawn blocks and styles, which its layout and styles empty; what needs none of them is in
    modules of its own already (`diffprepare`, `difflayout`, `diffmarks`, `diffcolours`)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "diff-view--added",
        "diff-view--removed",
        "diff-view--added-word",
        "diff-view--removed-word",
        "diff-view--sign-added",
        "diff-view--sign-removed",
        "diff-view--gutter",
        "diff-view--file",
        "diff-view--hunk",
        "diff-view--mark",
        "diff-view--notice",
        "diff-view--dim",
        "diff-view--filler",
    }
    DEFAULT_CSS = """
    DiffView {
        scrollbar-gutter: stable;
        & > .diff-view--added { background: $success 14%; }
        & > .diff-view--removed { background: $error 14%; }
        & > .diff-view--added-word { background: $success 45%; }
        & > .diff-view--removed-word { background: $error 45%; }
        & > .diff-view--sign-added { color: $success; text-style: bold; }
        & > .diff-view--sign-removed { color: $error; text-style: bold; }
        & > .diff-view--gutter { color: $text-muted; }
        & > .diff-view--file { background: $panel; color: $text; text-style: bold; }
        & > .diff-view--hunk { color: $text-primary; }
        & > .diff-view--mark { color: $warning; text-style: bold; }
        & > .diff-view--notice { color: $warning; text-style: italic; }
        & > .diff-view--dim { color: $text-muted; }
        & > .diff-view--filler { background: $panel 50%; }
    }
    """

    def __init__(self, placeholder: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.head = Text(placeholder)
        self.source = prepare(Diff())  # the change's diff
        self.diff = Diff()  # what is shown: the diff, or one file whole
        self.whole: str | None = None  # the path of the file shown whole, if one is
        self.split = False  # side by side asked for (drawn when the pane is wide enough)
        self.notes: list[str] = []  # lines above the diff (what is shown, why side by side is not)
        self.empty = "(no textual changes)"
        self._shown = self.source  # what is shown, prepared
        self._marks = LineMarks(self._shown)  # its syntax and changed words, as they are drawn
        self._layout: Layout | None = None
        self._blocks: dict[tuple[int, int], list[Strip]] = {}  # (item, block) -> its rows, drawn
        self._styles: dict[str, Style] = {}
        self._shown_width = 0

    # ---- what is shown ------------------------------------------------------------------------

    def show(self, head: Text, diff: Prepared | Diff | str, empty: str = "(no textual changes)") -> None:
        """A change: its head and its diff, from the top. A large diff is best prepared first
        (`prepare`, in a worker thread): preparing 2 MB takes a few hundred milliseconds."""
        self.head = head
        self.source = diff if isinstance(diff, Prepared) else prepare(diff)
        self.empty = empty
        self.whole = None
        self.notes = []
        self._set_diff(self.source)
        if self.text_selection is not None:
            self.screen.clear_selection()  # it was made on the text shown before
        self.scroll_to(0, 0, animate=False, immediate=True, force=True)

    def show_whole(self, path: str, content: str, note: str) -> None:
        """The file `path` of the diff whole (`content`: the file after the change), its changes marked."""
        file = next((f for f in self.source.diff.files if f.path == path), None)
        if file is None:
            return
        self.whole = path
        self.notes = [note]
        self._set_diff(prepare(Diff([whole_file(file, content)])))
        # Open at the first change, a few lines of the file above it.
        top = 0
        layout = self._ensure_layout()
        if layout is not None:
            lines = self.diff.files[0].hunks[0].lines if self.diff.files[0].hunks else []
            for index, item in enumerate(layout.items):
                if item[0] in "lr" and any(
                    i is not None and lines[i].kind != " " for i in item[3 : 5 if item[0] == "r" else 4]
                ):
                    top = max(layout.starts[index] - 3, 0)
                    break
        self.scroll_to(0, top, animate=False, immediate=True, force=True)

    def show_diff(self) -> None:
        """Back from a whole file to the diff, at that file."""
        path, self.whole, self.notes = self.whole, None, []
        self._set_diff(self.source)
        top = 0
        layout = self._ensure_layout()
        for index, item in enumerate(layout.items if layout is not None else []):
            if item[0] == "f" and self.diff.files[item[1]].path == path:
                top = layout.starts[index] if layout is not None else 0
                break
        self.scroll_to(0, top, animate=False, immediate=True, force=True)

    def set_split(self, split: bool) -> None:
        """Side by side (when the pane is wide enough) or unified, keeping the line at the top."""
        if split != self.split:
            self.split = split
            self._relayout(keep_top=True)

    def split_fits(self) -> bool:
        return self._width() >= MIN_SPLIT

    def current_file(self) -> FileDiff | None:
        """The file at the top of the pane (the first one while the head is on screen)."""
        layout = self._ensure_layout()
        if layout is None or not self.diff.files:
            return None
        index = bisect_right(layout.starts, round(self.scroll_offset.y)) - 1
        for item in reversed(layout.items[: max(index, 0) + 1]):
            if item[0] != "h" and item[0] != "n" and len(item) > 1:
                return self.diff.files[item[1]]
        return self.diff.files[0]

    @property
    def total_rows(self) -> int:
        layout = self._ensure_layout()
        return layout.rows if layout else 0

    # ---- preparing a diff ---------------------------------------------------------------------

    def _set_diff(self, prepared: Prepared) -> None:
        self.diff = prepared.diff
        self._shown = prepared
        self._marks = LineMarks(prepared)
        self._relayout(keep_top=False)

    def _width(self) -> int:
        return self.scrollable_size.width or self._shown_width

    def _relayout(self, keep_top: bool) -> None:
        anchor = self._anchor() if keep_top else None
        self._layout = None
        self._blocks.clear()
        layout = self._ensure_layout()
        if layout is None:
            return
        self.set_virtual_size(Size(layout.width, layout.rows))
        if anchor is not None:
            for index, item in enumerate(layout.items):
                if item_key(item) == anchor:
                    self.scroll_to(0, layout.starts[index], animate=False, immediate=True, force=True)
                    break
        self.refresh()

    def _anchor(self) -> tuple[Any, ...] | None:
        layout = self._layout
        if layout is None or not layout.items:
            return None
        index = bisect_right(layout.starts, round(self.scroll_offset.y)) - 1
        return item_key(layout.items[max(index, 0)])

    def on_resize(self) -> None:
        width = self.scrollable_size.width
        layout = self._layout
        if width > 0 and (layout is None or Size(layout.width, layout.rows) != self.virtual_size):
            self._relayout(keep_top=True)

    def notify_style_update(self) -> None:
        # Focus and theme changes restyle the widget: draw the rows again with the new styles.
        super().notify_style_update()
        self._styles = {}
        self._blocks.clear()
        self.refresh()

    def _ensure_layout(self) -> Layout | None:
        width = self._width()
        if width <= 0:
            return None
        if self._layout is not None and self._layout.width == width:
            return self._layout
        self._shown_width = width
        self._layout = build_layout(
            width,
            head=self.head,
            notes=self.notes,
            split=self.split,
            empty=self.empty,
            shown=self._shown,
            whole=self.whole is not None,
            console=self.app.console,
        )
        self._blocks.clear()  # drawn for another width
        return self._layout

    # ---- drawing ------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_size.width
        base = self.base_style
        layout = self._ensure_layout()
        row = self.scroll_offset.y + y  # rounded, as Textual rounds when it decides to redraw
        if layout is None or row >= layout.rows:
            return Strip.blank(width, base)
        index = bisect_right(layout.starts, row) - 1
        within = row - layout.starts[index]
        rows = self._block(layout, index, within // BLOCK)
        if within % BLOCK >= len(rows):  # cannot happen if _height and _chunks agree
            return Strip.blank(width, base)
        strip = rows[within % BLOCK]
        selection = self.text_selection
        if selection is not None and (span := selection.get_span(row)) is not None:
            strip = selected(strip, span, self.screen.get_component_rich_style("screen--selection"))
        # Offsets tell Textual which character is under the mouse, for selecting text to copy.
        return strip.apply_style(base).crop_extend(0, width, base).apply_offsets(0, row)

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        layout = self._ensure_layout()
        if layout is None:
            return None
        if selection.start is None and selection.end is None:
            return self.as_text(), "\n"  # all of it: as a diff, not row by row (2 MB would take seconds)
        first = selection.start.y if selection.start is not None else 0
        last = min(selection.end.y if selection.end is not None else layout.rows - 1, layout.rows - 1)
        rows = [""] * first  # rows above the selection: only their count matters
        for row in range(first, last + 1):
            index = bisect_right(layout.starts, row) - 1
            within = row - layout.starts[index]
            rows.append(self._block(layout, index, within // BLOCK)[within % BLOCK].text.rstrip())
        return selection.extract("\n".join(rows)), "\n"

    def as_text(self) -> str:
        """The head and the diff shown, as plain text: a line per diff line, with its sign."""
        out = [self.head.plain, ""]
        for file in self.diff.files:
            out.append(f"{file.old_path or '/dev/null'} → {file.new_path or '/dev/null'} ({file.status})")
            out += file_notes(file)
            for hunk in file.hunks:
                out.append(hunk.header)
                out += [line.kind + line.text for line in hunk.lines]
        return "\n".join(out) + "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()

    def _style(self, name: str) -> Style:
        """A component style, as a layer: only its background, or only its colour and text style
        (a component style also carries the widget's own colours, which would cover the layers below).
        Added, removed and changed words as the terminal's colours can tell them apart."""
        style = self._styles.get(name)
        if style is None:
            if name in LAYERS and self.depth is not Depth.TRUECOLOR:  # true colour: the theme's, as is
                self._styles.update(self._layers())
                return self._styles[name]
            full = self.get_component_rich_style(f"diff-view--{name}")
            if name in BACKGROUNDS:
                style = Style(bgcolor=full.bgcolor)
            elif name == "file":
                style = full
            else:
                style = Style(color=full.color, bold=full.bold, italic=full.italic)
            self._styles[name] = style
        return style

    @property
    def depth(self) -> Depth:
        """The colours of the terminal the console draws on."""
        return depth_of(self.app.console.color_system, self.app.no_color)

    def _layers(self) -> dict[str, Style]:
        tinted, tints = {}, {}
        variables = self.app.theme_variables
        for name in LAYERS:
            found = self.get_component_rich_style(f"diff-view--{name}").bgcolor
            tinted[name] = Color.from_rich_color(found) if found is not None else Color(0, 0, 0)
            tints[name] = Color.parse(variables["success" if name.startswith("added") else "error"])
        return layer_styles(self.depth, self.background_colors[1], tinted, tints)

    def _block(self, layout: Layout, index: int, block: int) -> list[Strip]:
        key = (index, block)
        rows = self._blocks.get(key)
        if rows is None:
            if len(self._blocks) > MAX_CACHED:
                self._blocks.clear()
            rows = self._blocks[key] = self._draw(layout, layout.items[index], block)
        return rows

    def _draw(self, layout: Layout, item: Item, block: int) -> list[Strip]:
        width = layout.width
        kind = item[0]
        if kind == "h":
            row: Text = item[1]
            return [Strip(list(row.render(self.app.console)), row.cell_len)]
        if kind == "n":
            return [self._one_row(styled(item[1], self._style(item[2])), width)]
        if kind == "f":
            return [self._one_row(self._file_title(self.diff.files[item[1]]), width, self._style("file"))]
        if kind == "@":
            header = self.diff.files[item[1]].hunks[item[2]].header
            return [self._one_row(styled(header, self._style("hunk")), width)]
        if kind == "l":
            return self._draw_unified(layout, item[1], item[2], item[3], block)
        return self._draw_split(layout, item[1], item[2], item[3], item[4], block)

    def _one_row(self, text: Text, width: int, fill: Style | None = None) -> Strip:
        """`text` on one row, cut with an ellipsis; with `fill`, over that background to the edge."""
        text.truncate(width, overflow="ellipsis", pad=fill is not None)
        if fill is not None:
            text.stylize_before(fill)  # under the text's own styles
        return Strip(list(text.render(self.app.console)), text.cell_len)

    def _file_title(self, file: FileDiff) -> Text:
        title = Text(" ")
        if file.status in ("renamed", "copied"):
            title.append(f"{file.old_path} → {file.new_path}")
        else:
            title.append(file.path)
        added, removed = file.counts()
        title.append(f"  {file.status}", style=self._style("dim"))
        if self.whole is not None:
            title.append(", whole file", style=self._style("dim"))
        if added:
            title.append(f"  +{added}", style=self._style("sign-added"))
        if removed:
            title.append(f"  -{removed}", style=self._style("sign-removed"))
        return title

    # ---- one line --------------------------------------------------------------------------------

    def _line_text(self, fi: int, hi: int, li: int) -> Text:
        """A line's text with its colours: the added or removed background, the syntax, the
        changed words, and the marks of a \\r\\n line end and of a missing final newline."""
        line = self.diff.files[fi].hunks[hi].lines[li]
        text = Text(self._shown.display[fi][hi][li])
        background = {"+": "added", "-": "removed"}.get(line.kind)
        if background:
            text.stylize(self._style(background))
        if self.depth in (Depth.TRUECOLOR, Depth.EIGHT_BIT):
            # With 16 colours or none, the lines' own colours and marks are what tells them apart.
            dark = self.app.current_theme.dark if self.app.current_theme else True
            for start, end, style in self._marks.syntax(fi, hi, li, dark):
                text.stylize(style, start, end)
        if line.partner is not None:
            word = self._style(f"{background}-word")
            for start, end in self._marks.words(fi, hi, li):
                text.stylize(word, start, end)
        if line.cr:
            text.append(CR, style=self._style("dim"))
        if line.no_newline:
            text.append(NO_NEWLINE, style=self._style("notice"))
        return text

    def _draw_unified(self, layout: Layout, fi: int, hi: int, li: int, block: int) -> list[Strip]:
        line = self.diff.files[fi].hunks[hi].lines[li]
        digits = layout.digits
        text_width = max(layout.width - (2 * digits + 4), 8)
        background = self._background(line)
        gutter = self._style("gutter")
        numbers = f"{'' if line.old is None else line.old:>{digits}} {'' if line.new is None else line.new:>{digits}} "
        sign = Segment(line.kind, background + self._sign_style(line))
        out = []
        for k, chunk in wrapped_rows(
            self._line_text(fi, hi, li), text_width, block * BLOCK, (block + 1) * BLOCK
        ):
            first = k == 0
            segments = [
                Segment(numbers if first else " " * len(numbers), gutter),
                sign if first else Segment(CONTINUATION, background + self._style("mark")),
                Segment(" ", background),
                *chunk.render(self.app.console),
            ]
            used = len(numbers) + 2 + chunk.cell_len
            if used < layout.width:
                segments.append(Segment(" " * (layout.width - used), background))
            out.append(Strip(segments, max(used, layout.width)))
        return out

    def _draw_split(
        self, layout: Layout, fi: int, hi: int, left: int | None, right: int | None, block: int
    ) -> list[Strip]:
        lines = self.diff.files[fi].hunks[hi].lines
        half = (layout.width - 1) // 2
        sides = [
            self._half(layout, fi, hi, left, "old", half, block),
            self._half(layout, fi, hi, right, "new", half, block),
        ]
        height = max(len(sides[0]), len(sides[1]))
        separator = Segment("│", self._style("gutter"))
        out = []
        for k in range(height):
            parts = []
            for s, (side, cells) in enumerate(zip(sides, (half, half), strict=True)):
                if k < len(side):
                    parts.append(side[k])
                else:
                    fill = (
                        self._style("filler")
                        if (left, right)[s] is None
                        else self._background(
                            lines[(left, right)[s]]  # type: ignore[index]
                        )
                    )
                    parts.append(Strip([Segment(" " * cells, fill)], cells))
            out.append(Strip.join([parts[0], Strip([separator], 1), parts[1]]))
        return out

    def _half(
        self, layout: Layout, fi: int, hi: int, li: int | None, side: str, cells: int, block: int
    ) -> list[Strip]:
        """One side of a row side by side: its rows in block `block` (none past the line's end)."""
        if li is None:
            return [Strip([Segment(" " * cells, self._style("filler"))], cells)] if block == 0 else []
        line = self.diff.files[fi].hunks[hi].lines[li]
        digits = layout.digits
        number = line.old if side == "old" else line.new
        background = self._background(line)
        gutter = f"{'' if number is None else number:>{digits}} "
        out = []
        for k, chunk in wrapped_rows(
            self._line_text(fi, hi, li), max(cells - (digits + 3), 4), block * BLOCK, (block + 1) * BLOCK
        ):
            first = k == 0
            segments = [
                Segment(gutter if first else " " * len(gutter), self._style("gutter")),
                Segment(line.kind, background + self._sign_style(line))
                if first
                else Segment(CONTINUATION, background + self._style("mark")),
                Segment(" ", background),
                *chunk.render(self.app.console),
            ]
            used = len(gutter) + 2 + chunk.cell_len
            if used < cells:
                segments.append(Segment(" " * (cells - used), background))
            out.append(Strip(segments, max(used, cells)).crop(0, cells))
        return out

    def _background(self, line: Line) -> Style:
        if line.kind == "+":
            return self._style("added")
        if line.kind == "-":
            return self._style("removed")
        return Style()

    def _sign_style(self, line: Line) -> Style:
        if line.kind == "+":
            return self._style("sign-added")
        if line.kind == "-":
            return self._style("sign-removed")
        return self._style("gutter")
