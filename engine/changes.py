"""Self-modifications as the operator sees them: the workspace's git history with where each change
came from and whether it was reviewed, approvals (git notes), reverts (new commits), and, with
`"review": "gate"`, the agent's hook and prompt changes held until an operator approves them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .activity import Activity
from .bus import EventBus
from .commits import Commits
from .gitstore import Commit, GitError, RevertConflict
from .protocol.events import EventKind
from .protocol.records import Change, Notice, PendingChange, ReviewRecorded, new_id
from .toolhost import CallContext
from .workspace import Workspace, write_atomic


class ChangeError(RuntimeError):
    """An operator action that cannot be done; the message says why and what to do."""


def origin_of(trailers: dict[str, str]) -> str:
    """agent (a tool call of the agent), operator, heartbeat, hook, external, initial, or manual (a
    commit made with git directly, without evolve's trailers)."""
    origin = trailers.get("origin")
    if origin == "tool":
        return "agent"
    return origin or "manual"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Changes:
    def __init__(
        self,
        workspace: Workspace,
        commits: Commits,
        bus: EventBus,
        activity: Activity,
        files_changed: Callable[[list[str]], Awaitable[None]],
    ) -> None:
        self._workspace = workspace
        self._commits = commits
        self._git = commits.git
        self._bus = bus
        self._activity = activity
        self._files_changed = files_changed  # hooks, prompts or config changed: reload them
        self.dir = workspace.state_dir / "pending"

    # ---- history ----------------------------------------------------------------------------

    def history(self, limit: int = 200) -> list[Change]:
        reviews = self._git.reviews()
        changes = []
        for c in self._git.log(limit):
            trailers = c["trailers"]
            assert isinstance(trailers, dict)
            message = str(c["message"])
            changes.append(
                Change(
                    sha=str(c["sha"]),
                    time=int(str(c["time"])),
                    message=message,
                    subject=message.splitlines()[0] if message else "",
                    trailers=trailers,
                    files=list(c["files"]),  # type: ignore[call-overload]
                    origin=origin_of(trailers),
                    review=reviews.get(str(c["sha"])),
                )
            )
        return changes

    def diff(self, rev: str) -> dict[str, Any]:
        sha = self._resolve(rev)
        text, truncated = self._git.show_diff(sha)
        return {"sha": sha, "diff": text, "truncated": truncated}

    def _resolve(self, rev: str) -> str:
        try:
            sha = self._git.resolve(rev)
        except GitError:
            sha = ""
        if not sha:
            raise ChangeError(f"no commit {rev!r} in {self._workspace.root}")
        return sha

    async def approve(self, rev: str, who: str = "operator") -> dict[str, Any]:
        sha = self._resolve(rev)
        note = f"approved by {who} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
        await asyncio.to_thread(self._git.add_review, sha, note)
        self._bus.publish(ReviewRecorded(sha, note))
        return {"sha": sha, "review": note}

    async def revert(self, rev: str, who: str = "operator") -> dict[str, Any]:
        sha = self._resolve(rev)
        if self._git.parent_is_root(sha):
            raise ChangeError("the initial commit cannot be reverted (it would empty the workspace)")
        with self._activity.running():
            await self._commits.commit_external()  # a hand edit must not be mixed into the revert
            async with self._commits.lock:
                subject = next((c.subject for c in self.history(500) if c.sha == sha), sha[:10])
                try:
                    commit = await asyncio.to_thread(
                        self._git.revert,
                        sha,
                        f"revert: {subject}",
                        {"Origin": "operator", "Reverts": sha, "By": who},
                    )
                except RevertConflict as exc:
                    self._bus.publish(Notice("revert", str(exc)), EventKind.ERROR)
                    raise ChangeError(str(exc)) from exc
            if commit is None:
                raise ChangeError(f"reverting {sha[:10]} changes nothing (already undone?)")
            self._commits.announce(commit)
            await self._files_changed(list(commit.files))
        return {"sha": commit.sha, "reverted": sha, "files": list(commit.files)}

    # ---- review gate ------------------------------------------------------------------------

    def hold(
        self, rel: str, old: bytes, new: str, message: str, ctx: CallContext, hook: str | None
    ) -> PendingChange:
        pending = PendingChange(
            id=new_id("chg"),
            file=rel,
            content=new,
            base_sha256=sha256(old),
            message=message,
            tool=ctx.tool,
            session=ctx.session,
            call_id=ctx.call_id,
            hook=hook,
            created_at=time.time(),
        )
        self._save(pending)
        self._bus.publish(pending.summary())
        return pending

    def _save(self, pending: PendingChange) -> None:
        write_atomic(
            self.dir / f"{pending.id}.json", json.dumps(pending.to_dict(), ensure_ascii=False).encode()
        )

    def pending(self, include_decided: bool = False) -> list[PendingChange]:
        items: list[PendingChange] = []
        if not self.dir.is_dir():
            return items
        for path in sorted(self.dir.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                item = PendingChange.from_dict(data)
            except (OSError, ValueError, TypeError):
                continue
            if include_decided or item.status == "pending":
                items.append(item)
        return items

    def get(self, pending_id: str) -> PendingChange:
        path = self.dir / f"{os.path.basename(pending_id)}.json"
        try:
            return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            raise ChangeError(f"no pending change {pending_id!r}") from None

    async def approve_pending(self, pending_id: str, who: str = "operator") -> dict[str, Any]:
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
                    self._save(item)
                    raise ChangeError(item.note)
                commit = await self._apply(item, who)
            if commit is not None:
                await asyncio.to_thread(self._git.add_review, commit.sha, f"approved by {who} (review gate)")
            await self._files_changed([item.file])
        self._bus.publish(item.summary())
        return item.summary().to_dict()

    async def finish_approval(self, item: PendingChange, who: str) -> None:
        """Complete an approval that wrote the file and stopped before its commit (the engine died).
        The caller holds the write lock."""
        commit = await self._apply(item, who)
        if commit is not None:
            await asyncio.to_thread(self._git.add_review, commit.sha, f"approved by {who} (review gate)")
        self._bus.publish(item.summary())

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
        self._save(item)
        return commit

    async def reject_pending(
        self, pending_id: str, who: str = "operator", reason: str | None = None
    ) -> dict[str, Any]:
        item = self.get(pending_id)
        if item.status != "pending":
            raise ChangeError(f"change {pending_id} was already {item.status}")
        item.status, item.decided_at = "rejected", time.time()
        item.note = f"rejected by {who}" + (f": {reason}" if reason else "")
        self._save(item)
        self._bus.publish(item.summary())
        return item.summary().to_dict()
