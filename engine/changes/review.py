"""The review gate, with `"review": "gate"`: the agent's hook and prompt changes held until an
operator approves (installs), rejects or dismisses them; a held change whose file changed under it goes
stale. Part of `Changes` (engine/changes/history.py), which sets the state it works on."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from engine.changes.commits import Commits
from engine.changes.errors import ChangeError
from engine.changes.gitstore import Commit, GitStore
from engine.changes.held import already, refusal, stale_note, told_stale
from engine.changes.intents import Intents
from engine.changes.pending import PendingChanges, sha256
from engine.changes.reach import untested
from engine.changes.textdiff import unified_diff
from engine.changes.trailers import parse_trailers
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.protocol.records import CommitInfo, PendingChange, PendingReview, Provenance
from engine.workspace.layout import Workspace, write_atomic

log = logging.getLogger("evolve.changes")


class ReviewGate:
    """The held changes: listed, reviewed, decided; gone stale when their file changes."""

    # What Changes.__init__ sets (engine/changes/history.py says what each is).
    _workspace: Workspace
    _commits: Commits
    _git: GitStore
    _pending: PendingChanges
    _bus: EventBus
    _activity: Activity
    _files_changed: Callable[[list[str]], Awaitable[None]]
    _tell: Callable[[str, str, str], Awaitable[object]]
    _spawn: Callable[[Coroutine[Any, Any, Any], str], None]
    _intents: Intents

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

    async def _tell_session(self, session: str, message: str, change: str) -> None:
        await self._tell(session, message, change)

    async def _tell_author(self, provenance: Provenance | None, message: str, change: str) -> None:
        """Let the session that made a change know what became of it (a notification)."""
        if provenance is not None and provenance.session:
            await self._tell(provenance.session, message, change)


def _with_untested(item: PendingChange) -> PendingChange:
    item.untested = untested([item.file], item.provenance) if item.tool else None
    return item
