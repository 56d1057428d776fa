"""A failed run's own words: the last line of the error it printed (`TypeError: …`), not only how it
ended (`exit 1`), and where in the workspace a traceback says it happened."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

LIMIT: Final = 300  # characters of the line kept

# The line an uncaught exception ends with: Python's `TypeError: …`, `json.decoder.JSONDecodeError:
# …`, `KeyError: 'x'`, JavaScript's `TypeError: …` or `Error: …`, Go's `panic: …`.
_EXCEPTION: Final = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure)|Error|panic)(?::\s|$)"
)
_FRAME: Final = re.compile(r'File "([^"]+)", line (\d+)')


def error_line(stderr: str, error: str | None) -> str:
    """What the run said of its failure: the last exception line of its stderr, else its last
    non-empty line of stderr, else the engine's reason (`exit 1`, `timeout: …`)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION.match(line):
            return _bounded(line)
    if lines:
        return _bounded(lines[-1])
    return _bounded(error or "failed")


def where(stderr: str, root: Path) -> str | None:
    """The last frame of a traceback that is a file of the workspace, as `hooks/notes.py:42`."""
    base = str(root.resolve()) + "/"
    found = None
    for path, line in _FRAME.findall(stderr):
        if path.startswith(base):
            found = f"{path[len(base) :]}:{line}"
        elif not path.startswith("/") and not path.startswith("<"):
            found = f"{path}:{line}"  # a path relative to the hook's working directory, the root
    return found


def _bounded(line: str) -> str:
    return line if len(line) <= LIMIT else line[: LIMIT - 1] + "…"
