"""The operator's decisions an engine that died left half done (a revert, an approval, a rejection,
written down as intents before they began), finished at the next start as what they were
(engine.changes.recovery runs them). Part of `Changes` (engine/changes/history.py)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from engine.changes.errors import ChangeError
from engine.changes.gitstore import GitError
from engine.changes.intents import Intent
from engine.changes.pending import sha256
from engine.changes.review import ReviewGate


class Unfinished(ReviewGate):
    """Finishing the decisions left half done."""

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
