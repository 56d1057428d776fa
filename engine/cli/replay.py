"""`evolve replay`: what a change does to the agent's recorded traffic, replayed by the running
engine (so that the console sees it) or, when none runs, in this process from the workspace's
journal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.client import EngineClient, EngineUnavailable
from engine.cli.common import UsageError, print_json, running_client, workspace
from engine.protocol import calls

if TYPE_CHECKING:
    from engine.protocol.records import PendingChange


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
            _check_change(root, args.change, pending)  # a mistake is a usage error here as well
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


def _read_pending(root: Path, pending_id: str) -> PendingChange:
    from engine.protocol.records import PendingChange

    path = root / "state" / "pending" / f"{os.path.basename(pending_id)}.json"
    try:
        return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        raise UsageError(f"no pending change {pending_id!r} in {root}") from None


def _check_change(root: Path, ref: str, pending: bool) -> None:
    """The commit or the pending change exists (and is still pending)."""
    from engine.changes.gitstore import GitError, GitStore

    if pending:
        item = _read_pending(root, ref)
        if item.status != "pending":
            raise UsageError(f"change {ref} was already {item.status}")
        return
    try:
        sha = GitStore(root).resolve(ref)
    except GitError:
        sha = ""
    if not sha:
        raise UsageError(f"no commit {ref!r} in {root}")


def _progress(done: int, total: int, message: str) -> None:
    if sys.stderr.isatty():
        figures = f" {done}/{total}" if total else ""
        sys.stderr.write(f"\r\x1b[Kreplay: {message}{figures}")
        sys.stderr.flush()


def _replay_remotely(
    client: EngineClient, ref: str, pending: bool, stages: list[str], limit: int
) -> dict[str, Any]:
    import time

    start = calls.replay_pending(ref, stages, limit) if pending else calls.replay(ref, stages, limit)
    replay_id = client.send(start).id
    try:
        while True:
            found = client.send(calls.replay_status(replay_id))
            if found.state != "running":
                return found.to_dict()
            _progress(found.done, found.total, "replaying")
            time.sleep(0.2)
    except KeyboardInterrupt:
        with contextlib.suppress(EngineUnavailable):
            client.send(calls.replay_cancel(replay_id))
        raise
    finally:
        _progress_done()


def _progress_done() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


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

    def read_pending(pending_id: str) -> PendingChange:
        try:
            return _read_pending(root, pending_id)
        except UsageError as exc:
            raise ChangeError(str(exc)) from None

    def publish(record: Record) -> None:
        if isinstance(record, ReplayProgress):
            _progress(record.done, record.total, record.message)

    replayer = Replayer(
        root, GitStore(root), journal, os.environ, publish, read_pending, ws.state_dir / "replays"
    )
    try:
        change = await (replayer.pending_change(ref) if pending else replayer.commit(ref))
        return (await replayer.replay(change, stages or None, limit)).to_dict()
    except ReplayError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        _progress_done()
        await replayer.close()
        if journal is not None:
            journal.close()
