"""The words that changed between a removed line and the added line that replaced it (a pair of
`diffmodel`), as character ranges of each, for the diff view to mark. Plain Python, tested on
plain strings. Work is bounded: only the part of a pair that differs is compared, up to
`MAX_WORD_TOKENS` tokens.
"""

from __future__ import annotations

import difflib
import re

MAX_WORD_TOKENS = 2_000  # tokens of a pair's differing middle compared word by word; beyond: all of it
MIN_COMMON = 0.3  # a pair sharing less than this share of its non-blank characters is not word-marked

Span = tuple[int, int]  # [start, end) character offsets in a line's text

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_WORD = re.compile(r"\w")


def changed_spans(old: str, new: str) -> tuple[list[Span], list[Span]] | None:
    """What changed between a removed line and the added line paired with it, word by word: the
    character ranges of `old` that went and of `new` that came. None when the two have too little
    in common for marks to help: the whole line is then the change."""
    if old == new:
        return [], []
    # Compare only the middle that differs, widened to whole words at both ends.
    start = _common_prefix(old, new)
    while start > 0 and _is_word(old, start - 1) and (_is_word(old, start) or _is_word(new, start)):
        start -= 1
    suffix = _common_suffix(old[start:], new[start:])
    while (
        suffix > 0
        and _is_word(old, len(old) - suffix)
        and (_is_word(old, len(old) - suffix - 1) or _is_word(new, len(new) - suffix - 1))
    ):
        suffix -= 1
    end_old, end_new = len(old) - suffix, len(new) - suffix
    old_mid, new_mid = old[start:end_old], new[start:end_new]
    old_tokens = [(m.start() + start, m.end() + start) for m in _TOKEN.finditer(old_mid)]
    new_tokens = [(m.start() + start, m.end() + start) for m in _TOKEN.finditer(new_mid)]
    if len(old_tokens) > MAX_WORD_TOKENS or len(new_tokens) > MAX_WORD_TOKENS:
        old_spans = [(start, end_old)] if end_old > start else []
        new_spans = [(start, end_new)] if end_new > start else []
    else:
        matcher = difflib.SequenceMatcher(
            None, [old[a:b] for a, b in old_tokens], [new[a:b] for a, b in new_tokens], autojunk=False
        )
        old_spans, new_spans = [], []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            if i2 > i1:
                old_spans.append((old_tokens[i1][0], old_tokens[i2 - 1][1]))
            if j2 > j1:
                new_spans.append((new_tokens[j1][0], new_tokens[j2 - 1][1]))
        old_spans, new_spans = _merged(old, old_spans), _merged(new, new_spans)
    if _common_share(old, old_spans, new, new_spans) < MIN_COMMON:
        return None
    return old_spans, new_spans


def _is_word(text: str, i: int) -> bool:
    return 0 <= i < len(text) and _WORD.match(text[i]) is not None


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by halving (string comparisons run in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _merged(text: str, spans: list[Span]) -> list[Span]:
    """Spans separated only by blanks become one: "foo bar" -> "baz qux" marks each side whole."""
    out: list[Span] = []
    for span in spans:
        if out and not text[out[-1][1] : span[0]].strip():
            out[-1] = (out[-1][0], span[1])
        else:
            out.append(span)
    return out


def _common_share(old: str, old_spans: list[Span], new: str, new_spans: list[Span]) -> float:
    """The share of the longer line's non-blank characters that the two lines have in common."""

    def unchanged(text: str, spans: list[Span]) -> int:
        kept, at = 0, 0
        for a, b in spans:
            kept += len(text[at:a]) - _blanks(text[at:a])
            at = b
        return kept + len(text[at:]) - _blanks(text[at:])

    total = max(len(old) - _blanks(old), len(new) - _blanks(new))
    if total == 0:
        return 1.0
    return min(unchanged(old, old_spans), unchanged(new, new_spans)) / total


def _blanks(text: str) -> int:
    return len(text) - len("".join(text.split()))
