"""What the changes view shows of a change, fetched from the engine: its latest replay, its diff (with
what to know about it), its reach, and a file of it whole. A commit, a change held for review and an
attempt its test rejected live under different routes; this module knows which is which, so the app
and the view need not."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engine.protocol import calls
from engine.protocol.records import Reach, ReplayResult

from .client import EngineClient, EngineError
from .diffmodel import FileDiff
from .diffprepare import Prepared, prepare
from .model import ChangeEntry


@dataclass(frozen=True)
class WholeFile:
    """A file of a change whole: its content after the change, and how it reads (`note`); `binary`
    when it cannot be shown."""

    content: str
    note: str
    binary: bool = False


@dataclass(frozen=True)
class ChangeDiff:
    """A change's diff as the detail shows it: parsed and measured, whether the engine cut it, what
    to know before reading it (`warning`: a held change whose file changed since it was proposed is
    shown as what the agent changed, not as what approving it would do now), and the output of the
    test that rejected an attempt."""

    prepared: Prepared
    truncated: bool = False
    warning: str | None = None
    test_output: str | None = None


async def latest_replay(client: EngineClient, change: ChangeEntry) -> ReplayResult | None:
    """The change's latest replay; None when it has none yet (an attempt is never replayed)."""
    if change.attempt_id is not None:
        return None
    latest = (
        calls.latest_replay_pending(change.pending_id)
        if change.pending_id
        else calls.latest_replay(change.key)
    )
    try:
        return await client.send(latest)
    except EngineError:
        return None


async def change_diff(client: EngineClient, change: ChangeEntry) -> ChangeDiff:
    """The change's diff, parsed and measured (in a thread: 2 MB of diff takes a few hundred
    milliseconds). A held change whose file changed since it was proposed shows what the agent
    changed (its base to its content), never only the diff against the file now, which would undo
    what changed under it; an attempt, what it proposed and its test's output."""
    if change.attempt_id:
        attempt = await client.send(calls.attempt(change.attempt_id))
        return ChangeDiff(await asyncio.to_thread(prepare, attempt.diff or ""), test_output=attempt.output)
    if change.pending_id:
        pending = await client.send(calls.pending(change.pending_id))
        if pending.changed and pending.proposed_diff is not None:
            warning = pending.warning or f"{pending.file} changed since the agent proposed this change"
            shown = await asyncio.to_thread(prepare, pending.proposed_diff)
            return ChangeDiff(shown, warning=f"{warning} (shown: what the agent changed)")
        return ChangeDiff(await asyncio.to_thread(prepare, pending.diff), warning=pending.warning)
    diff = await client.send(calls.diff(change.key))
    return ChangeDiff(await asyncio.to_thread(prepare, diff.diff), diff.truncated)


async def change_reach(client: EngineClient, change: ChangeEntry) -> Reach | None:
    """The sessions that run a commit and the agent's answers since; None for what was never
    installed (a held change, an attempt) or when the engine cannot say."""
    if not change.is_commit:
        return None
    try:
        return await client.send(calls.reach(change.key))
    except EngineError:
        return None


async def whole_file(client: EngineClient, change: ChangeEntry, file: FileDiff) -> WholeFile:
    """`file` of the change as the change leaves it: a held change's file as it would be once
    approved, a commit's as the commit left it."""
    if change.attempt_id:
        raise EngineError(
            "an attempt was never installed, so there is no whole file of it: its diff is what it proposed"
        )
    if change.pending_id:
        pending = await client.send(calls.pending(change.pending_id))
        return WholeFile(pending.content or "", "as it would be once approved")
    found = await client.send(calls.file_at(change.key, file.new_path or file.path, file.old_path))
    if found.binary:
        return WholeFile("", "", binary=True)
    note = f"as {found.sha[:10]} left it"
    if found.truncated:
        note += " (cut at 2,000,000 characters)"
    return WholeFile(found.content or "", note)
