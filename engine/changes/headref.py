"""HEAD read from `.git` itself, where its layout is the plain one: what `git rev-parse HEAD` would
say, without a git process (checked after every stage whose hooks changed nothing)."""

from __future__ import annotations

import re
from pathlib import Path

_SHA = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object names


def head_from_files(git_dir: Path) -> str | None:
    """HEAD as `git rev-parse HEAD` resolves it, or None for any layout this does not read (a
    `.git` file, reftable, a symbolic ref chain, an unborn branch): git decides those."""
    try:
        head = (git_dir / "HEAD").read_bytes().strip()
        if (git_dir / "reftable").exists():
            return None
    except OSError:  # .git is a file (a worktree, a submodule) or unreadable
        return None
    if _SHA.fullmatch(head):
        return head.decode()
    if not head.startswith(b"ref: "):
        return None
    ref = head[5:].strip()
    if not ref.startswith(b"refs/") or b".." in ref.split(b"/"):
        return None
    try:
        value = (git_dir / ref.decode("utf-8")).read_bytes().strip()
    except FileNotFoundError:
        value = None
    except (OSError, UnicodeDecodeError):
        return None
    if value is not None:
        return value.decode() if _SHA.fullmatch(value) else None
    try:
        packed = (git_dir / "packed-refs").read_bytes()
    except OSError:
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(b" ")
        if name == ref and _SHA.fullmatch(sha):
            return sha.decode()
    return None
