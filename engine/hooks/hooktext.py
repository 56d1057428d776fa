"""What a hook's file says without running it: which stage names its text names.

A hook dispatches on its one argument, the stage name, so the names it handles stand in its text as
string literals (`stage == "before_tool"`, `case "idle":`, `{"after_tool": ...}`) or as the labels of a
shell `case` (`before_stop)`, `idle|heartbeat)`). Reading the file has no effect on the hook, so this is
evidence the protocol choice may use at no cost to it (docs/hooks.md, "Two protocols"). A name in prose
(a comment that says the session goes idle) is not a literal and does not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

READ_LIMIT: Final = 1024 * 1024
"""Bytes of a hook file read: a script's text is far shorter, and a large binary says nothing."""

_LABELS: Final = re.compile(
    r"^[ \t]*\(?[ \t]*((?:[\"']?[A-Za-z_]+[\"']?[ \t]*\|[ \t]*)*[\"']?[A-Za-z_]+[\"']?)[ \t]*\)"
)
"""A line that starts with the labels of a shell `case` branch: `idle)`, `"idle" | before_stop)`."""


def named_stages(text: str, names: Iterable[str]) -> frozenset[str]:
    """Which of `names` the text names as a string literal or as a shell `case` label."""
    wanted = frozenset(names)
    if not wanted:
        return frozenset()
    alternatives = "|".join(sorted(map(re.escape, wanted)))
    quoted = re.compile(rf"([\"'`])({alternatives})\1")
    found = {m.group(2) for m in quoted.finditer(text)}
    for line in text.splitlines():
        labels = _LABELS.match(line)
        if labels is None:
            continue
        for label in labels.group(1).split("|"):
            name = label.strip().strip("\"'")
            if name in wanted:
                found.add(name)
    return frozenset(found)


def file_stages(path: Path, names: Iterable[str]) -> frozenset[str]:
    """The stage names among `names` that the file at `path` names (nothing when it cannot be read)."""
    try:
        with open(path, "rb") as file:
            data = file.read(READ_LIMIT)
    except OSError:
        return frozenset()
    return named_stages(data.decode("utf-8", errors="replace"), names)
