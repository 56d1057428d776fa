"""What a test run may not do to the checkout: create files in it.

`created(before, after)` compares two listings of the checkout (`listing()`), taken when the run starts
and when it ends; tests/conftest.py fails the run naming what appeared. Not listed: what is the tools'
by design (.git, .venv, .cache, the caches of pytest, mypy and ruff, the egg-info of the editable
install).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.environment import REPO

IGNORED = {".git", ".venv", ".cache", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules"}


def _ignored(name: str) -> bool:
    return name in IGNORED or name.endswith(".egg-info")


def listing(root: Path = REPO) -> set[str]:
    """Every file and directory of the checkout (relative, with a / after directories), but IGNORED."""
    found: set[str] = set()
    for top, dirs, files in os.walk(root):
        rel = os.path.relpath(top, root)
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if not (prefix == "" and _ignored(d)) and d != ".git"]
        found.update(prefix + d + "/" for d in dirs)
        found.update(prefix + f for f in files if not (prefix == "" and _ignored(f)))
    return found


def created(before: set[str], after: set[str]) -> list[str]:
    """What appeared between two listings: a new directory stands for everything under it."""
    new = sorted(after - before)
    return [p for p in new if not any(p != q and p.startswith(q) for q in new if q.endswith("/"))]
