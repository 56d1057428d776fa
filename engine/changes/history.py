"""Self-modifications as the operator sees them: the workspace's git history with where each change
came from and whether it was reviewed, approvals (git notes), reverts (new commits), and, with
`"review": "gate"`, the agent's hook and prompt changes held until an operator approves them."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.changes.commits import Commits
from engine.changes.errors import ChangeError as ChangeError  # where its callers catch it
from engine.changes.gitstore import Commit, GitError, RevertConflict
from engine.changes.held import already, refusal, stale_note, told_stale
from engine.changes.intents import Intent, Intents
from engine.changes.pending import PendingChanges, sha256
from engine.changes.provenance import PROVENANCE_REF, decode
from engine.changes.reach import reach_of, untested
from engine.changes.textdiff import unified_diff
from engine.changes.trailers import parse_trailers
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.protocol.records import (
    Change,
    ChangeDiff,
    CommitInfo,
    FailingSince,
    FileAtChange,
    Impact,
    PendingChange,
    PendingReview,
    Provenance,
    Reach,
    Reverted,
    ReviewRecorded,
    SessionInfo,
    StageResult,
)
from engine.workspace.layout import Workspace, write_atomic

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


class Changes:
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
        try:
            sha = self._git.resolve(rev)
        except GitError:
            sha = ""
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

    async def _tell_session(self, session: str, message: str, change: str) -> None:
        await self._tell(session, message, change)

    async def _tell_author(self, provenance: Provenance | None, message: str, change: str) -> None:
        """Let the session that made a change know what became of it (a notification)."""
        if provenance is not None and provenance.session:
            await self._tell(provenance.session, message, change)

    # ---- review gate ------------------------------------------------------------------------

    def pending(self, include_decided: bool = False) -> list[PendingChange]:
        return [_with_untested(p) for p in self._pending.listed(include_decided)]

    def get(self, pending_id: str) -> PendingChange:
        return _with_untested(self._pending.get(pending_id))

    def review(self, pending_id: str) -> PendingReview:
        """A pending change with its content and its diff against the file as it is now; when the file
        changed since it was proposed, also what the agent changed and the file now, and a warning."""
        item = self.get(pending_id)
        current = self._current(item)
        text = current.decode("utf-8", errors="replace") if current is not None else ""
        review = PendingReview.from_dict(
            {**item.to_dict(), "diff": unified_diff(text, item.content or "", item.file)}
        )
        base = self._base_of(item)
        if base is not None:
            review.proposed_diff = unified_diff(base, item.content or "", item.file)
        if sha256(current or b"") != item.base_sha256:
            review.changed, review.current = True, text
            review.warning = (
                f"{item.file} changed after the agent proposed this change: the diff against the file as "
                "it is now would undo that change; what the agent changed is `proposed_diff`."
            )
        return review

    def _current(self, item: PendingChange) -> bytes | None:
        """The held change's file as it is now (None when it does not exist)."""
        try:
            return Path(os.path.realpath(self._workspace.root / item.file)).read_bytes()
        except OSError:
            return None

    def _base_of(self, item: PendingChange) -> str | None:
        """The content a held change was based on: kept with it, else found in the file's history."""
        if item.base is not None:
            return item.base
        for commit in self._git.log(50, [item.file]):
            found = self._git.file_at(str(commit["sha"]), item.file)
            if found is not None and sha256(found[1]) == item.base_sha256:
                return found[1].decode("utf-8", "surrogateescape")
        return "" if item.base_sha256 == sha256(b"") else None

    def _changed_by(self, item: PendingChange, current: bytes | None) -> tuple[str | None, str | None]:
        """The commit that left the file as it is now (sha, subject), when the file is as committed."""
        committed = self._git.committed_file(item.file)
        if committed is None or committed[1] != (current or b""):
            return None, None
        found = self._git.log(1, [item.file])
        if not found:
            return None, None
        return str(found[0]["sha"]), str(found[0]["message"]).splitlines()[0]

    def _go_stale(self, item: PendingChange, changed_by: str | None, subject: str | None) -> None:
        """The held change's file changed under it: stale at once, published, the agent told, its
        replay stopped (a listener of the `pending` event)."""
        item.status, item.decided_at = "stale", time.time()
        item.changed_by, item.note = changed_by, stale_note(item, changed_by, subject)
        self._pending.save(item)
        self._bus.publish(item.summary())
        if item.provenance is not None and item.provenance.session:
            self._spawn(
                self._tell_session(item.provenance.session, told_stale(item, changed_by, subject), item.id),
                "tell the agent its held change went stale",
            )

    def committed(self, info: CommitInfo) -> None:
        """A commit (a bus listener of `commit` events): the held changes of the files it changed
        whose file no longer is what they were based on go stale at once."""
        installed = parse_trailers(info.message).get("pending")
        subject = info.message.splitlines()[0] if info.message else None
        for item in self._pending.listed():
            moved = item.file in info.files and item.id != installed
            try:
                if moved and sha256(self._current(item) or b"") != item.base_sha256:
                    self._go_stale(item, info.sha, subject)
            except OSError as exc:  # it runs inside the commit's announcement: never break that
                log.warning("cannot mark held change %s stale: %s", item.id, exc)

    async def check_stale(self) -> list[PendingChange]:
        """At start: the held changes whose file changed while no engine watched go stale."""

        def moved() -> list[tuple[PendingChange, str | None, str | None]]:
            found = []
            for item in self._pending.listed():
                current = self._current(item)
                if sha256(current or b"") != item.base_sha256:
                    found.append((item, *self._changed_by(item, current)))
            return found

        stale = await asyncio.to_thread(moved)
        for item, changed_by, subject in stale:
            self._go_stale(item, changed_by, subject)
        return [item for item, _, _ in stale]

    async def approve_pending(self, pending_id: str, who: str = "operator") -> PendingChange:
        item = self.get(pending_id)
        if item.status not in ("pending", "stale"):
            raise ChangeError(already(item))
        with self._activity.running():
            async with self._commits.lock:
                item = self.get(pending_id)  # another decision may have made it stale meanwhile
                current = self._current(item)
                if item.status == "stale" or sha256(current or b"") != item.base_sha256:
                    raise self._refused(item, current)
                if item.status != "pending":
                    raise ChangeError(already(item))
                # Written down first: an approval killed at any point is finished at the next start.
                intent = await asyncio.to_thread(
                    self._intents.begin, "approve", {"pending": item.id, "by": who}
                )
                commit = await self._apply(item, who)
                if commit is not None:
                    await self._reviewed(commit.sha, item, who)
                self._intents.done(intent)
            await self._files_changed([item.file])
        self._bus.publish(item.summary())
        installed = f" and installed it as commit {commit.sha[:10]}" if commit else ""
        # The behaviour checks install a change that regresses none of them (evals_auto_approve).
        who_did = "No behaviour check regressed with it, so evolve" if who == "evals" else "The operator"
        await self._tell_author(
            item.provenance,
            f'{who_did} approved your proposed change "{item.message}" to {item.file}{installed}.',
            commit.sha if commit else item.id,
        )
        return item.summary()

    def _refused(self, item: PendingChange, current: bytes | None) -> ChangeError:
        """An approval of a change whose file changed since it was proposed: it goes stale (if it
        was not), and the refusal carries the three versions."""
        changed_by, subject = (
            (item.changed_by, None) if item.status == "stale" else self._changed_by(item, current)
        )
        if changed_by and subject is None:
            subject = self._git.subject(changed_by) or None
        if item.status != "stale":
            self._go_stale(item, changed_by, subject)
        text = (current or b"").decode("utf-8", "surrogateescape")
        message, details = refusal(item, self._base_of(item), text, changed_by, subject)
        return ChangeError(message, details)

    async def finish_approval(self, item: PendingChange, who: str) -> None:
        """Complete an approval that wrote the file and stopped before its commit (the engine died).
        The caller holds the write lock."""
        commit = await self._apply(item, who)
        if commit is not None:
            await self._reviewed(commit.sha, item, who)
        self._bus.publish(item.summary())

    async def _reviewed(self, sha: str, item: PendingChange, who: str) -> None:
        """The review note and the provenance of an approved held change's commit."""
        await asyncio.to_thread(self._git.add_review, sha, f"approved by {who} (review gate)")
        if item.provenance is not None:
            await self._commits.annotate(sha, item.provenance)

    def installed_as(self, pending_id: str) -> str | None:
        """The commit that installed held change `pending_id` (its `Evolve-Pending` trailer), if any."""
        return self._git.with_trailer("Pending", pending_id)

    # ---- decisions an engine that died left half done (engine.changes.recovery) ---------------

    def interrupted(self) -> list[Intent]:
        """The operator's decisions left half done (the commits git refused are Commits')."""
        return [i for i in self._intents.left() if i.kind in ("revert", "approve", "reject")]

    async def finish(self, intent: Intent) -> str:
        """Finish a decision that was under way when the engine died, as what it was; what was done,
        for the warning. The caller holds the write lock."""
        try:
            if intent.kind == "revert":
                return await self._finish_revert(intent.data)
            if intent.kind == "approve":
                return await self._finish_approve(intent.data)
            if intent.kind == "reject":
                return await self._finish_reject(intent.data)
            return f"an unknown decision {intent.kind!r} was left as it was"
        finally:
            self._intents.done(intent)

    async def _finish_revert(self, data: dict[str, object]) -> str:
        shas = [str(s) for s in data.get("shas") or []]  # type: ignore[attr-defined]
        raw = data.get("trailers")
        trailers = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        since = data.get("head")
        done = self._git.with_trailer("Reverts", " ".join(shas), str(since) if since else None)
        if done:
            return f"the revert of {', '.join(s[:10] for s in shas)} had been committed ({done[:10]})"
        files = [str(f) for f in data.get("files") or []]  # type: ignore[attr-defined]
        await asyncio.to_thread(self._git.undo_half_revert, files)
        trailers["Interrupted"] = "completed at restart"
        try:
            commit = await asyncio.to_thread(self._git.revert, shas, str(data.get("message")), trailers)
        except GitError as exc:
            return f"the revert of {', '.join(s[:10] for s in shas)} could not be completed: {exc}"
        if commit is None:
            return f"the revert of {', '.join(s[:10] for s in shas)} changes nothing any more"
        self._commits.announce(commit)
        return f"the revert of {', '.join(s[:10] for s in shas)} was completed at restart ({commit.sha[:10]})"

    async def _finish_approve(self, data: dict[str, object]) -> str:
        pending_id, who = str(data.get("pending")), str(data.get("by") or "operator")
        try:
            item = self.get(pending_id)
        except ChangeError:
            return f"the approval of {pending_id}: no such held change"
        if item.status == "approved":
            if item.commit and item.commit not in self._git.reviews(1000):
                await self._reviewed(item.commit, item, who)
            return f"the approval of {pending_id} had been recorded"
        if item.status != "pending":
            return f"the approval of {pending_id}: it was {item.status} meanwhile"
        installed = self.installed_as(pending_id)
        if installed is not None:  # committed, its decision not recorded yet
            item.status, item.decided_at, item.commit = "approved", time.time(), installed
            self._pending.save(item)
            await self._reviewed(installed, item, who)
            self._bus.publish(item.summary())
            return f"the approval of {pending_id} ({item.file}) was recorded at restart ({installed[:10]})"
        target = Path(os.path.realpath(self._workspace.root / item.file))
        try:
            current = target.read_bytes()
        except OSError:
            current = b""
        proposed = (item.content or "").encode("utf-8", "surrogateescape")
        if current != proposed and sha256(current) != item.base_sha256:
            item.status, item.decided_at = "stale", time.time()
            item.note = f"{item.file} changed while its approval was interrupted; ask the agent to redo it"
            self._pending.save(item)
            self._bus.publish(item.summary())
            return f"the approval of {pending_id}: {item.note}"
        await self.finish_approval(item, f"{who} (the approval was interrupted, completed at restart)")
        return f"the approval of {pending_id} ({item.file}) was completed at restart"

    async def _finish_reject(self, data: dict[str, object]) -> str:
        pending_id = str(data.get("pending"))
        try:
            item = self.get(pending_id)
        except ChangeError:
            return f"the rejection of {pending_id}: no such held change"
        if item.status != "pending":
            return f"the rejection of {pending_id} had been recorded"
        reason = data.get("reason")
        self._record_rejection(item, str(data.get("by") or "operator"), str(reason) if reason else None)
        return f"the rejection of {pending_id} ({item.file}) was recorded at restart"

    async def _apply(self, item: PendingChange, who: str) -> Commit | None:
        """Write the held change, commit it as approved by `who`, record the decision. The caller
        holds the write lock."""
        target = Path(os.path.realpath(self._workspace.root / item.file))
        if item.hook is not None:
            mode = 0o755
        else:
            try:
                mode = stat.S_IMODE(target.stat().st_mode)
            except FileNotFoundError:
                mode = 0o644
        content = (item.content or "").encode("utf-8", "surrogateescape")
        await asyncio.to_thread(write_atomic, target, content, mode)
        commit = await self._commits.commit_quietly(
            item.message,
            {
                # Held by the gate from a hook's own writing (no tool), or from the agent's tool.
                "Origin": "tool" if item.tool else "hook",
                "Tool": item.tool,
                "Session": item.session,
                "Call": item.call_id,
                "File": item.file,
                "Approved-By": who,
                "Pending": item.id,
            },
            [item.file],  # only this file: nothing else uncommitted rides along
        )
        item.status, item.decided_at = "approved", time.time()
        item.commit = commit.sha if commit else None
        self._pending.save(item)
        return commit

    async def reject_pending(
        self, pending_id: str, who: str = "operator", reason: str | None = None
    ) -> PendingChange:
        """Reject a held change; a stale one (which can no longer be decided) is dismissed instead."""
        item = self.get(pending_id)
        if item.status == "stale":
            return await self.dismiss_pending(pending_id, who, reason)
        if item.status != "pending":
            raise ChangeError(already(item))
        async with self._commits.lock:
            installed = self.installed_as(pending_id)
            if installed is not None:
                # Its approval was cut short after its commit: it is installed, so it is approved.
                item.status, item.decided_at, item.commit = "approved", time.time(), installed
                self._pending.save(item)
                self._bus.publish(item.summary())
                raise ChangeError(
                    f"change {pending_id} was already installed as commit {installed[:10]} (its approval "
                    "was interrupted); it is recorded as approved: revert the commit to undo it"
                )
            intent = await asyncio.to_thread(
                self._intents.begin, "reject", {"pending": item.id, "by": who, "reason": reason}
            )
            self._record_rejection(item, who, reason)
            self._intents.done(intent)
        because = f" because: {reason}" if reason else ""
        checks = f" Its behaviour checks: {item.evals}." if item.evals else ""
        await self._tell_author(
            item.provenance,
            f'The operator rejected your proposed change "{item.message}" to {item.file}{because}. '
            f"It was not installed.{checks}",
            item.id,
        )
        return item.summary()

    async def dismiss_pending(
        self, pending_id: str, who: str = "operator", reason: str | None = None
    ) -> PendingChange:
        """Dismiss a stale held change (its file changed under it), with a reason the agent is told."""
        item = self.get(pending_id)
        if item.status == "pending":
            raise ChangeError(
                "This held change can still be decided (its file has not changed since it was "
                "proposed): approve or reject it instead of dismissing it."
            )
        if item.status != "stale":
            raise ChangeError(already(item))
        item.status, item.decided_at = "dismissed", time.time()
        item.note = (
            f"dismissed by {who}" + (f": {reason}" if reason else "") + f" (it was stale: {item.note})"
        )
        self._pending.save(item)
        self._bus.publish(item.summary())
        if reason:
            await self._tell_author(
                item.provenance,
                f'The operator dismissed your proposed change "{item.message}" to {item.file}, which '
                f"went stale, because: {reason}.",
                item.id,
            )
        return item.summary()

    def _record_rejection(self, item: PendingChange, who: str, reason: str | None) -> None:
        item.status, item.decided_at = "rejected", time.time()
        item.note = f"rejected by {who}" + (f": {reason}" if reason else "")
        self._pending.save(item)
        self._bus.publish(item.summary())


def _with_untested(item: PendingChange) -> PendingChange:
    item.untested = untested([item.file], item.provenance) if item.tool else None
    return item


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
