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

from engine.replay.clock import Window, clock_tokens

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
        # Words are matched by themselves, not by the white space after them: "stats\n" and
        # "stats " are the same word (compare marks the space that changed). Punctuation keeps its
        # space: ". " ends a sentence that ".\n" ends a paragraph with.
        words = SequenceMatcher(
            None, [_key(t) for t in a_tokens[ti1:ti2]], [_key(t) for t in b_tokens[tj1:tj2]], autojunk=False
        )
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
    a_tokens, b_tokens, ops = opcodes(first, again)
    found = Volatile()
    for tag, i1, i2, j1, _j2 in ops:
        if tag == "equal":
            # the same words; where the space after one differs, that word varies by itself
            found.positions.update(i1 + k for k in range(i2 - i1) if a_tokens[i1 + k] != b_tokens[j1 + k])
            continue
        found.positions.update(range(i1, i2))
        if i1 == i2:
            found.gaps.add(i1)
    return found


def compare(
    before: str, after: str, noise: Volatile | None = None, clock: Window | None = None
) -> tuple[bool, list[list[str]]]:
    """Whether `after` differs from `before` beyond `noise`, and the segments that show it. `clock`:
    when the runs compared happened; a difference made only of moments then (a time, a date, an
    epoch number: engine.replay.clock) is volatile too, as the clock is."""
    noise = noise or Volatile()
    a_tokens, b_tokens, ops = opcodes(before, after)
    a_clock, b_clock = clock_tokens(a_tokens, clock), clock_tokens(b_tokens, clock)

    def volatile_op(i1: int, i2: int, j1: int, j2: int) -> bool:
        if noise.covers(i1, i2):
            return True
        return (
            (i1 < i2 or j1 < j2)
            and all(i in a_clock for i in range(i1, i2))
            and all(j in b_clock for j in range(j1, j2))
        )

    marked = [
        ("=" if tag == "equal" else "~" if volatile_op(i1, i2, j1, j2) else "!", i1, i2, j1, j2)
        for tag, i1, i2, j1, j2 in ops
    ]
    marked = _readable(marked, a_tokens, b_tokens)
    segments: list[list[str]] = []
    spaced = False  # a word whose white space after it changed
    for kind, i1, i2, j1, j2 in marked:
        if kind == "=":
            for k in range(i2 - i1):
                a, b = a_tokens[i1 + k], b_tokens[j1 + k]
                if a == b:
                    _add(segments, "=", b)
                elif noise.covers(i1 + k, i1 + k + 1):
                    _add(segments, "~", b)
                else:
                    spaced = True
                    _same_word(segments, a, b)
        elif kind == "~":
            _add(segments, "~", "".join(b_tokens[j1:j2]))
        else:
            _changed(segments, a_tokens[i1:i2], b_tokens[j1:j2])
    return spaced or any(kind == "!" for kind, *_ in marked), segments


def _changed(segments: list[list[str]], old: list[str], new: list[str]) -> None:
    """A change, as segments: the words it keeps at either end (a word whose white space after it
    changed, "stats\n" for "stats ") stay unchanged words, so that no word is shown removed and added
    as it was; only what really differs is removed and added."""
    head = 0
    while head < min(len(old), len(new)) and _word(old[head]) and _word(old[head]) == _word(new[head]):
        head += 1
    tail = 0
    while (
        tail < min(len(old), len(new)) - head
        and _word(old[-1 - tail])
        and _word(old[-1 - tail]) == _word(new[-1 - tail])
    ):
        tail += 1
    for a, b in zip(old[:head], new[:head], strict=True):
        _same_word(segments, a, b)
    old_mid, new_mid = "".join(old[head : len(old) - tail]), "".join(new[head : len(new) - tail])
    same = _common_space(old_mid, new_mid)  # "plainly " for "tersely ": the space is no change
    _add(segments, "-", old_mid[: len(old_mid) - len(same)])
    _add(segments, "+", new_mid[: len(new_mid) - len(same)])
    _add(segments, "=", same)
    for a, b in zip(old[len(old) - tail :], new[len(new) - tail :], strict=True):
        _same_word(segments, a, b)


def _word(token: str) -> str:
    return token.rstrip()


def _key(token: str) -> str:
    """What a token is matched by: a word without the white space after it; anything else whole."""
    return _word(token) if token[:1].isalnum() or token[:1] == "_" else token


def _same_word(segments: list[list[str]], old: str, new: str) -> None:
    """One word both versions have, its white space changed: the word unchanged, the space marked."""
    word = _word(new)
    _add(segments, "=", word)
    space_old, space_new = old[len(word) :], new[len(word) :]
    if space_old != space_new:
        _add(segments, "-", space_old)
        _add(segments, "+", space_new)
    else:
        _add(segments, "=", space_new)


def _readable(ops: list[Opcode], a: list[str], b: list[str]) -> list[Opcode]:
    """Changes joined across a shared word or two between them (a rewritten sentence that happens to
    keep "you" and "your" reads as one change): an unchanged stretch between two changes goes into
    them when it is shorter than both changes (much as diff-match-patch's semantic cleanup does).
    Only changes that replace words on both sides are joined: a word dropped before the stretch and
    one added after it would otherwise show the stretch removed and added again ("-x notes_stats",
    "+notes_stats y"), as if it had changed."""

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
            if not (_both_sides(left) and _both_sides(right)):
                continue
            if size(mid) < min(size(left), size(right)):
                out[k - 1 : k + 2] = [("!", left[1], right[2], left[3], right[4])]
                merged = True
                break
    return out


def _both_sides(op: Opcode) -> bool:
    """Whether a change removes something and adds something (a replacement)."""
    _, i1, i2, j1, j2 = op
    return i1 < i2 and j1 < j2


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
