"""`evolve replay`: what a change does to the agent's recorded traffic, replayed by the running
engine (so that the console sees it) or, when none runs, in this process from the workspace's
journal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.client import EngineClient
from engine.cli.common import UsageError, print_json, running_client, workspace
from engine.cli.jobs import ProgressLine, check_change, follow, read_pending
from engine.protocol import calls

if TYPE_CHECKING:
    from engine.protocol.records import PendingChange

PROGRESS = ProgressLine("replay")


def cmd_replay(args: argparse.Namespace) -> int:
    from engine.protocol.records import ReplayResult
    from engine.replay.inputs import UnknownStage, check_stages
    from engine.replay.text import render

    root = workspace(args)
    try:
        stages = check_stages(args.stage or [])
    except UnknownStage as exc:
        raise UsageError(str(exc)) from exc
    if args.limit < 1:
        raise UsageError("--limit must be at least 1 (recorded inputs per stage)")
    pending = args.change.startswith("chg_")
    client = running_client(args, timeout=3600.0)
    if client is not None:  # the engine runs: replay there, so the console sees it
        with contextlib.closing(client):
            check_change(root, args.change, pending)  # a mistake is a usage error here as well
            data = _replay_remotely(client, args.change, pending, stages, args.limit)
    else:
        data = asyncio.run(_replay_here(root, args.change, pending, stages, args.limit))
    result = ReplayResult.from_dict(data)
    if args.json:
        print_json(data)
    else:
        sys.stdout.write(render(result, color=sys.stdout.isatty()))
    if result.state == "cancelled":
        return 130
    return 0 if result.state == "done" else 1


def _replay_remotely(
    client: EngineClient, ref: str, pending: bool, stages: list[str], limit: int
) -> dict[str, Any]:
    start = calls.replay_pending(ref, stages, limit) if pending else calls.replay(ref, stages, limit)
    replay_id = client.send(start).id
    return follow(client, replay_id, calls.replay_status, calls.replay_cancel, PROGRESS, "replaying", 0.2)


async def _replay_here(root: Path, ref: str, pending: bool, stages: list[str], limit: int) -> dict[str, Any]:
    """No engine runs: replay in this process, from the workspace's journal (read only)."""
    from engine.changes.gitstore import GitStore
    from engine.changes.history import ChangeError
    from engine.journal.store import Journal
    from engine.protocol.records import Record, ReplayProgress
    from engine.replay.replayer import Replayer, ReplayError
    from engine.workspace.layout import Workspace

    ws = Workspace(root)
    journal = Journal(ws.journal_file) if ws.journal_file.exists() else None

    def pending_change(pending_id: str) -> PendingChange:
        try:
            return read_pending(root, pending_id)
        except UsageError as exc:
            raise ChangeError(str(exc)) from None

    def publish(record: Record) -> None:
        if isinstance(record, ReplayProgress):
            PROGRESS.show(record.done, record.total, record.message)

    replayer = Replayer(
        root, GitStore(root), journal, os.environ, publish, pending_change, ws.state_dir / "replays"
    )
    try:
        change = await (replayer.pending_change(ref) if pending else replayer.commit(ref))
        return (await replayer.replay(change, stages or None, limit)).to_dict()
    except ReplayError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        PROGRESS.clear()
        await replayer.close()
        if journal is not None:
            journal.close()
