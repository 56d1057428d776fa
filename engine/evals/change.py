"""What behaviour checks compare: two versions of the workspace, from a commit (before: its first
parent, after: the commit), a pending change (before: HEAD, after: HEAD with the held file) or a
proposal of the agent's (the same, for a file it has not yet proposed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.changes.errors import ChangeError
from engine.changes.gitstore import GitStore
from engine.evals.copies import Held, VersionSpec
from engine.protocol.records import PendingChange, new_id


class EvalError(RuntimeError):
    """Behaviour checks that cannot run; the message says why and what to do."""


@dataclass
class Change:
    """What an eval compares: two versions of the workspace."""

    kind: str  # commit | pending | proposal
    target: str  # the commit's sha, the pending change's id, a proposal's id
    title: str
    files: list[str]
    before: VersionSpec
    after: VersionSpec
    installed_at: float | None = None  # a commit's time: the sessions it reaches are those active since
    warnings: list[str] = field(default_factory=list)


def of_commit(root: Path, git: GitStore, rev: str) -> Change:
    sha = git.commit_of(rev)
    if not sha:
        raise EvalError(f"no commit {rev!r} in {root}")
    parent = git.first_parent(sha)
    if parent is None:
        raise EvalError(f"{sha[:10]} is the first commit: there is no version before it to compare with")
    commits = {c["sha"]: c for c in git.log(1000)}
    at = commits.get(sha, {}).get("time")
    return Change(
        kind="commit",
        target=sha,
        title=git.subject(sha) or sha[:10],
        files=git.files_changed(sha),
        before=VersionSpec(parent, describe=f"the workspace at {parent[:10]} (before {sha[:10]})"),
        after=VersionSpec(sha, describe=f"the workspace at {sha[:10]}"),
        installed_at=float(at) if isinstance(at, int) else None,
    )


def of_pending(root: Path, git: GitStore, pending: Callable[[str], PendingChange], pending_id: str) -> Change:
    try:
        item = pending(pending_id)
    except ChangeError as exc:
        raise EvalError(str(exc)) from exc
    if item.status != "pending":
        hint = f"; check its commit {item.commit[:10]} instead" if item.commit else ""
        raise EvalError(f"change {pending_id} was already {item.status}{hint}")
    change = _proposed(
        root, git, item.file, (item.content or "").encode("utf-8", "surrogateescape"), item.hook is not None
    )
    change.kind, change.target, change.title = "pending", item.id, item.message
    return change


def proposal(root: Path, git: GitStore, file: str, content: str) -> Change:
    """The workspace as committed, and with `file` as proposed (not yet held, nor written)."""
    change = _proposed(root, git, file, content.encode("utf-8", "surrogateescape"), file.startswith("hooks/"))
    change.target = new_id("prop")
    return change


def _proposed(root: Path, git: GitStore, file: str, content: bytes, executable: bool) -> Change:
    head = git.head()
    if head is None:
        raise EvalError(f"{root} has no commit yet: nothing to compare with")
    committed = git.committed_file(file)
    warnings = []
    if committed is not None:
        executable = executable or bool(committed[0] & 0o111)
    try:
        live = (root / file).read_bytes()
    except OSError:
        live = None
    if live is not None and committed is not None and live != committed[1]:
        warnings.append(f"{file} has changes not committed yet: both versions use the committed file")
    return Change(
        kind="proposal",
        target="",
        title=f"proposed {file}",
        files=[file],
        before=VersionSpec(head, describe=f"the workspace at {head[:10]}"),
        after=VersionSpec(
            head,
            [Held(file, content, executable)],
            describe=f"the workspace at {head[:10]}, with {file} as proposed",
        ),
        warnings=warnings,
    )
