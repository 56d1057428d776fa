"""Self-modifications as the operator sees them: the workspace's git history with where each change
came from and whether it was reviewed, approvals (git notes), reverts (new commits), and, with
`"review": "gate"`, the agent's hook and prompt changes held until an operator approves them."""

from __future__ import annotations

import asyncio
import difflib
import os
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from engine.changes.commits import Commits
from engine.changes.errors import ChangeError as ChangeError  # where its callers catch it
from engine.changes.gitstore import Commit, GitError, RevertConflict
from engine.changes.intents import Intent, Intents
from engine.changes.pending import PendingChanges, sha256
from engine.changes.provenance import PROVENANCE_REF, decode
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.protocol.records import (
    Change,
    ChangeDiff,
    FileAtChange,
    Impact,
    PendingChange,
    PendingReview,
    Provenance,
    Reverted,
    ReviewRecorded,
    SessionInfo,
)
from engine.workspace.layout import Workspace, write_atomic

REVIEWED_AREAS = ("hooks/", "prompts/", "config/", "tests/")
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


def lines_of(text: str) -> list[str]:
    """The lines of `text` as git counts them (split at "\n" only), each with its line end."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def unified_diff(before: str, after: str, file: str) -> str:
    """`before` to `after` as git shows it, a last line without a newline marked as git marks it (or
    it would run into the next line)."""
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(lines_of(before), lines_of(after), f"a/{file}", f"b/{file}")
    )


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
        reverted: dict[str, str] = {}
        for change in changes:
            for target in (change.reverts or "").split():
                reverted.setdefault(target, change.sha)
        for change in changes:
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

    async def _tell_author(self, provenance: Provenance | None, message: str, change: str) -> None:
        """Let the session that made a change know what became of it (a notification)."""
        if provenance is not None and provenance.session:
            await self._tell(provenance.session, message, change)

    # ---- review gate ------------------------------------------------------------------------

    def pending(self, include_decided: bool = False) -> list[PendingChange]:
        return self._pending.listed(include_decided)

    def get(self, pending_id: str) -> PendingChange:
        return self._pending.get(pending_id)

    def review(self, pending_id: str) -> PendingReview:
        """A pending change with its content and its diff against the file as it is now."""
        item = self.get(pending_id)
        try:
            before = (self._workspace.root / item.file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            before = ""
        diff = unified_diff(before, item.content or "", item.file)
        return PendingReview.from_dict({**item.to_dict(), "diff": diff})

    async def approve_pending(self, pending_id: str, who: str = "operator") -> PendingChange:
        item = self.get(pending_id)
        if item.status != "pending":
            raise ChangeError(f"change {pending_id} was already {item.status}")
        target = Path(os.path.realpath(self._workspace.root / item.file))
        with self._activity.running():
            async with self._commits.lock:
                try:
                    current = target.read_bytes()
                except OSError:
                    current = b""
                if sha256(current) != item.base_sha256:
                    item.status, item.decided_at = "stale", time.time()
                    item.note = (
                        f"{item.file} changed after the agent proposed this; ask it to redo the change"
                    )
                    self._pending.save(item)
                    raise ChangeError(item.note)
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
        await self._tell_author(
            item.provenance,
            f'The operator approved your proposed change "{item.message}" to {item.file}{installed}.',
            commit.sha if commit else item.id,
        )
        return item.summary()

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
        item = self.get(pending_id)
        if item.status != "pending":
            raise ChangeError(f"change {pending_id} was already {item.status}")
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
        await self._tell_author(
            item.provenance,
            f'The operator rejected your proposed change "{item.message}" to {item.file}{because}. '
            "It was not installed.",
            item.id,
        )
        return item.summary()

    def _record_rejection(self, item: PendingChange, who: str, reason: str | None) -> None:
        item.status, item.decided_at = "rejected", time.time()
        item.note = f"rejected by {who}" + (f": {reason}" if reason else "")
        self._pending.save(item)
        self._bus.publish(item.summary())
