"""What an engine finds when it starts after another one died (kill -9, a crash, a power cut), and
puts right before it does anything else:

- lock files a killed git left in `.git` (no process holds them): removed, or every commit would
  wait and fail;
- temporary files of atomic writes, and validation and replay copies, whose process is gone: removed;
- processes that hook runs of the dead engine left running (a hook, what it started, a replay's
  hooks): ended, found by their run tag (engine.hooks.groups);
- tool calls that started and never ended: their change, if it is on disk and uncommitted, is
  committed with the attribution the call would have given it (never as an external change), and
  each call is recorded as interrupted;
- an operator's decision under way (a revert, an approval or a rejection of a held change, written
  down before it began: engine.changes.intents): finished as what it was, with its attribution and
  its decision recorded, whatever point it had reached;
- an operator's approval of a held change that wrote the file but did not commit it (an engine
  that wrote down no intent): committed as the approval.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

from engine.changes.commits import CommitFailed, Commits
from engine.changes.history import Changes
from engine.hooks import groups, validation
from engine.journal.store import Journal
from engine.protocol.announcement import Announcement
from engine.protocol.records import JSONDict, ToolCall
from engine.tools.host import CallContext
from engine.workspace.layout import Workspace, pid_alive, remove_stale_temp_files

log = logging.getLogger("evolve.recovery")

INTERRUPTED = "interrupted: the engine stopped during this call"


class Recovery:
    def __init__(
        self,
        *,
        workspace: Workspace,
        journal: Journal | None,
        commits: Commits,
        changes: Changes,
        warn: Callable[[str, str], None],
        publish: Callable[[ToolCall], object],
    ) -> None:
        self._workspace = workspace
        self._journal = journal
        self._commits = commits
        self._changes = changes
        self._warn = warn
        self._publish = publish  # the call, as a tool_result event

    async def before_git(self) -> None:
        """What must go before the engine's first git command."""
        ws = self._workspace
        removed = await asyncio.to_thread(self._commits.git.clear_stale_locks)
        for lock in removed:
            self._warn("git", f"removed {lock}: a lock left by a git process that is gone")
        self._commits.git.take_notes()
        temp = await asyncio.to_thread(remove_stale_temp_files, [ws.state_dir, ws.hooks_dir, ws.prompts_dir])
        copies = await asyncio.to_thread(validation.remove_stale_copies)
        for path in [*temp, *copies]:
            log.info("removed %s, left by a process that died", path)
        ended = await asyncio.to_thread(groups.end_leftovers, ws.root)
        if ended:
            shown = ", ".join(f"{pid} ({tag})" for pid, tag in sorted(ended.items())[:10])
            more = f" and {len(ended) - 10} more" if len(ended) > 10 else ""
            self._warn(
                "recovery",
                f"ended {len(ended)} process(es) that hook runs of an engine that died left running: "
                f"{shown}{more}",
            )

    def _another_engine(self) -> int | None:
        """The pid of another live engine announced for this workspace: its calls in progress are
        not interrupted (an `evolve call` while `evolve serve` runs must leave them alone)."""
        found = Announcement.read(self._workspace.root)
        if found is not None and found.pid != os.getpid() and pid_alive(found.pid):
            return found.pid
        return None

    async def interrupted_work(self) -> None:
        """Finish what an engine that died left half done: tool calls, approvals."""
        if self._another_engine() is not None:
            return
        async with self._commits.lock:
            await self._decisions()
            await self._approvals()
            if self._journal is not None:
                await self._tool_calls(self._journal)

    async def _tool_calls(self, journal: Journal) -> None:
        interrupted = await asyncio.to_thread(journal.interrupted_tool_calls)
        if not interrupted:
            return
        git = self._commits.git
        claimed = {f for _call, intent in interrupted for f in intent.get("files") or ()}
        for call, intent in interrupted:
            dirty = set(await asyncio.to_thread(git.dirty_files))
            made: list[str] = []
            if intent.get("message"):
                made = await self._commit_intent(call, intent, dirty, claimed)
            text = INTERRUPTED + (
                f"; its change was committed at restart ({', '.join(sha[:10] for sha in made)})"
                if made
                else "; nothing it changed was left uncommitted"
            )
            call.output = call.error = text
            call.commit = made[-1] if made else call.commit
            journal.record_tool_call(call)
            self._publish(call)
            self._warn("recovery", f"tool call {call.id} ({call.tool}): {text}")

    async def _commit_intent(
        self, call: ToolCall, intent: JSONDict, dirty: set[str], claimed: set[str]
    ) -> list[str]:
        files = intent.get("files")
        raw = intent.get("trailers")
        trailers: dict[str, str | None] = (
            {str(k): None if v is None else str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        )
        trailers["Interrupted"] = "committed at restart"
        message = str(intent.get("message"))
        if isinstance(files, list):
            paths = [str(f) for f in files if f in dirty]
            if not paths:
                return []
            try:
                commit = await self._commits.commit(message, trailers, paths)
            except CommitFailed:
                return []
            return [commit.sha] if commit else []
        # A hook tool: whatever changed once it started, and no other interrupted call claims.
        since = call.started_at - 0.05
        paths = [
            f for f in await asyncio.to_thread(self._commits.git.changed_after, since) if f not in claimed
        ]
        if not paths:
            return []
        ctx = CallContext(
            session=call.session,
            call_id=call.call_id,
            origin=str(intent.get("origin") or "tool"),
            tool=call.tool,
        )
        made = await self._commits.commit_hook_changes(
            message, trailers, paths, f"{call.tool} (interrupted)", ctx
        )
        return [c.sha for c in made]

    async def _decisions(self) -> None:
        """An operator's revert, approval or rejection the dead engine had begun: finished as what it
        was (its commit with its attribution, its decision recorded)."""
        for intent in await asyncio.to_thread(self._changes.interrupted):
            done = await self._changes.finish(intent)
            self._warn("recovery", f"an interrupted {intent.kind} ({intent.id}): {done}")

    async def _approvals(self) -> None:
        """A held change whose approval wrote the file and died before the commit: the file has the
        proposed content, uncommitted, and the change still reads pending."""
        git = self._commits.git
        dirty: set[str] | None = None
        for item in self._changes.pending():
            path = Path(os.path.realpath(self._workspace.root / item.file))
            try:
                current = path.read_bytes()
            except OSError:
                continue
            content = (item.content or "").encode("utf-8", "surrogateescape")
            if current != content:
                continue
            if dirty is None:
                dirty = set(await asyncio.to_thread(git.dirty_files))
            if item.file not in dirty:
                continue
            await self._changes.finish_approval(
                item, "an operator (the approval was interrupted, completed at restart)"
            )
            self._warn(
                "recovery", f"the approval of {item.id} ({item.file}) was interrupted; completed at restart"
            )
