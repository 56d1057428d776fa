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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .gitstore import GitError, RevertConflict
from .records import new_id
from .workspace import write_atomic

if TYPE_CHECKING:
    from .runtime import CallContext, Engine


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


@dataclass
class Pending:
    """An agent's change held for review (`"review": "gate"`)."""

    id: str
    file: str  # workspace-relative, e.g. "hooks/notes.py"
    content: str
    base_sha256: str  # the file's content when the change was made; approval refuses if it moved
    message: str
    tool: str | None
    session: str | None
    call_id: str | None
    hook: str | None
    created_at: float
    status: str = "pending"  # pending | approved | rejected | stale
    decided_at: float | None = None
    commit: str | None = None
    note: str | None = None

    def to_dict(self, with_content: bool = True) -> dict[str, Any]:
        data = asdict(self)
        if not with_content:
            data.pop("content")
        return data


class Changes:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dir = engine.workspace.state_dir / "pending"

    # ---- history ----------------------------------------------------------------------------

    def history(self, limit: int = 200) -> list[dict[str, Any]]:
        commits = self.engine.git.log(limit)
        reviews = self.engine.git.reviews()
        for c in commits:
            trailers = c["trailers"]
            assert isinstance(trailers, dict)
            c["origin"] = origin_of(trailers)
            c["subject"] = str(c["message"]).splitlines()[0] if c["message"] else ""
            c["review"] = reviews.get(str(c["sha"]))
        return commits

    def diff(self, rev: str) -> dict[str, Any]:
        sha = self._resolve(rev)
        text, truncated = self.engine.git.show_diff(sha)
        return {"sha": sha, "diff": text, "truncated": truncated}

    def _resolve(self, rev: str) -> str:
        try:
            sha = self.engine.git.resolve(rev)
        except GitError:
            sha = ""
        if not sha:
            raise ChangeError(f"no commit {rev!r} in {self.engine.workspace.root}")
        return sha

    async def approve(self, rev: str, who: str = "operator") -> dict[str, Any]:
        sha = self._resolve(rev)
        note = f"approved by {who} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
        await asyncio.to_thread(self.engine.git.add_review, sha, note)
        self.engine.bus.publish("review", {"sha": sha, "review": note})
        return {"sha": sha, "review": note}

    async def revert(self, rev: str, who: str = "operator") -> dict[str, Any]:
        engine = self.engine
        sha = self._resolve(rev)
        if engine.git.parent_is_root(sha):
            raise ChangeError("the initial commit cannot be reverted (it would empty the workspace)")
        await engine.commit_external()  # a hand edit must not be mixed into the revert
        async with engine.write_lock:
            subject = next((c["subject"] for c in self.history(500) if c["sha"] == sha), sha[:10])
            try:
                commit = await asyncio.to_thread(
                    engine.git.revert,
                    sha,
                    f"revert: {subject}",
                    {"Origin": "operator", "Reverts": sha, "By": who},
                )
            except RevertConflict as exc:
                engine.bus.publish("error", {"source": "revert", "message": str(exc)})
                raise ChangeError(str(exc)) from exc
        if commit is None:
            raise ChangeError(f"reverting {sha[:10]} changes nothing (already undone?)")
        engine._published_commit(commit)
        await engine.after_files_changed(list(commit.files))
        return {"sha": commit.sha, "reverted": sha, "files": list(commit.files)}

    # ---- review gate ------------------------------------------------------------------------

    def hold(
        self, rel: str, old: bytes, new: str, message: str, ctx: CallContext, hook: str | None
    ) -> Pending:
        pending = Pending(
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
        self.engine.bus.publish("pending", pending.to_dict(with_content=False))
        return pending

    def _save(self, pending: Pending) -> None:
        write_atomic(
            self.dir / f"{pending.id}.json", json.dumps(pending.to_dict(), ensure_ascii=False).encode()
        )

    def pending(self, include_decided: bool = False) -> list[Pending]:
        items: list[Pending] = []
        if not self.dir.is_dir():
            return items
        for path in sorted(self.dir.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                item = Pending(**data)
            except (OSError, ValueError, TypeError):
                continue
            if include_decided or item.status == "pending":
                items.append(item)
        return items

    def get(self, pending_id: str) -> Pending:
        path = self.dir / f"{os.path.basename(pending_id)}.json"
        try:
            return Pending(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            raise ChangeError(f"no pending change {pending_id!r}") from None

    async def approve_pending(self, pending_id: str, who: str = "operator") -> dict[str, Any]:
        engine = self.engine
        item = self.get(pending_id)
        if item.status != "pending":
            raise ChangeError(f"change {pending_id} was already {item.status}")
        target = Path(os.path.realpath(engine.workspace.root / item.file))
        async with engine.write_lock:
            try:
                current = target.read_bytes()
            except OSError:
                current = b""
            if sha256(current) != item.base_sha256:
                item.status, item.decided_at = "stale", time.time()
                item.note = f"{item.file} changed after the agent proposed this; ask it to redo the change"
                self._save(item)
                raise ChangeError(item.note)
            mode = 0o755 if item.hook is not None else stat.S_IMODE(target.stat().st_mode)
            await asyncio.to_thread(
                write_atomic, target, item.content.encode("utf-8", "surrogateescape"), mode
            )
            commit = await engine.commit(
                item.message,
                {
                    "Origin": "tool",
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
        if commit is not None:
            await asyncio.to_thread(engine.git.add_review, commit.sha, f"approved by {who} (review gate)")
        await engine.after_files_changed([item.file])
        engine.bus.publish("pending", item.to_dict(with_content=False))
        return item.to_dict(with_content=False)

    async def reject_pending(
        self, pending_id: str, who: str = "operator", reason: str | None = None
    ) -> dict[str, Any]:
        item = self.get(pending_id)
        if item.status != "pending":
            raise ChangeError(f"change {pending_id} was already {item.status}")
        item.status, item.decided_at = "rejected", time.time()
        item.note = f"rejected by {who}" + (f": {reason}" if reason else "")
        self._save(item)
        self.engine.bus.publish("pending", item.to_dict(with_content=False))
        return item.to_dict(with_content=False)
