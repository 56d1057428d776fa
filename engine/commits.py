"""The engine's commits: one workspace change at a time (the write lock), each committed with evolve's
trailers and announced; what hooks change during stages is committed in the background, coalesced; and
what nobody in the engine changed (a person's edit) is committed apart, as an external change."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from .activity import Activity
from .bus import EventBus
from .gitstore import Commit, GitError, GitStore
from .locks import WorkspaceLock
from .protocol.records import CommitInfo, Provenance
from .provenance import PROVENANCE_REF, encode

log = logging.getLogger("evolve.commits")


class CommitFailed(RuntimeError):
    """git refused the commit; the message says why. The change stays on disk, uncommitted."""


class Commits:
    def __init__(
        self,
        git: GitStore,
        lock: WorkspaceLock,
        bus: EventBus,
        activity: Activity,
        warn: Callable[[str, str], None],
    ) -> None:
        self.git = git
        self.lock = lock
        self.activity = activity
        self._bus = bus
        self._warn = warn
        self._settle_task: asyncio.Task[None] | None = None
        self._settle_stages: set[str] = set()
        self._settle_sessions: set[str] = set()
        self._settle_since: float | None = None

    async def annotate(self, sha: str, provenance: Provenance) -> None:
        """Keep why and how a change was made beside its commit (a git note), so that it survives
        restarts and travels with the repository."""
        try:
            await asyncio.to_thread(self.git.add_note, PROVENANCE_REF, sha, encode(provenance))
        except GitError as exc:
            self._warn("git", f"cannot record the provenance of {sha[:10]}: {exc}")

    def announce(self, commit: Commit) -> None:
        self._bus.publish(CommitInfo(commit.sha, commit.message, list(commit.files)))

    async def commit(
        self, message: str, trailers: dict[str, str | None], paths: list[str] | None = None
    ) -> Commit | None:
        """Commit `paths` (everything uncommitted when None) with evolve's trailers. The caller holds
        the write lock. None when there was nothing to commit; CommitFailed when git refused."""
        try:
            commit = await asyncio.to_thread(self.git.commit, message, trailers, paths)
        except GitError as exc:
            self._warn("git", str(exc))
            raise CommitFailed(str(exc)) from exc
        if commit:
            self.announce(commit)
        return commit

    async def commit_quietly(
        self, message: str, trailers: dict[str, str | None], paths: list[str] | None = None
    ) -> Commit | None:
        """`commit`, for callers with nobody to tell of a failure beyond the warning it publishes."""
        try:
            return await self.commit(message, trailers, paths)
        except CommitFailed:
            return None

    async def commit_external(self) -> Commit | None:
        """Commit changes nobody in the engine made (a person editing a hook), separately."""
        async with self.lock:
            files = await asyncio.to_thread(self.git.dirty_files)
            if not files:
                return None
            shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
            return await self.commit_quietly(f"external change: {shown}", {"Origin": "external"})

    def settle(self, stage: str, session: str | None, started_at: float) -> None:
        """Commit what hooks changed during a stage, coalesced with other stages, off the caller's path."""
        if stage == "discover":
            return
        self._settle_since = min(self._settle_since or started_at, started_at)
        self._settle_stages.add(stage)
        if session:
            self._settle_sessions.add(session)
        if self._settle_task is None or self._settle_task.done():
            self._settle_task = asyncio.create_task(self._settle_now())

    async def _settle_now(self) -> None:
        with self.activity.running():
            await asyncio.sleep(0)  # let stages finishing in the same tick join this commit
            stages, sessions = sorted(self._settle_stages), sorted(self._settle_sessions)
            since, self._settle_since = self._settle_since, None
            self._settle_stages, self._settle_sessions = set(), set()
            async with self.lock:
                # Only what changed since the stages began: an older hand edit stays for its own
                # external-change commit.
                files = await asyncio.to_thread(self.git.changed_after, (since or time.time()) - 0.05)
                if files:
                    await self.commit_quietly(
                        f"hooks changed files during {', '.join(stages)}",
                        {"Origin": "hook", "Stage": " ".join(stages), "Session": " ".join(sessions)},
                        files,
                    )

    async def close(self) -> None:
        """Wait for the last background commit."""
        if self._settle_task is not None:
            await asyncio.gather(self._settle_task, return_exceptions=True)
