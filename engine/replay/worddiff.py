"""Word-level differences between two texts, with volatile words left out.

A replay compares what a hook produced with the version before a change and with the version after
it. Words that differ between two runs of the *same* version (a time, a random id) are volatile: a
difference made only of volatile words is noise, not a change. The result is a list of segments
`[op, text]` that reads as the "after" text with its changes marked: `=` unchanged, `-` removed,
`+` added, `~` volatile (differs from run to run anyway).

Texts are compared line by line first and word by word inside the lines that changed, so that a long
system prompt with one edited sentence costs little.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

# A word or a punctuation mark with the white space after it (white space alone only where a line
# starts with it), so that a changed phrase is one change, not words interleaved with the spaces
# the two versions happen to share.
TOKEN = re.compile(r"\s+|\w+\s*|[^\w\s]\s*")

Opcode = tuple[str, int, int, int, int]


def tokens(text: str) -> list[str]:
    """Words and single punctuation marks, each with the white space after it; joined they give
    `text` back."""
    return TOKEN.findall(text)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def opcodes(a: str, b: str) -> tuple[list[str], list[str], list[Opcode]]:
    """The tokens of `a` and `b` and the opcodes (as difflib's) that turn the first into the second."""
    a_lines, b_lines = _lines(a), _lines(b)
    a_line_tokens = [tokens(line) for line in a_lines]
    b_line_tokens = [tokens(line) for line in b_lines]
    a_start = _starts(a_line_tokens)
    b_start = _starts(b_line_tokens)
    a_tokens = [t for line in a_line_tokens for t in line]
    b_tokens = [t for line in b_line_tokens for t in line]
    out: list[Opcode] = []
    lines = SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        ti1, ti2, tj1, tj2 = a_start[i1], a_start[i2], b_start[j1], b_start[j2]
        if tag != "replace":
            out.append((tag, ti1, ti2, tj1, tj2))
            continue
        words = SequenceMatcher(None, a_tokens[ti1:ti2], b_tokens[tj1:tj2], autojunk=False)
        for wtag, wi1, wi2, wj1, wj2 in words.get_opcodes():
            out.append((wtag, ti1 + wi1, ti1 + wi2, tj1 + wj1, tj1 + wj2))
    return a_tokens, b_tokens, out


def _starts(lines: list[list[str]]) -> list[int]:
    """Token index where each line starts, plus the total at the end."""
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    return starts


@dataclass
class Volatile:
    """Where two runs of the same version differ, in the tokens of the first: whole tokens, and
    gaps (a token index before which the second run had something more)."""

    positions: set[int] = field(default_factory=set)
    gaps: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.positions or self.gaps)

    def covers(self, i1: int, i2: int) -> bool:
        """Whether a difference at tokens [i1, i2) of the first run is made of volatile parts only."""
        if i1 < i2:
            return all(i in self.positions for i in range(i1, i2))
        return i1 in self.gaps or i1 in self.positions or (i1 - 1) in self.positions


def volatile(first: str, again: str) -> Volatile:
    """What differs between two runs of the same version, as positions in `first`."""
    _, _, ops = opcodes(first, again)
    found = Volatile()
    for tag, i1, i2, _j1, _j2 in ops:
        if tag == "equal":
            continue
        found.positions.update(range(i1, i2))
        if i1 == i2:
            found.gaps.add(i1)
    return found


def compare(before: str, after: str, noise: Volatile | None = None) -> tuple[bool, list[list[str]]]:
    """Whether `after` differs from `before` beyond `noise`, and the segments that show it."""
    noise = noise or Volatile()
    a_tokens, b_tokens, ops = opcodes(before, after)
    marked = [
        ("=" if tag == "equal" else "~" if noise.covers(i1, i2) else "!", i1, i2, j1, j2)
        for tag, i1, i2, j1, j2 in ops
    ]
    marked = _readable(marked, a_tokens, b_tokens)
    segments: list[list[str]] = []
    for kind, i1, i2, j1, j2 in marked:
        old, new = "".join(a_tokens[i1:i2]), "".join(b_tokens[j1:j2])
        if kind == "=":
            _add(segments, "=", new)
        elif kind == "~":
            _add(segments, "~", new)
        else:
            same = _common_space(old, new)  # "plainly " for "tersely ": the space is no change
            _add(segments, "-", old[: len(old) - len(same)])
            _add(segments, "+", new[: len(new) - len(same)])
            _add(segments, "=", same)
    return any(kind == "!" for kind, *_ in marked), segments


def _readable(ops: list[Opcode], a: list[str], b: list[str]) -> list[Opcode]:
    """Changes joined across a shared word or two between them (a rewritten sentence that happens to
    keep "you" and "your" reads as one change): an unchanged stretch between two changes goes into
    them when it is shorter than both changes (much as diff-match-patch's semantic cleanup does)."""

    def size(op: Opcode) -> int:
        _, i1, i2, j1, j2 = op
        return max(sum(map(len, a[i1:i2])), sum(map(len, b[j1:j2])))

    out = list(ops)
    merged = True
    while merged:
        merged = False
        for k in range(1, len(out) - 1):
            left, mid, right = out[k - 1], out[k], out[k + 1]
            if (left[0], mid[0], right[0]) != ("!", "=", "!"):
                continue
            if size(mid) < min(size(left), size(right)):
                out[k - 1 : k + 2] = [("!", left[1], right[2], left[3], right[4])]
                merged = True
                break
    return out


def _common_space(old: str, new: str) -> str:
    """The white space both end with."""
    n = 0
    while n < min(len(old), len(new)) and old[-1 - n] == new[-1 - n] and old[-1 - n].isspace():
        n += 1
    return old[len(old) - n :]


def _add(segments: list[list[str]], op: str, text: str) -> None:
    if not text:
        return
    if segments and segments[-1][0] == op:
        segments[-1][1] += text
    else:
        segments.append([op, text])
