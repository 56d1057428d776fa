"""The diff of a change as an operator reads it: syntax-highlighted by file type, the words that
changed marked inside changed lines, unified or side by side, long lines wrapped with a mark.

A line-drawn widget like the tables and the detail pane: the diff is parsed once (`diffmodel`),
each line's height at the current width is counted once per width, and only the lines on screen
are drawn (and kept until the width, the mode or the styles change). Syntax highlighting and the
word comparison run on the first draw of a line, a few hundred lines at a time, so a 2 MB diff
opens as fast as a small one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from typing import Any, ClassVar

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Generic, _TokenType, is_token_subtype
from pygments.util import ClassNotFound
from rich.cells import cell_len, get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.syntax import ANSI_DARK, ANSI_LIGHT, ANSISyntaxTheme
from rich.text import Text
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip

from .diffmodel import Diff, FileDiff, Line, changed_spans, language_for, parse, whole_file
from .lineview import LineView

MIN_SPLIT = 100  # columns side by side needs: two halves of about 50
TAB = 4
CHUNK = 200  # lines highlighted together (the lexer's state carries across the lines of a chunk)
MAX_HIGHLIGHT = 4_000  # longer lines are not highlighted (a minified file, a data blob)
BLOCK = 64  # rows of one wrapped line drawn together
MAX_CACHED = 4_000  # drawn blocks kept; more are dropped (a long scroll through a huge diff)
CONTINUATION = "↪"  # at the start of each further row of a wrapped line
NO_NEWLINE = " ⊘ no newline at end of file"
CR = "␍"  # the line ended with \r\n

BACKGROUNDS = {
    "added",
    "removed",
    "added-word",
    "removed-word",
    "filler",
}  # styles that only colour the background

# Control characters (newline and tab aside) shown as \xNN, so the text cannot disturb the screen.
_CLEAN = {i: f"\\x{i:02x}" for i in [*range(32), 127, 0x85] if i not in (9, 10)}
_CLEAN.update({0x2028: "\\u2028", 0x2029: "\\u2029"})

Item = tuple[Any, ...]  # one entry of the layout: a kind letter, then what it draws (see _Layout)
SyntaxSpans = list[tuple[int, int, Style]]


def display_text(text: str) -> str:
    """A line as drawn: control characters visible, tabs expanded."""
    return text.translate(_CLEAN).expandtabs(TAB)


def cells_of(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


@dataclass
class Prepared:
    """A diff ready to draw: parsed, each line's text as drawn and its width in cells, and each
    file's language. `prepare` makes it; it is plain data, so a worker thread can make it."""

    diff: Diff
    display: list[list[list[str]]]  # [file][hunk][line] -> the line's text as drawn
    cells: list[list[list[int]]]  # and its width in cells
    languages: list[str | None]  # [file] -> the language it is highlighted in
    irregular: list[list[list[int]]]  # [file][hunk] -> lines not plain ASCII, or with a line-end mark


def prepare(diff: Diff | str) -> Prepared:
    """Parse `diff` (when given as text) and measure its lines."""
    parsed = parse(diff) if isinstance(diff, str) else diff
    display = [[[display_text(line.text) for line in h.lines] for h in f.hunks] for f in parsed.files]
    cells = [[[cells_of(t) for t in hunk] for hunk in file] for file in display]
    languages = [language_for(f.path, f.first_line()) for f in parsed.files]
    irregular = [
        [
            [
                i
                for i, (t, line) in enumerate(zip(texts, h.lines, strict=True))
                if line.cr or line.no_newline or not t.isascii()
            ]
            for texts, h in zip(file_texts, f.hunks, strict=True)
        ]
        for file_texts, f in zip(display, parsed.files, strict=True)
    ]
    return Prepared(parsed, display, cells, languages, irregular)


@dataclass
class _Layout:
    """The rows of the pane at one width and mode. Items (by their first element):
    ("h", Text) a row of the head; ("n", text, component) a row of a note; ("f", file) a file's title;
    ("@", file, hunk) a hunk header; ("l", file, hunk, line) a line, unified; ("r", file, hunk,
    left line or None, right line or None) a row side by side."""

    width: int
    split: bool
    items: list[Item]
    starts: list[int]  # the first row of each item
    rows: int
    digits: int  # width of a line number


