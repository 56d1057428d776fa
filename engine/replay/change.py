"""What a replay compares: a commit, or a pending change, as two overlays of the workspace as it is
now (the change's files as they were before it, and as it makes them), so that only the change
differs between the two versions."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.changes.errors import ChangeError
from engine.changes.gitstore import GitStore
from engine.protocol.records import PendingChange
from engine.replay.version import FileVersion, Overlay, ReplayError


@dataclass
class Change:
    """What a replay compares: the workspace with `before` laid over it, and with `after`."""

    kind: str  # commit | pending
    target: str  # the commit's sha, or the pending change's id
    title: str
    files: list[str]
    before: Overlay
    after: Overlay
    before_text: str
    after_text: str
    warnings: list[str] = field(default_factory=list)


def of_commit(root: Path, git: GitStore, rev: str) -> Change:
    sha = git.commit_of(rev)
    if not sha:
        raise ReplayError(f"no commit {rev!r} in {root}")
    files = git.files_changed(sha)
    if not files:
        raise ReplayError(f"commit {sha[:10]} changes no file: nothing to replay")
    parent = git.first_parent(sha)
    before: Overlay = {f: _file_at(git, parent, f) if parent else None for f in files}
    after: Overlay = {f: _file_at(git, sha, f) for f in files}
    subject = git.subject(sha) or sha[:10]
    one = len(files) == 1
    what = files[0] if one else f"the {len(files)} files it changed"
    return Change(
        kind="commit",
        target=sha,
        title=subject,
        files=files,
        before=before,
        after=after,
        before_text=f"the workspace now, with {what} as before {sha[:10]}"
        + ("" if parent else f" (absent: {sha[:10]} is the first commit)"),
        after_text=f"the workspace now, with {what} as {sha[:10]} made {'it' if one else 'them'}",
    )


def _file_at(git: GitStore, rev: str, path: str) -> FileVersion | None:
    found = git.file_at(rev, path)
    return FileVersion(*found) if found is not None else None


def of_pending(root: Path, pending: Callable[[str], PendingChange], pending_id: str) -> Change:
    try:
        item = pending(pending_id)
    except ChangeError as exc:
        raise ReplayError(str(exc)) from exc
    if item.status != "pending":
        hint = f"; replay its commit {item.commit[:10]} instead" if item.commit else ""
        raise ReplayError(
            f"held change {pending_id} was already {item.status}, so there is no decision left for a "
            f"replay to inform{hint}"
        )
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / item.file)
    if os.path.commonpath([real_root, real]) != real_root:
        raise ReplayError(f"{item.file} leads out of the workspace; cannot replay")
    rel = os.path.relpath(real, real_root)
    try:
        st = os.stat(real)
        current: bytes | None = Path(real).read_bytes()
        mode = 0o100755 if st.st_mode & 0o111 else 0o100644
    except OSError:
        current, mode = None, 0o100644
    if item.hook is not None:
        mode = 0o100755  # approval installs a hook executable
    content = (item.content or "").encode("utf-8", "surrogateescape")
    warnings = []
    if hashlib.sha256(current or b"").hexdigest() != item.base_sha256:
        warnings.append(
            f"{item.file} changed after the agent proposed this change; the replay compares "
            "with the file as it is now"
        )
    return Change(
        kind="pending",
        target=item.id,
        title=item.message,
        files=[rel],
        before={},
        after={rel: FileVersion(mode, content)},
        before_text="the workspace now",
        after_text=f"the workspace now, with {rel} as the pending change proposes",
        warnings=warnings,
    )
