"""A version of the workspace in a throwaway directory: the whole tree of a commit, as the history has
it (never the live workspace's files with some put back), and for a pending change that commit with
the held file in place. The copy has no `.git` and no `state/`: its own engine makes both."""

from __future__ import annotations

import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.changes.gitstore import GitError, GitStore


class CopyError(RuntimeError):
    """The version cannot be copied; the message says why."""


@dataclass(frozen=True)
class Held:
    """A file as a pending change proposes it."""

    path: str  # workspace-relative
    content: bytes
    executable: bool = False


@dataclass(frozen=True)
class VersionSpec:
    """One version of the workspace: a commit, and the files laid over it."""

    commit: str
    held: list[Held] = field(default_factory=list)
    describe: str = ""  # what it is, for people: "the workspace at 3f2a1b4c5d"


def make_copy(git: GitStore, version: VersionSpec, target: Path) -> None:
    """The version's files in `target` (created). Nothing is ever written outside it: a link in the
    tree that leads out of the copy, or a held path that does, is refused."""
    buffer = io.BytesIO()
    try:
        git.archive(version.commit, buffer)
    except GitError as exc:
        raise CopyError(str(exc)) from exc
    buffer.seek(0)
    target.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(fileobj=buffer, mode="r:") as tar:
            tar.extractall(target, filter="data")  # no absolute paths, no links out of the copy
    except (tarfile.TarError, OSError) as exc:
        raise CopyError(f"cannot copy {version.commit[:10]}: {exc}") from exc
    real = os.path.realpath(target)
    for held in version.held:
        path = target / held.path
        if os.path.isabs(held.path) or ".." in Path(held.path).parts:
            raise CopyError(f"{held.path}: not a path inside the workspace")
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.commonpath([real, os.path.realpath(path.parent)]) != real:
            raise CopyError(f"{held.path}: its folder is a link that leads out of the workspace")
        if path.is_symlink():
            path.unlink()
        path.write_bytes(held.content)
        os.chmod(path, 0o755 if held.executable else 0o644)
