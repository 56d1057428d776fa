"""Path safety for tools that take a file name from the agent (stricter than the original host: symbolic links are resolved too).

A name is refused when it is empty, contains a NUL byte, is absolute, escapes the base directory
with `..`, or resolves (through symbolic links) to a place outside the base directory.
"""

from __future__ import annotations

import os
from pathlib import Path


class PathRefused(ValueError):
    pass


def safe_path(base: Path, name: str, kind: str) -> Path:
    """`base / name` when it stays inside `base`; otherwise raises `PathRefused("invalid <kind> path: <name>")`."""
    refused = PathRefused(f"invalid {kind} path: {name}")
    if not name or "\0" in name or os.path.isabs(name):
        raise refused
    joined = os.path.normpath(os.path.join(base, name))
    base_norm = os.path.normpath(base)
    if joined == base_norm or not joined.startswith(base_norm + os.sep):
        raise refused
    real_base = os.path.realpath(base)
    real = os.path.realpath(joined)
    if real != real_base and not real.startswith(real_base + os.sep):
        raise refused
    return Path(joined)
