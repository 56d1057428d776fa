"""A diff made ready to draw, in a worker thread if it is large: parsed, each line's text as drawn
(control characters visible, tabs expanded) and its width in cells, each file's language; and
where the rows of a line start when it wraps at a width (words kept whole)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len, get_character_cell_size
from rich.text import Text

from .diffmodel import Diff, Line, parse
from .languages import language_for

TAB = 4
NO_NEWLINE = " ⊘ no newline at end of file"
CR = "␍"  # the line ended with \r\n

# Control characters (newline and tab aside) shown as \xNN, so the text cannot disturb the screen.
_CLEAN = {i: f"\\x{i:02x}" for i in [*range(32), 127, 0x85] if i not in (9, 10)}
_CLEAN.update({0x2028: "\\u2028", 0x2029: "\\u2029"})


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


def suffix(line: Line) -> str:
    """The marks drawn after a line's text: a \\r\\n line end, a missing final newline."""
    return (CR if line.cr else "") + (NO_NEWLINE if line.no_newline else "")


def suffix_len(line: Line) -> int:
    """The length of `suffix(line)`, without building it."""
    return (len(CR) if line.cr else 0) + (len(NO_NEWLINE) if line.no_newline else 0)


def row_starts(plain: str, width: int) -> list[int]:
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


def wrapped_rows(text: Text, width: int, first: int, last: int) -> list[tuple[int, Text]]:
    """Rows `first` to `last` (excluded) of `text` cut at `width` cells: (row number within the line, row)."""
    plain = text.plain
    offsets = row_starts(plain, width)
    wanted = offsets[first:last]
    if not wanted:
        return []
    cuts = [*wanted[1:], offsets[last] if last < len(offsets) else len(plain)]
    pieces = text.divide([wanted[0], *cuts])
    return list(enumerate(pieces[1 : 1 + len(wanted)], start=first))
