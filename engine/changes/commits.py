"""The engine's commits: one workspace change at a time (the write lock), each committed with evolve's
trailers and announced; what hooks change during stages is committed in the background, coalesced
(what they change of the files that steer the agent goes through the gate, engine.gate); what
nobody in the engine changed (a person's edit) is committed apart, as an external change; and
history rewritten under the engine (a `git reset` by a hook or by hand) is noticed, reported and
recorded in the history itself."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from engine.changes.gate import Gate
from engine.changes.gitstore import Commit, GitError, GitStore
from engine.changes.intents import Intents
from engine.changes.provenance import PROVENANCE_REF, encode
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.protocol.records import CommitInfo, JSONDict, Provenance
from engine.tools.host import CallContext
from engine.workspace.locks import WorkspaceLock

log = logging.getLogger("evolve.commits")

REWRITTEN_REFS = "refs/evolve/rewritten"
"""Where the commits that a rewrite took out of the history are kept (one ref per rewrite)."""


class CommitFailed(RuntimeError):
    """git refused the commit; the message says why. The change stays on disk, uncommitted."""


class HeadMemory:
    """The last HEAD the engine knew, kept across restarts (`load`, `save`)."""

    def __init__(self, load: Callable[[], str | None], save: Callable[[str | None], object]) -> None:
        self.load = load
        self.save = save


class Commits:
    def __init__(
        self,
        *,
        git: GitStore,
        lock: WorkspaceLock,
        bus: EventBus,
        activity: Activity,
        warn: Callable[[str, str], None],
        gate: Gate | None = None,
        head: HeadMemory | None = None,
        record: Callable[[str, JSONDict], object] | None = None,
        intents: Intents | None = None,
    ) -> None:
        """`intents`: where a commit git refused is kept until it can be made (`state/intents/`)."""
        self.git = git
        self.lock = lock
        self.activity = activity
        self._bus = bus
        self._warn = warn
        self.gate = gate
        self._head = head
        self._record = record  # keeps an engine event in the journal
        self._known_head: str | None = head.load() if head is not None else None
        self._settle_task: asyncio.Task[None] | None = None
        self._settle_release: Callable[[], None] | None = None
        self._settle_stages: set[str] = set()
        self._settle_sessions: set[str] = set()
        self._settle_since: float | None = None
        self._intents = intents or Intents(git.root / "state" / "intents")
        self._retrying: asyncio.Task[None] | None = None

    async def annotate(self, sha: str, provenance: Provenance) -> None:
        """Keep why and how a change was made beside its commit (a git note), so that it survives
        restarts and travels with the repository."""
        try:
            await asyncio.to_thread(self.git.add_note, PROVENANCE_REF, sha, encode(provenance))
        except GitError as exc:
            self._warn("git", f"cannot record the provenance of {sha[:10]}: {exc}")

    def announce(self, commit: Commit) -> None:
        self._bus.publish(CommitInfo(commit.sha, commit.message, list(commit.files)))

    def report_git_notes(self) -> None:
        """Warn of what the git store did on its own (a stale lock it removed)."""
        for note in self.git.take_notes():
            self._warn("git", note)

    async def commit(
        self, message: str, trailers: dict[str, str | None], paths: list[str] | None = None
    ) -> Commit | None:
        """Commit `paths` (everything uncommitted when None) with evolve's trailers. The caller holds
        the write lock. None when there was nothing to commit; CommitFailed when git refused."""
        await self.check_history()
        try:
            commit = await asyncio.to_thread(self.git.commit, message, trailers, paths)
        except GitError as exc:
            self.report_git_notes()
            self._warn("git", str(exc))
            raise CommitFailed(str(exc)) from exc
        self.report_git_notes()
        if commit:
            self.announce(commit)
            await self._remember(commit.sha)
        return commit

    async def commit_quietly(
        self, message: str, trailers: dict[str, str | None], paths: list[str] | None = None
    ) -> Commit | None:
        """`commit`, for callers with nobody to tell of a failure beyond the warning it publishes."""
        try:
            return await self.commit(message, trailers, paths)
        except CommitFailed:
            return None

    async def commit_hook_changes(
        self,
        message: str,
        trailers: dict[str, str | None],
        paths: list[str] | None,
        during: str,
        ctx: CallContext,
    ) -> list[Commit]:
        """Commit what hooks changed (`paths`, or everything uncommitted when None) `during` some
        work: hooks, prompts, tests and config through the gate, the rest with `trailers`. The
        caller holds the write lock. Returns the commits made."""
        if paths is None:
            try:
                paths = await asyncio.to_thread(self.git.dirty_files)
            except GitError as exc:
                self._warn("git", str(exc))
                return []
        if not paths:
            await self.check_history(origin=str(trailers.get("Origin") or "hook"))
            return []
        made: list[Commit] = []
        ordinary = paths
        if self.gate is not None:
            screened = await self.gate.screen(paths, during, ctx)
            ordinary = screened.ordinary
            if screened.unvalidated:
                shown = ", ".join(screened.unvalidated)
                unvalidated = await self.commit_quietly(
                    f"unvalidated change by hooks during {during}: {shown}",
                    {**trailers, "Origin": "hook", "Unvalidated": " ".join(screened.unvalidated)},
                    screened.unvalidated,
                )
                if unvalidated:
                    made.append(unvalidated)
        if ordinary:
            commit = await self.commit_quietly(message, trailers, ordinary)
            if commit:
                made.append(commit)
        return made

    # ---- commits git refused, made as soon as it lets the engine --------------------------------

    def owe(self, message: str, trailers: dict[str, str | None], paths: list[str]) -> None:
        """git refused the commit of `paths` (a lock another program holds): keep it, with its
        message and trailers, and make it as soon as git lets the engine (tried again in the
        background, before any external change is committed, and at the next start), so that the
        change keeps its attribution instead of becoming a person's edit."""
        self._intents.begin("commit", {"message": message, "trailers": trailers, "files": paths})
        self._retry_later()

    def _retry_later(self) -> None:
        if self._retrying is None or self._retrying.done():
            with contextlib.suppress(RuntimeError):  # no event loop: the next start makes it
                self._retrying = asyncio.get_running_loop().create_task(self._retry_owed())

    async def pay_owed(self) -> list[Commit]:
        """Make the commits git refused earlier, oldest first. The caller holds the write lock."""
        made: list[Commit] = []
        for intent in await asyncio.to_thread(self._intents.left):
            if intent.kind != "commit":
                continue
            data = intent.data
            raw = data.get("trailers")
            trailers = (
                {str(k): None if v is None else str(v) for k, v in raw.items()}
                if isinstance(raw, dict)
                else {}
            )
            trailers["Deferred"] = "committed once git let the engine (the first attempt failed)"
            files = [str(f) for f in data.get("files") or []]
            dirty = set(await asyncio.to_thread(self.git.dirty_files))
            paths = [f for f in files if f in dirty]
            if paths:
                try:
                    commit = await self.commit(str(data.get("message")), trailers, paths)
                except CommitFailed:
                    self._retry_later()
                    return made  # still refused: kept for the next try
                if commit is not None:
                    made.append(commit)
            self._intents.done(intent)
        return made

    def owes(self) -> bool:
        return any(i.kind == "commit" for i in self._intents.left())

    def owed_files(self) -> set[str]:
        """The files of the commits git refused and the engine still owes: nobody's edit."""
        return {str(f) for i in self._intents.left() if i.kind == "commit" for f in i.data.get("files") or []}

    async def _retry_owed(self) -> None:
        delay = 1.0
        while True:
            await asyncio.sleep(delay)
            async with self.lock:
                await self.pay_owed()
            if not await asyncio.to_thread(self.owes):
                return
            delay = min(delay * 2, 30.0)

    async def commit_external(self) -> Commit | None:
        """Commit changes nobody in the engine made (a person editing a hook), separately (after
        the commits git refused earlier, which are the engine's)."""
        async with self.lock:
            await self.pay_owed()
            await self.check_history()
            files = await asyncio.to_thread(self.git.dirty_files)
            owed = await asyncio.to_thread(self.owed_files)
            mine = [f for f in files if f not in owed]
            if not mine:
                return None
            shown = ", ".join(mine[:5]) + (f" and {len(mine) - 5} more" if len(mine) > 5 else "")
            paths = mine if owed else None
            return await self.commit_quietly(f"external change: {shown}", {"Origin": "external"}, paths)

    def settle(self, stage: str, session: str | None, started_at: float) -> None:
        """Commit what hooks changed during a stage, coalesced with other stages, off the caller's path."""
        if stage == "discover":
            return
        self._settle_since = min(self._settle_since or started_at, started_at)
        self._settle_stages.add(stage)
        if session:
            self._settle_sessions.add(session)
        if self._settle_task is None or self._settle_task.done():
            # Busy from now on, not only once the task runs: the watcher must not take what the
            # hooks changed for a person's edit in between.
            self._settle_release = self.activity.hold()
            self._settle_task = asyncio.create_task(self._settle_now())

    async def _settle_now(self) -> None:
        release, self._settle_release = self._settle_release, None
        try:
            await asyncio.sleep(0)  # let stages finishing in the same tick join this commit
            stages, sessions = sorted(self._settle_stages), sorted(self._settle_sessions)
            since, self._settle_since = self._settle_since, None
            self._settle_stages, self._settle_sessions = set(), set()
            moment = (since or time.time()) - 0.05
            if await asyncio.to_thread(self._quiet_since, moment):
                return
            async with self.lock:
                # Only what changed since the stages began: an older hand edit stays for its own
                # external-change commit.
                files = await asyncio.to_thread(self.git.changed_after, moment)
                during = ", ".join(stages)
                await self.commit_hook_changes(
                    f"hooks changed files during {during}",
                    {"Origin": "hook", "Stage": " ".join(stages), "Session": " ".join(sessions)},
                    files,
                    during,
                    CallContext(session=sessions[0] if len(sessions) == 1 else None, origin="hook"),
                )
        finally:
            if release is not None:
                release()

    def _quiet_since(self, moment: float) -> bool:
        """Whether the end of a stage needs nothing: no file touched since `moment` and HEAD where
        the engine left it. The usual case, checked in one thread hop and without the write lock
        (it only reads); anything else takes the locked path, which looks again."""
        return not self.git.touched_since(moment) and self.git.head() == self._known_head

    # ---- history rewritten under the engine -------------------------------------------------

    async def check_history(self, origin: str = "external") -> None:
        """Notice a HEAD that moved other than forward since the engine last knew it (a `git
        reset`, an amend, a rebase): warn, record it in the journal, keep the commits it took out of
        the history under `refs/evolve/rewritten/`, and record it in the history with an empty
        commit, so that the change list says what happened. The caller holds the write lock."""
        head = await asyncio.to_thread(self.git.head)
        known = self._known_head
        if head == known:
            return
        if known is not None and head is not None:
            forward = await asyncio.to_thread(self.git.is_ancestor, known, head)
            if not forward:
                head = await self._rewritten(known, head, origin)
        await self._remember(head)

    async def _rewritten(self, known: str, head: str, origin: str) -> str:
        lost = await asyncio.to_thread(self.git.lost_commits, known, head)
        ref = f"{REWRITTEN_REFS}/{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{known[:10]}"
        kept = await asyncio.to_thread(self.git.keep, known, ref)
        listed = "; ".join(f"{sha[:10]} {subject}" for sha, subject in lost[:10])
        more = f" and {len(lost) - 10} more" if len(lost) > 10 else ""
        where = f", kept at {ref}" if kept else ""
        text = (
            f"history rewritten outside evolve: HEAD moved from {known[:10]} to {head[:10]}, "
            f"{len(lost)} commit(s) no longer in the history{where}" + (f": {listed}{more}" if lost else "")
        )
        self._warn("git", text)
        if self._record is not None:
            self._record(
                "history_rewritten",
                {
                    "from": known,
                    "to": head,
                    "origin": origin,
                    "kept_at": ref if kept else None,
                    "lost": [{"sha": sha, "subject": subject} for sha, subject in lost],
                },
            )
        try:
            mark = await asyncio.to_thread(
                self.git.mark,
                f"history rewritten: {len(lost)} commit(s) removed from the history",
                {
                    "Origin": origin,
                    "Rewritten-From": known,
                    "Kept-At": ref if kept else None,
                    "Removed": " ".join(sha for sha, _ in lost),
                },
            )
        except GitError as exc:
            self._warn("git", f"cannot record the rewrite in the history: {exc}")
            return head
        self.announce(mark)
        return mark.sha

    async def _remember(self, head: str | None) -> None:
        self._known_head = head
        if self._head is not None:
            await asyncio.to_thread(self._head.save, head)

    async def close(self) -> None:
        """Wait for the last background commit."""
        if self._settle_task is not None:
            await asyncio.gather(self._settle_task, return_exceptions=True)
        if self._retrying is not None:
            self._retrying.cancel()
            await asyncio.gather(self._retrying, return_exceptions=True)
