"""Workspaces written file by file for the tests that build their own (others copy `evolve init`'s)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

Files = Mapping[str, str | tuple[str, int]]
"""Path relative to the workspace -> its text, or (text, mode)."""

EXECUTABLE_DIRS = ("hooks", "tests")


def write_file(path: Path, text: str, mode: int = 0o644) -> Path:
    """`text` in `path` (its directories made) with `mode`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def make_ws(tmp_path: Path, files: Files | None = None) -> Path:
    """`tmp_path/ws` with hooks/ (made even when empty) and `files`; those under hooks/ and tests/
    are executable (0o755) unless their mode says otherwise, the others 0o644."""
    ws = tmp_path / "ws"
    (ws / "hooks").mkdir(parents=True, exist_ok=True)
    for name, content in (files or {}).items():
        if isinstance(content, tuple):
            text, mode = content
        else:
            text, mode = content, 0o755 if name.split("/", 1)[0] in EXECUTABLE_DIRS else 0o644
        write_file(ws / name, text, mode)
    return ws
