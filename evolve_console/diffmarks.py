"""The colours inside the lines of a diff: each line highlighted in its file's language (Markdown's
headings and emphasis too), and the words that changed within a pair of lines.

Both are computed when a line is first drawn and kept for the diff shown: the highlighting a chunk
of lines of one side at a time (the lexer keeps its state across the lines of a chunk), the words
one pair at a time. So a 2 MB diff costs only what is on screen.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Generic, _TokenType, is_token_subtype
from pygments.util import ClassNotFound
from rich.style import Style
from rich.syntax import ANSI_DARK, ANSI_LIGHT, ANSISyntaxTheme

from .diffprepare import Prepared
from .diffwords import Span, changed_spans

CHUNK = 200  # lines highlighted together (the lexer's state carries across the lines of a chunk)
MAX_HIGHLIGHT = 4_000  # longer lines are not highlighted (a minified file, a data blob)

SyntaxSpans = list[tuple[int, int, Style]]

# Markdown headings and emphasis, which Rich's ANSI themes leave plain: a prompt is Markdown.
EMPHASIS: dict[_TokenType, Callable[[bool], Style]] = {
    Generic.Heading: lambda dark: Style(color="bright_blue" if dark else "blue", bold=True),
    Generic.Strong: lambda dark: Style(bold=True),
    Generic.Emph: lambda dark: Style(italic=True),
}


class LineMarks:
    """The syntax and changed words of each line of the diff `shown`, by file, hunk and line index."""

    def __init__(self, shown: Prepared) -> None:
        self.shown = shown
        self._syntax: dict[tuple[int, int, str, int, bool], list[SyntaxSpans]] = {}
        self._sides: dict[tuple[int, int], tuple[list[int], dict[str, list[int]]]] = {}
        self._words: dict[tuple[int, int, int], tuple[list[Span], list[Span]] | None] = {}

    def syntax(self, fi: int, hi: int, li: int, dark: bool) -> SyntaxSpans:
        """The line's syntax colours (for a dark or a light theme), as character ranges."""
        language = self.shown.languages[fi]
        if language is None:
            return []
        hunk = self.shown.diff.files[fi].hunks[hi]
        side = "-" if hunk.lines[li].kind == "-" else "+"
        place, sides = self._side(fi, hi)
        chunk = place[li] // CHUNK
        key = (fi, hi, side, chunk, dark)
        spans = self._syntax.get(key)
        if spans is None:
            texts = self.shown.display[fi][hi]
            lines = [texts[i] for i in sides[side][chunk * CHUNK : (chunk + 1) * CHUNK]]
            spans = self._syntax[key] = _highlight(language, lines, dark)
        return spans[place[li] - chunk * CHUNK]

    def words(self, fi: int, hi: int, li: int) -> list[Span]:
        """The words of a paired line that changed (none for a line without a partner)."""
        lines = self.shown.diff.files[fi].hunks[hi].lines
        line = lines[li]
        partner = line.partner
        if partner is None:
            return []
        old, new = (li, partner) if line.kind == "-" else (partner, li)
        key = (fi, hi, old)
        if key not in self._words:
            texts = self.shown.display[fi][hi]
            self._words[key] = changed_spans(texts[old], texts[new])
        found = self._words[key]
        if found is None:
            return []
        return found[0] if line.kind == "-" else found[1]

    def _side(self, fi: int, hi: int) -> tuple[list[int], dict[str, list[int]]]:
        """Each line's place in the text before ("-": context and removed lines) or after the
        change ("+": context and added lines), which is what gets highlighted."""
        key = (fi, hi)
        found = self._sides.get(key)
        if found is None:
            place: list[int] = []
            sides: dict[str, list[int]] = {"-": [], "+": []}
            for li, line in enumerate(self.shown.diff.files[fi].hunks[hi].lines):
                side = sides["-" if line.kind == "-" else "+"]
                place.append(len(side))
                side.append(li)
            found = self._sides[key] = (place, sides)
        return found


def _highlight(language: str, lines: list[str], dark: bool) -> list[SyntaxSpans]:
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
                style = _token_style(token, dark)
                if style:
                    out[row].append((column, column + len(part), style))
            column += len(part)
    return out


@cache
def _token_style(token: _TokenType, dark: bool) -> Style:
    found = _ansi_theme(dark).get_style_for_token(token)
    for kind, extra in EMPHASIS.items():
        if is_token_subtype(token, kind):
            found = found + extra(dark)
            break
    # Colour and text style only: the line's own background stays underneath.
    return Style(color=found.color, bold=found.bold, italic=found.italic, dim=found.dim)


@cache
def _lexer(language: str) -> Lexer | None:
    try:
        # stripnl=False: leading blank lines would otherwise vanish and shift every line.
        return get_lexer_by_name(language, stripnl=False, ensurenl=True)
    except ClassNotFound:
        return None


@cache
def _ansi_theme(dark: bool) -> ANSISyntaxTheme:
    return ANSISyntaxTheme(ANSI_DARK if dark else ANSI_LIGHT)