@cache
def _lexer(language: str) -> Lexer | None:
    try:
        # stripnl=False: leading blank lines would otherwise vanish and shift every line.
        return get_lexer_by_name(language, stripnl=False, ensurenl=True)
    except ClassNotFound:
        return None


class DiffView(LineView, can_focus=True):
    """A head (subject, origin, trailers, review) above the diff of one change, in one scrolling pane."""

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
        self._display: list[list[list[str]]] = []  # [file][hunk][line] -> the line's text as drawn
        self._cells: list[list[list[int]]] = []  # and its width in cells
        self._languages: list[str | None] = []
        self._irregular: list[list[list[int]]] = []
        self._layout: _Layout | None = None
        self._blocks: dict[tuple[int, int], list[Strip]] = {}  # (item, block) -> its rows, drawn
        self._syntax: dict[tuple[int, int, str, int, bool], list[SyntaxSpans]] = {}
        self._sides: dict[tuple[int, int], tuple[list[int], dict[str, list[int]]]] = {}
        self._words: dict[
            tuple[int, int, int], tuple[list[tuple[int, int]], list[tuple[int, int]]] | None
        ] = {}
        self._styles: dict[str, Style] = {}
        self._token_styles: dict[tuple[_TokenType, bool], Style] = {}
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

    def too_narrow(self) -> str:
        return (
            f"side by side needs {MIN_SPLIT} columns; this pane has {self._width()} "
            "(w: the full width, or a wider terminal)"
        )

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
        self._display, self._cells, self._languages = prepared.display, prepared.cells, prepared.languages
        self._irregular = prepared.irregular
        self._syntax.clear()
        self._sides.clear()
        self._words.clear()
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
                if self._key(item) == anchor:
                    self.scroll_to(0, layout.starts[index], animate=False, immediate=True, force=True)
                    break
        self.refresh()

    def _anchor(self) -> tuple[Any, ...] | None:
        layout = self._layout
        if layout is None or not layout.items:
            return None
        index = bisect_right(layout.starts, round(self.scroll_offset.y)) - 1
        return self._key(layout.items[max(index, 0)])

    @staticmethod
    def _key(item: Item) -> tuple[Any, ...] | None:
        """What an item shows, the same in both modes: a line (by file, hunk, index) or a file."""
        if item[0] == "l":
            return ("line", item[1], item[2], item[3])
        if item[0] == "r":
            return ("line", item[1], item[2], item[3] if item[3] is not None else item[4])
        if item[0] in ("f", "@"):
            return (item[0], *item[1:])
        return None

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

    def _ensure_layout(self) -> _Layout | None:
        width = self._width()
        if width <= 0:
            return None
        if self._layout is not None and self._layout.width == width:
            return self._layout
        self._shown_width = width
        self._layout = self._build_layout(width)
        self._blocks.clear()  # drawn for another width
        return self._layout

    def _build_layout(self, width: int) -> _Layout:
        items: list[Item] = []
        heights: list[int] = []

        def note(text: str, style: str) -> None:
            for row in Text(text).wrap(self.app.console, width, overflow="fold") if text else [Text()]:
                items.append(("n", row.plain, style))
                heights.append(1)

        for row in self.head.wrap(self.app.console, width, overflow="fold"):
            items.append(("h", row))
            heights.append(1)
        note("", "dim")
        split = self.split and width >= MIN_SPLIT
        for text in self.notes:
            note(text, "notice")
        if self.split and not split:
            note(self.too_narrow(), "notice")
        if self.diff.empty:
            note(self.empty, "dim")
        digits = len(
            str(
                max(
                    [1]
                    + [h.old_start + h.old_count for f in self.diff.files for h in f.hunks]
                    + [h.new_start + h.new_count for f in self.diff.files for h in f.hunks]
                )
            )
        )
        unified_text = max(width - (2 * digits + 4), 8)
        half = (width - 1) // 2
        left_text = max(half - (digits + 3), 4)
        for fi, file in enumerate(self.diff.files):
            items.append(("f", fi))
            heights.append(1)
            for text in self._file_notes(file):
                note(text, "dim")
            for hi, hunk in enumerate(file.hunks):
                lines = hunk.lines
                if self.whole is None:
                    items.append(("@", fi, hi))
                    heights.append(1)
                if split:
                    each = self._heights(fi, hi, left_text)
                    rows = hunk.rows()
                    items.extend([("r", fi, hi, left, right) for left, right in rows])
                    heights.extend(
                        [max(1 if a is None else each[a], 1 if b is None else each[b]) for a, b in rows]
                    )
                else:
                    items.extend([("l", fi, hi, li) for li in range(len(lines))])
                    heights.extend(self._heights(fi, hi, unified_text))
        if self.diff.omitted:
            note(f"… {self.diff.omitted:,} more diff lines not shown", "notice")
        starts = list(accumulate(heights, initial=0))
        total = starts.pop()
        return _Layout(width, split, items, starts, total, digits)

    def _heights(self, fi: int, hi: int, width: int) -> list[int]:
        """How many rows each line of a hunk takes at `width` cells of text."""
        texts = self._display[fi][hi]
        out = [
            1 if c <= width else len(_row_starts(texts[i], width)) for i, c in enumerate(self._cells[fi][hi])
        ]
        for li in self._irregular[fi][hi]:
            out[li] = self._height(fi, hi, li, width)
        return out

    def _height(self, fi: int, hi: int, li: int, width: int) -> int:
        """How many rows the line takes at `width` cells of text (as `_chunks` cuts it)."""
        line = self.diff.files[fi].hunks[hi].lines[li]
        if self._cells[fi][hi][li] + _suffix_len(line) <= width:
            return 1
        return len(_row_starts(self._display[fi][hi][li] + _suffix(line), width))

    @staticmethod
    def _file_notes(file: FileDiff) -> list[str]:
        notes = []
        if file.binary:
            notes.append("binary file: not shown")
        if file.old_mode and file.new_mode and file.old_mode != file.new_mode:
            notes.append(f"mode {file.old_mode} → {file.new_mode}")
        elif file.status == "added" and file.new_mode:
            notes.append(f"new file, mode {file.new_mode}")
        elif file.status == "deleted" and file.old_mode:
            notes.append(f"deleted file, mode {file.old_mode}")
        if file.similarity is not None and file.status in ("renamed", "copied"):
            notes.append(f"{file.status} from {file.old_path} ({file.similarity}% similar)")
        notes.extend(file.notes)
        return notes

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
            strip = _selected(strip, span, self.screen.get_component_rich_style("screen--selection"))
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
            out += self._file_notes(file)
            for hunk in file.hunks:
                out.append(hunk.header)
                out += [line.kind + line.text for line in hunk.lines]
        return "\n".join(out) + "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()

    def _style(self, name: str) -> Style:
        """A component style, as a layer: only its background, or only its colour and text style
        (a component style also carries the widget's own colours, which would cover the layers below)."""
        style = self._styles.get(name)
        if style is None:
            full = self.get_component_rich_style(f"diff-view--{name}")
            if name in BACKGROUNDS:
                style = Style(bgcolor=full.bgcolor)
            elif name == "file":
                style = full
            else:
                style = Style(color=full.color, bold=full.bold, italic=full.italic)
            self._styles[name] = style
        return style

    def _block(self, layout: _Layout, index: int, block: int) -> list[Strip]:
        key = (index, block)
        rows = self._blocks.get(key)
        if rows is None:
            if len(self._blocks) > MAX_CACHED:
                self._blocks.clear()
            rows = self._blocks[key] = self._draw(layout, layout.items[index], block)
        return rows

    def _draw(self, layout: _Layout, item: Item, block: int) -> list[Strip]:
        width = layout.width
        kind = item[0]
        if kind == "h":
            row: Text = item[1]
            return [Strip(list(row.render(self.app.console)), row.cell_len)]
        if kind == "n":
            return [self._one_row(_styled(item[1], self._style(item[2])), width)]
        if kind == "f":
            return [self._one_row(self._file_title(self.diff.files[item[1]]), width, self._style("file"))]
        if kind == "@":
            header = self.diff.files[item[1]].hunks[item[2]].header
            return [self._one_row(_styled(header, self._style("hunk")), width)]
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
        text = Text(self._display[fi][hi][li])
        background = {"+": "added", "-": "removed"}.get(line.kind)
        if background:
            text.stylize(self._style(background))
        for start, end, style in self._syntax_spans(fi, hi, li):
            text.stylize(style, start, end)
        if line.partner is not None:
            word = self._style(f"{background}-word")
            for start, end in self._word_spans(fi, hi, li):
                text.stylize(word, start, end)
        if line.cr:
            text.append(CR, style=self._style("dim"))
        if line.no_newline:
            text.append(NO_NEWLINE, style=self._style("notice"))
        return text

    def _draw_unified(self, layout: _Layout, fi: int, hi: int, li: int, block: int) -> list[Strip]:
        line = self.diff.files[fi].hunks[hi].lines[li]
        digits = layout.digits
        text_width = max(layout.width - (2 * digits + 4), 8)
        background = self._background(line)
        gutter = self._style("gutter")
        numbers = f"{'' if line.old is None else line.old:>{digits}} {'' if line.new is None else line.new:>{digits}} "
        sign = Segment(line.kind, background + self._sign_style(line))
        out = []
        for k, chunk in self._chunks(self._line_text(fi, hi, li), text_width, block):
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
        self, layout: _Layout, fi: int, hi: int, left: int | None, right: int | None, block: int
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
        self, layout: _Layout, fi: int, hi: int, li: int | None, side: str, cells: int, block: int
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
        for k, chunk in self._chunks(self._line_text(fi, hi, li), max(cells - (digits + 3), 4), block):
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

    def _chunks(self, text: Text, width: int, block: int) -> Iterable[tuple[int, Text]]:
        """The rows of block `block` of `text` cut at `width` cells: (row number within the line, row)."""
        first, last = block * BLOCK, (block + 1) * BLOCK
        plain = text.plain
        offsets = _row_starts(plain, width)
        wanted = offsets[first:last]
        if not wanted:
            return []
        cuts = [*wanted[1:], offsets[last] if last < len(offsets) else len(plain)]
        pieces = text.divide([wanted[0], *cuts])
        return list(enumerate(pieces[1 : 1 + len(wanted)], start=first))

    # ---- syntax and words ----------------------------------------------------------------------

    def _side(self, fi: int, hi: int) -> tuple[list[int], dict[str, list[int]]]:
        """Each line's place in the text before ("-": context and removed lines) or after the
        change ("+": context and added lines), which is what gets highlighted."""
        key = (fi, hi)
        found = self._sides.get(key)
        if found is None:
            place: list[int] = []
            sides: dict[str, list[int]] = {"-": [], "+": []}
            for li, line in enumerate(self.diff.files[fi].hunks[hi].lines):
                side = sides["-" if line.kind == "-" else "+"]
                place.append(len(side))
                side.append(li)
            found = self._sides[key] = (place, sides)
        return found

    def _syntax_spans(self, fi: int, hi: int, li: int) -> SyntaxSpans:
        language = self._languages[fi]
        if language is None:
            return []
        hunk = self.diff.files[fi].hunks[hi]
        side = "-" if hunk.lines[li].kind == "-" else "+"
        place, sides = self._side(fi, hi)
        chunk = place[li] // CHUNK
        dark = self.app.current_theme.dark if self.app.current_theme else True
        key = (fi, hi, side, chunk, dark)
        spans = self._syntax.get(key)
        if spans is None:
            texts = self._display[fi][hi]
            lines = [texts[i] for i in sides[side][chunk * CHUNK : (chunk + 1) * CHUNK]]
            spans = self._syntax[key] = self._highlight(language, lines, dark)
        return spans[place[li] - chunk * CHUNK]

    def _highlight(self, language: str, lines: list[str], dark: bool) -> list[SyntaxSpans]:
        out: list[SyntaxSpans] = [[] for _ in lines]
        lexer = _lexer(language)
        if lexer is None:
            return out
        code = "\n".join(line if len(line) <= MAX_HIGHLIGHT else "" for line in lines)
        row = column = 0
        for token, value in lexer.get_tokens(code):
            parts = value.split("\n")
            for k, part in enumerate(parts):
                if k:
                    row, column = row + 1, 0
                if part and row < len(out):
                    style = self._token_style(token, dark)
                    if style:
                        out[row].append((column, column + len(part), style))
                column += len(part)
        return out

    def _token_style(self, token: _TokenType, dark: bool) -> Style:
        key = (token, dark)
        style = self._token_styles.get(key)
        if style is None:
            found = _ansi_theme(dark).get_style_for_token(token)
            for kind, extra in EMPHASIS.items():
                if is_token_subtype(token, kind):
                    found = found + extra(dark)
                    break
            # Colour and text style only: the line's own background stays underneath.
            style = Style(color=found.color, bold=found.bold, italic=found.italic, dim=found.dim)
            self._token_styles[key] = style
        return style

    def _word_spans(self, fi: int, hi: int, li: int) -> list[tuple[int, int]]:
        lines = self.diff.files[fi].hunks[hi].lines
        line = lines[li]
        partner = line.partner
        if partner is None:
            return []
        old, new = (li, partner) if line.kind == "-" else (partner, li)
        key = (fi, hi, old)
        if key not in self._words:
            texts = self._display[fi][hi]
            self._words[key] = changed_spans(texts[old], texts[new])
        found = self._words[key]
        if found is None:
            return []
        return found[0] if line.kind == "-" else found[1]


