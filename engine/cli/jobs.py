"""What `evolve replay` and `evolve eval` share: the change they are about (a commit, or a pending
change read from the workspace's state), the progress line on a terminal, and a job on the running
engine followed until it ends (Ctrl-C cancels it there)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from engine.cli.client import EngineClient, EngineUnavailable
from engine.cli.common import UsageError
from engine.protocol.routes import Decodes

if TYPE_CHECKING:
    from engine.protocol.calls import Call
    from engine.protocol.records import PendingChange


class _Job(Decodes, Protocol):
    """What a job's record says of it (ReplayResult, EvalRun)."""

    state: str
    done: int
    total: int

    def to_dict(self) -> dict[str, Any]: ...


J = TypeVar("J", bound=_Job)


def read_pending(root: Path, pending_id: str) -> PendingChange:
    from engine.protocol.records import PendingChange

    path = root / "state" / "pending" / f"{os.path.basename(pending_id)}.json"
    try:
        return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        raise UsageError(f"no pending change {pending_id!r} in {root}") from None


def check_change(root: Path, ref: str, pending: bool) -> list[str]:
    """The commit or the pending change exists (and is still pending); the files it touches."""
    from engine.changes.gitstore import GitStore

    if pending:
        item = read_pending(root, ref)
        if item.status != "pending":
            raise UsageError(f"change {ref} was already {item.status}")
        return [item.file]
    git = GitStore(root)
    sha = git.commit_of(ref)
    if not sha:
        raise UsageError(f"no commit {ref!r} in {root}")
    return git.files_changed(sha)


class ProgressLine:
    """One line on stderr, written over as the job goes on (only on a terminal: a log or a pipe
    gets the result alone)."""

    def __init__(self, noun: str) -> None:
        self._noun = noun

    def show(self, done: int, total: int, message: str) -> None:
        if sys.stderr.isatty():
            figures = f" {done}/{total}" if total else ""
            sys.stderr.write(f"\r\x1b[K{self._noun}: {message}{figures}"[:200])
            sys.stderr.flush()

    def clear(self) -> None:
        if sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def follow(
    client: EngineClient,
    job_id: str,
    status: Callable[[str], Call[J]],
    cancel: Callable[[str], Call[Any]],
    line: ProgressLine,
    doing: str,
    every: float,
) -> dict[str, Any]:
    """The job's record once it has ended, polled every `every` seconds (`doing`: what the progress
    line says meanwhile). Ctrl-C cancels it on the engine and waits until it has stopped all it
    started, then goes on as an interrupt."""
    try:
        while True:
            found = client.send(status(job_id))
            if found.state != "running":
                return found.to_dict()
            line.show(found.done, found.total, doing)
            time.sleep(every)
    except KeyboardInterrupt:
        with contextlib.suppress(EngineUnavailable):
            client.send(cancel(job_id))
            while client.send(status(job_id)).state == "running":
                time.sleep(0.2)
        raise
    finally:
        line.clear()
