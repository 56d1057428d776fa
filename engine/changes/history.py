"""Self-modifications as the operator sees them: the workspace's git history with where each change
came from and whether it was reviewed, approvals (git notes), reverts (new commits); and, through
`Changes`' parts, with `"review": "gate"`, the agent's hook and prompt changes held until an operator
approves them (engine/changes/review.py), and the decisions a dead engine left half done
(engine/changes/unfinished.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any

from engine.changes.commits import Commits
from engine.changes.errors import ChangeError as ChangeError  # where its callers catch it
from engine.changes.gitstore import GitError, RevertConflict
from engine.changes.intents import Intents
from engine.changes.pending import PendingChanges
from engine.changes.provenance import PROVENANCE_REF, decode
from engine.changes.reach import reach_of, untested
from engine.changes.unfinished import Unfinished
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.protocol.records import (
    Change,
    ChangeDiff,
    FailingSince,
    FileAtChange,
    Impact,
    Reach,
    Reverted,
    ReviewRecorded,
    SessionInfo,
    StageResult,
)
from engine.workspace.layout import Workspace

log = logging.getLogger("evolve.changes")

REVIEWED_AREAS = ("hooks/", "prompts/", "config/", "tests/", "evals/")
"""Where a change alters what the agent is: an agent's or a hook's change there needs a review."""


def needs_review(origin: str, files: list[str]) -> bool:
    return origin in ("agent", "hook", "heartbeat") and any(f.startswith(REVIEWED_AREAS) for f in files)


def origin_of(trailers: dict[str, str]) -> str:
    """agent (a tool call of the agent), operator, heartbeat, hook, external, initial, or manual (a
    commit made with git directly, without evolve's trailers)."""
    origin = trailers.get("origin")
    if origin == "tool":
        return "agent"
    return origin or "manual"


def installed_at(change: Change) -> float:
    """When a change took effect: the moment its provenance was recorded, else its commit's second
    (git keeps whole seconds: a prompt frozen within that second counts as before it)."""
    if change.provenance is not None and change.provenance.at:
        return change.provenance.at
    return change.time + 1.0


class Changes(Unfinished):
    """The changes of a workspace, as the runtime, the API and the recovery at start hold them.

    More methods than the ~30 a class keeps to, on purpose: the history, the decisions about commits,
    the review gate and the finishing of decisions left half done share one state (the git store,
    the write lock, the intents, the held changes) and tell the same authors, so they are one object;
    its methods are written by job in three modules: the history and the decisions about commits
    here, the review gate in engine/changes/review.py (`ReviewGate`), the decisions an engine that
    died left half done in engine/changes/unfinished.py (`Unfinished`)."""

    def __init__(
        self,
        *,
        workspace: Workspace,
        commits: Commits,
        pending: PendingChanges,
        bus: EventBus,
        activity: Activity,
        files_changed: Callable[[list[str]], Awaitable[None]],
        tell: Callable[[str, str, str], Awaitable[object]],
        sessions: Callable[[], list[SessionInfo]],
        refresh: Callable[[str], bool],
        failing: Callable[[], dict[str, list[FailingSince]]] = dict,
        spawn: Callable[[Coroutine[Any, Any, Any], str], None] | None = None,
        answers: Callable[[float, float | None], list[StageResult]] = lambda since, until: [],
        intents: Intents | None = None,
    ) -> None:
        """`intents`: where decisions under way are written down (`state/intents/` by default)."""
        self._workspace = workspace
        self._commits = commits
        self._git = commits.git
        self._pending = pending  # the changes held for review
        self._bus = bus
        self._activity = activity
        self._files_changed = files_changed  # hooks, prompts or config changed: reload them
        self._tell = tell  # (session, message, change): a notification to the session behind a change
        self._sessions = sessions  # the sessions the engine knows
        self._refresh = refresh  # drop a session's frozen prompt: its next request composes one anew
        self._failing = failing  # per commit, the hooks failing since it (engine.failures)
        # work started from a bus listener (telling the agent its change went stale)
        self._spawn = spawn or _spawn
        self._answers = answers  # the agent's answers the journal keeps between two moments, newest first
        self._intents = intents or Intents(workspace.state_dir / "intents")

    # ---- history ----------------------------------------------------------------------------

    def history(self, limit: int = 200) -> list[Change]:
        """The newest `limit` commits, newest first, each with its origin, review state and
        provenance."""
        reviews = self._git.reviews(limit)
        provenance = self._git.notes(PROVENANCE_REF, limit)
        changes = []
        for c in self._git.log(limit):
            trailers = c["trailers"]
            assert isinstance(trailers, dict)
            message = str(c["message"])
            sha = str(c["sha"])
            files = [str(f) for f in c["files"]]  # type: ignore[attr-defined]
            origin = origin_of(trailers)
            changes.append(
                Change(
                    sha=sha,
                    time=int(str(c["time"])),
                    message=message,
                    subject=message.splitlines()[0] if message else "",
                    trailers=trailers,
                    files=files,
                    origin=origin,
                    review=reviews.get(sha),
                    reverts=trailers.get("reverts"),
                    provenance=decode(provenance[sha]) if sha in provenance else None,
                )
            )
        failing = self._failing()
        reverted: dict[str, str] = {}
        for change in changes:
            change.failing = failing.get(change.sha, [])
            for target in (change.reverts or "").split():
                reverted.setdefault(target, change.sha)
        for change in changes:
            change.untested = (
                untested(change.files, change.provenance)
                if needs_review(change.origin, change.files)
                else None
            )
            change.reverted_by = reverted.get(change.sha)
            if change.reverted_by:
                change.state = "reverted"
            elif change.review:
                change.state = "approved"
            elif needs_review(change.origin, change.files):
                change.state = "unreviewed"
        return changes

    def change(self, rev: str) -> Change:
        sha = self.resolve(rev)
        found = next((c for c in self.history(1000) if c.sha == sha), None)
        if found is None:
            raise ChangeError(f"commit {sha[:10]} is older than the 1,000 newest; look at it with git")
        return found

    def impact(self, rev: str) -> Impact:
        """What reverting a change would touch: the sessions whose frozen system prompt was composed
        while this version was installed (they keep sending it until refreshed), the later commits
        that touch the same files (a revert of this one alone may conflict with them), and the
        sessions frozen while one of those later versions was installed (a revert together undoes
        those versions too)."""
        change = self.change(rev)
        later = self._git.later_commits(change.sha, change.files)
        by_sha = {c.sha: c for c in self.history(1000)}
        since = installed_at(change)
        until = min((installed_at(by_sha[s]) for s in later if s in by_sha), default=None)
        frozen = [
            s
            for s in self._sessions()
            if s.system is not None and s.frozen_at is not None and s.frozen_at >= since
        ]
        affected = [s for s in frozen if until is None or (s.frozen_at or 0.0) < until]
        listed = {s.id for s in affected}
        return Impact(
            change.sha,
            [replace(s, history=None) for s in affected],
            [by_sha[s].to_dict() if s in by_sha else {"sha": s} for s in later],
            [replace(s, history=None) for s in frozen if s.id not in listed],
        )

    def reach(self, rev: str) -> Reach:
        """The sessions that run a change (frozen under it, or whose hooks ran after it for a hook or
        the config) and the agent's answers in each since, while it was installed."""
        change = self.change(rev)
        later = self._git.later_commits(change.sha, change.files)
        by_sha = {c.sha: c for c in self.history(1000)}
        installed = sorted((installed_at(by_sha[s]), s) for s in later if s in by_sha)
        until, next_change = installed[0] if installed else (None, None)
        return reach_of(change, installed_at(change), until, next_change, self._sessions(), self._answers)

    def diff(self, rev: str) -> ChangeDiff:
        sha = self.resolve(rev)
        text, truncated = self._git.show_diff(sha)
        return ChangeDiff(sha, text, truncated)

    def log(self, limit: int = 100) -> list[dict[str, object]]:
        """The newest `limit` commits as git has them: sha, time, message, trailers, files."""
        return self._git.log(limit)

    def file(self, rev: str, path: str, old_path: str | None = None, limit: int = 2_000_000) -> FileAtChange:
        """`path` as commit `rev` left it and (as `old_path`, for a rename) as it was before, each
        cut at `limit` characters; for a binary file, only that it is binary."""
        sha = self.resolve(rev)
        old_path = old_path or path
        before, after = self._git.file_versions(sha, path, old_path)
        if before is None and after is None:
            raise ChangeError(f"commit {sha[:10]} has no file {path!r} (nor had its parent {old_path!r})")
        found = FileAtChange(sha, path, old_path, None, None)
        if any(b"\0" in data[:8000] for data in (before, after) if data):  # as git tells binary files
            found.binary = True
            return found
        for side, data in (("before", before), ("content", after)):
            if data is not None:
                text = data.decode("utf-8", errors="replace")
                found.truncated = found.truncated or len(text) > limit
                setattr(found, side, text[:limit])
        return found

    def resolve(self, rev: str) -> str:
        """The commit `rev` names; ChangeError when there is none."""
        sha = self._git.commit_of(rev)
        if not sha:
            raise ChangeError(f"no commit {rev!r} in {self._workspace.root}")
        return sha

    async def approve(self, rev: str, who: str = "operator") -> ReviewRecorded:
        change = self.change(rev)
        note = f"approved by {who} at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"
        await asyncio.to_thread(self._git.add_review, change.sha, note)
        recorded = ReviewRecorded(change.sha, note)
        self._bus.publish(recorded)
        # Approving a reverted change records a judgement; the change stays undone, and the agent
        # must not take the approval for its return.
        still = f"; it stays reverted by {change.reverted_by[:10]}" if change.reverted_by else ""
        await self._tell_author(
            change.provenance,
            f'The operator approved your change "{change.subject}" ({change.sha[:10]}){still}.',
            change.sha,
        )
        return recorded

    async def revert(
        self, rev: str, who: str = "operator", refresh: list[str] | None = None, together: bool = False
    ) -> Reverted:
        """Undo the change with a new commit (history is never rewritten). `together`: also undo the
        later commits that touch the same files, in the same commit. `refresh`: sessions whose
        frozen prompt to drop afterwards."""
        change = self.change(rev)
        if self._git.parent_is_root(change.sha):
            raise ChangeError("the initial commit cannot be reverted (it would empty the workspace)")
        later = self._git.later_commits(change.sha, change.files) if together else []
        shas = [*later, change.sha]  # newest first
        with self._activity.running():
            await self._commits.commit_external()  # a hand edit must not be mixed into the revert
            async with self._commits.lock:
                subject = change.subject + (f" and {len(later)} later change(s)" if later else "")
                message = f"revert: {subject}"
                trailers = {"Origin": "operator", "Reverts": " ".join(shas), "By": who}
                files = sorted({f for sha in shas for f in self._git.files_changed(sha)})
                # Written down first: a revert killed half-way is finished at the next start as this
                # revert (engine.changes.recovery), never committed as a person's edit.
                intent = await asyncio.to_thread(
                    self._intents.begin,
                    "revert",
                    {
                        "shas": shas,
                        "message": message,
                        "trailers": trailers,
                        "files": files,
                        "head": self._git.head(),
                    },
                )
                try:
                    commit = await asyncio.to_thread(self._git.revert, shas, message, trailers)
                except RevertConflict as exc:
                    self._intents.done(intent)
                    blocking = self._git.later_commits(change.sha, change.files)
                    raise ChangeError(
                        f"{exc}"
                        + (
                            f"; later changes to the same files: {', '.join(s[:10] for s in blocking)}"
                            " (revert them together with this one)"
                            if blocking and not together
                            else ""
                        ),
                        {"conflict": exc.files, "later": blocking},
                    ) from exc
                except GitError as exc:
                    # git refused (a lock another program holds): nothing is half done, nothing
                    # is finished later; the operator is told and may try again.
                    await asyncio.to_thread(self._git.undo_half_revert, files)
                    self._intents.done(intent)
                    raise ChangeError(
                        f"reverting {change.sha[:10]} failed, nothing was changed: {exc}"
                    ) from exc
                # Only a crash (or the engine stopping under it) leaves the intent: the next start
                # finishes the revert.
                self._intents.done(intent)
            if commit is None:
                raise ChangeError(f"reverting {change.sha[:10]} changes nothing (already undone?)")
            self._commits.announce(commit)
            await self._files_changed(list(commit.files))
        refreshed = [sid for sid in refresh or [] if self._refresh(sid)]
        await self._tell_author(
            change.provenance,
            f'The operator reverted your change "{change.subject}" ({change.sha[:10]}) with commit '
            f"{commit.sha[:10]}: {', '.join(change.files)} are back to their earlier version.",
            commit.sha,
        )
        return Reverted(commit.sha, shas, list(commit.files), refreshed)


def _spawn(coro: Coroutine[Any, Any, Any], what: str) -> None:
    """Run `coro` without waiting (kept until it ends); without a running loop, it is dropped."""
    try:
        task = asyncio.get_running_loop().create_task(coro, name=what)
    except RuntimeError:
        coro.close()
        return
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


_TASKS: set[asyncio.Task[Any]] = set()
