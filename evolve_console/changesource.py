"""What the changes view shows of a change, fetched from the engine: its latest replay, its diff, and a
file of it whole. A commit and a change held for review live under different routes; this module
knows which is which, so the app and the view need not."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from engine.protocol import calls
from engine.protocol.records import ReplayResult

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


async def latest_replay(client: EngineClient, change: ChangeEntry) -> ReplayResult | None:
    """The change's latest replay; None when it has none yet."""
    latest = (
        calls.latest_replay_pending(change.pending_id)
        if change.pending_id
        else calls.latest_replay(change.key)
    )
    try:
        return await client.send(latest)
    except EngineError:
        return None


async def change_diff(client: EngineClient, change: ChangeEntry) -> tuple[Prepared, bool]:
    """The change's diff, parsed and measured, and whether the engine cut it. It is prepared in a
    thread: 2 MB of diff takes a few hundred milliseconds."""
    if change.pending_id:
        pending = await client.send(calls.pending(change.pending_id))
        return await asyncio.to_thread(prepare, pending.diff), False
    diff = await client.send(calls.diff(change.key))
    return await asyncio.to_thread(prepare, diff.diff), diff.truncated


async def whole_file(client: EngineClient, change: ChangeEntry, file: FileDiff) -> WholeFile:
    """`file` of the change as the change leaves it: a held change's file as it would be once
    approved, a commit's as the commit left it."""
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
