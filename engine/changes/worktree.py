"""What changed in the work tree: the paths git reports as uncommitted, and a quick look at the
tree's times that tells, without a git process, that nothing can have changed since a moment."""

from __future__ import annotations

import os
from pathlib import Path

# Entries a change check looks at before it leaves the answer to git (a tree that big costs git a
# scan too).
SCAN_LIMIT = 5000


def uncommitted(porcelain: str) -> list[str]:
    """The paths of `git status --porcelain -z` (a rename's source left out)."""
    files: list[str] = []
    entries = porcelain.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        files.append(entry[3:])
        if entry[0] in "RC":
            i += 1  # a rename is followed by its source path
    return files


def touched_since(root_path: Path, moment: float) -> bool:
    """Whether anything in the workspace (but .git and state/) may have been created, changed,
    renamed or deleted at or after `moment` (epoch seconds): a file's or a directory's
    modification or change time says so (a deletion or rename changes its directory's, a chmod
    a file's change time). Also True for a tree of more than SCAN_LIMIT entries."""
    threshold = int(moment * 1_000_000_000)
    root = str(root_path)
    try:
        st = os.lstat(root)
    except OSError:
        return True
    if max(st.st_mtime_ns, st.st_ctime_ns) >= threshold:
        return True
    pending, seen = [root], 0
    while pending:
        directory = pending.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            return True
        with entries:
            for entry in entries:
                if directory == root and entry.name in (".git", "state"):
                    continue
                seen += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    return True  # gone meanwhile: a change
                if seen > SCAN_LIMIT or max(st.st_mtime_ns, st.st_ctime_ns) >= threshold:
                    return True
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
    return False