# Markdown headings and emphasis, which Rich's ANSI themes leave plain: a prompt is Markdown.
EMPHASIS: dict[_TokenType, Callable[[bool], Style]] = {
    Generic.Heading: lambda dark: Style(color="bright_blue" if dark else "blue", bold=True),
    Generic.Strong: lambda dark: Style(bold=True),
    Generic.Emph: lambda dark: Style(italic=True),
}


@cache
def _ansi_theme(dark: bool) -> ANSISyntaxTheme:
    return ANSISyntaxTheme(ANSI_DARK if dark else ANSI_LIGHT)


def _styled(text: str, style: Style) -> Text:
    """Text in one style, as a span (Text.render ignores a Text's own base style)."""
    out = Text(text)
    out.stylize(style)
    return out


def _suffix(line: Line) -> str:
    return (CR if line.cr else "") + (NO_NEWLINE if line.no_newline else "")


def _suffix_len(line: Line) -> int:
    return (len(CR) if line.cr else 0) + (len(NO_NEWLINE) if line.no_newline else 0)


def _row_starts(plain: str, width: int) -> list[int]:
    """Where each row of `plain` starts when it is wrapped at `width` cells: after the last blank
    in the second half of a row (words stay whole), else at the width (a long word, a wide
    character that does not fit)."""
    if plain.isascii():
        starts, at = [0], 0
        while len(plain) - at > width:
            blank = plain.rfind(" ", at + width // 2, at + width)
            at = blank + 1 if blank >= 0 else at + width
            starts.append(at)
        return starts
    starts, used = [0], 0
    blank, after = -1, 0  # the last blank of the row, and the cells after it
    for i, ch in enumerate(plain):
        size = get_character_cell_size(ch)
        if used + size > width and used:
            if blank >= 0 and used - after >= width // 2:
                starts.append(blank + 1)
                used = after
            else:
                starts.append(i)
                used = 0
            blank, after = -1, 0
        used += size
        if ch == " ":
            blank, after = i, 0
        else:
            after += size
    return starts


def _selected(strip: Strip, span: tuple[int, int], style: Style) -> Strip:
    start, end = span
    end = strip.cell_length if end == -1 else end
    before, middle, after = strip.divide([start, end, strip.cell_length])
    marked = Strip([Segment(text, (s or Style()) + style, c) for text, s, c in middle], middle.cell_length)
    return Strip.join([before, marked, after])
