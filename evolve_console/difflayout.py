"""The rows of a diff pane at one width and mode: the head, the notes, each file's title and hunk
headers, and each line, unified or side by side, with the rows it takes when it wraps. Built once
per width and mode (counting each line's rows, not drawing them); the pane draws from it only the
rows on screen."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from rich.console import Console
from rich.text import Text

from .diffmodel import FileDiff
from .diffprepare import Prepared, row_starts, suffix, suffix_len

MIN_SPLIT = 100  # columns side by side needs: two halves of about 50

Item = tuple[Any, ...]  # one entry of the layout: a kind letter, then what it draws (see Layout)


@dataclass
class Layout:
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


def too_narrow(width: int) -> str:
    """The note shown when side by side is asked for and the pane is `width` columns wide."""
    return (
        f"side by side needs {MIN_SPLIT} columns; this pane has {width} "
        "(w: the full width, or a wider terminal)"
    )


def build_layout(
    width: int,
    *,
    head: Text,
    notes: list[str],
    split: bool,
    empty: str,
    shown: Prepared,
    whole: bool,
    console: Console,
) -> Layout:
    """The rows of `head`, `notes` and the diff `shown` (`whole`: one file whole, without hunk
    headers) at `width`; side by side when `split` is asked for and the width allows it, else
    with a note saying why not; `empty` when the diff has no file."""
    items: list[Item] = []
    heights: list[int] = []
    diff = shown.diff

    def note(text: str, style: str) -> None:
        for row in Text(text).wrap(console, width, overflow="fold") if text else [Text()]:
            items.append(("n", row.plain, style))
            heights.append(1)

    for row in head.wrap(console, width, overflow="fold"):
        items.append(("h", row))
        heights.append(1)
    note("", "dim")
    side_by_side = split and width >= MIN_SPLIT
    for text in notes:
        note(text, "notice")
    if split and not side_by_side:
        note(too_narrow(width), "notice")
    if diff.empty:
        note(empty, "dim")
    digits = len(
        str(
            max(
                [1]
                + [h.old_start + h.old_count for f in diff.files for h in f.hunks]
                + [h.new_start + h.new_count for f in diff.files for h in f.hunks]
            )
        )
    )
    unified_text = max(width - (2 * digits + 4), 8)
    half = (width - 1) // 2
    left_text = max(half - (digits + 3), 4)
    for fi, file in enumerate(diff.files):
        items.append(("f", fi))
        heights.append(1)
        for text in file_notes(file):
            note(text, "dim")
        for hi, hunk in enumerate(file.hunks):
            lines = hunk.lines
            if not whole:
                items.append(("@", fi, hi))
                heights.append(1)
            if side_by_side:
                each = _heights(shown, fi, hi, left_text)
                rows = hunk.rows()
                items.extend([("r", fi, hi, left, right) for left, right in rows])
                heights.extend(
                    [max(1 if a is None else each[a], 1 if b is None else each[b]) for a, b in rows]
                )
            else:
                items.extend([("l", fi, hi, li) for li in range(len(lines))])
                heights.extend(_heights(shown, fi, hi, unified_text))
    if diff.omitted:
        note(f"… {diff.omitted:,} more diff lines not shown", "notice")
    starts = list(accumulate(heights, initial=0))
    total = starts.pop()
    return Layout(width, side_by_side, items, starts, total, digits)


def _heights(shown: Prepared, fi: int, hi: int, width: int) -> list[int]:
    """How many rows each line of a hunk takes at `width` cells of text."""
    texts = shown.display[fi][hi]
    out = [1 if c <= width else len(row_starts(texts[i], width)) for i, c in enumerate(shown.cells[fi][hi])]
    for li in shown.irregular[fi][hi]:
        out[li] = _height(shown, fi, hi, li, width)
    return out


def _height(shown: Prepared, fi: int, hi: int, li: int, width: int) -> int:
    """How many rows the line takes at `width` cells of text (as the pane cuts it, its marks included)."""
    line = shown.diff.files[fi].hunks[hi].lines[li]
    if shown.cells[fi][hi][li] + suffix_len(line) <= width:
        return 1
    return len(row_starts(shown.display[fi][hi][li] + suffix(line), width))


def file_notes(file: FileDiff) -> list[str]:
    """What a file's title does not say: binary, its mode, a rename's similarity, header lines."""
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


def item_key(item: Item) -> tuple[Any, ...] | None:
    """What an item shows, the same in both modes: a line (by file, hunk, index) or a file."""
    if item[0] == "l":
        return ("line", item[1], item[2], item[3])
    if item[0] == "r":
        return ("line", item[1], item[2], item[3] if item[3] is not None else item[4])
    if item[0] in ("f", "@"):
        return (item[0], *item[1:])
    return None
