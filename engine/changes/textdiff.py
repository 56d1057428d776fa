"""A file's two versions as a unified diff, as git shows it."""

from __future__ import annotations

import difflib


def lines_of(text: str) -> list[str]:
    """The lines of `text` as git counts them (split at "\n" only), each with its line end."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def unified_diff(before: str, after: str, file: str) -> str:
    """`before` to `after` as git shows it, a last line without a newline marked as git marks it (or
    it would run into the next line)."""
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(lines_of(before), lines_of(after), f"a/{file}", f"b/{file}")
    )
