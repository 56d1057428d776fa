"""`evolve eval`: the workspace's behaviour checks (evals/*.jsonc), or its last real turns, run before
and after a change through the real harness: by the running engine (so that the console sees it),
or, when none runs, in this process. Exit status: 0 nothing regressed, 1 a scenario that passed
before fails after (or the checks could not run), 2 a mistake in the command, 130 interrupted."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.client import EngineClient, EngineUnavailable
from engine.cli.common import UsageError, directory, print_json, running_client, workspace
from engine.cli.jobs import ProgressLine, check_change, follow, read_pending
from engine.protocol import calls

if TYPE_CHECKING:
    from engine.protocol.records import EvalRun, PendingChange

PROGRESS = ProgressLine("eval")


def cmd_eval(args: argparse.Namespace) -> int:
    from engine.evals.compare import exit_status
    from engine.evals.text import render
    from engine.protocol.records import EvalRun

    root = workspace(args)
    if args.repeat is not None and args.repeat < 1:
        raise UsageError("--repeat must be at least 1 (runs of each scenario at each version)")
    if args.turns is not None and args.turns < 1:
        raise UsageError("--turns must be at least 1 (the last user turns to re-ask)")
    if args.turns and args.scenario:
        raise UsageError("give --scenario or --turns, not both: re-asked turns are not scenarios")
    project = directory(args.project, "--project") if args.project else None
    pending = args.change.startswith("chg_")
    touched = check_change(root, args.change, pending)
    if not any(f.startswith("evals/") for f in touched):  # else the change may bring the scenario
        _check_scenarios(root, args.scenario or [])
    _ensure_opencode()
    client = running_client(args, timeout=3600.0)
    if client is not None:  # the engine runs: check there, so that the console sees it
        with contextlib.closing(client):
            data = _remotely(client, args, pending, project)
    else:
        data = asyncio.run(_here(root, args, pending, project))
    result = EvalRun.from_dict(data)
    if args.json:
        print_json(data)
    else:
        sys.stdout.write(render(result, color=sys.stdout.isatty()))
    return exit_status(result)


def _check_scenarios(root: Path, names: list[str]) -> None:
    """The scenarios asked for are the workspace's."""
    from engine.evals.scenarios import load_scenarios

    known = {s.name for s in load_scenarios(root).scenarios}
    for name in names:
        if name not in known:
            raise UsageError(
                f"no scenario {name!r} (the workspace has: {', '.join(sorted(known)) or 'none'})"
            )


def _ensure_opencode() -> None:
    """opencode's pinned release, installed with npm into evolve's cache when it is not there."""
    from engine.opencode import setup

    if setup.installed_binary() is not None:
        return
    try:
        setup.install(progress=lambda text: print(f"evolve eval: {text}", file=sys.stderr))
    except setup.SetupError as exc:
        raise UsageError(str(exc)) from exc


def _remotely(
    client: EngineClient, args: argparse.Namespace, pending: bool, project: Path | None
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "scenarios": args.scenario or None,
        "repeat": args.repeat,
        "turns": args.turns,
        "project": str(project) if project else None,
    }
    start = (
        calls.evaluate_pending(args.change, **kwargs) if pending else calls.evaluate(args.change, **kwargs)
    )
    try:
        eval_id = client.send(start).id
    except EngineUnavailable as exc:
        raise UsageError(str(exc)) from exc
    return follow(
        client, eval_id, calls.eval_status, calls.eval_cancel, PROGRESS, "running the scenarios", 0.3
    )


async def _here(root: Path, args: argparse.Namespace, pending: bool, project: Path | None) -> dict[str, Any]:
    """No engine runs: check in this process (its copies start engines of their own)."""
    from engine.changes.errors import ChangeError
    from engine.changes.gitstore import GitStore
    from engine.evals.service import EvalError, Evals
    from engine.journal.store import Journal
    from engine.opencode.sessions import SessionStore
    from engine.protocol.records import EvalProgress, Record
    from engine.workspace.config import load_config
    from engine.workspace.layout import StateFile, Workspace

    ws = Workspace(root)
    config = load_config(ws.config_file, os.environ).config
    journal = Journal(ws.journal_file) if ws.journal_file.exists() and args.turns else None
    sessions = SessionStore(journal, lambda change: None)

    def pending_change(pending_id: str) -> PendingChange:
        try:
            return read_pending(root, pending_id)
        except UsageError as exc:
            raise ChangeError(str(exc)) from None

    def chat_model() -> dict[str, str] | None:
        stored = StateFile(ws.state_file).read().get("model")
        if isinstance(stored, dict) and stored.get("providerID") and stored.get("modelID"):
            return {"providerID": str(stored["providerID"]), "modelID": str(stored["modelID"])}
        return config.model.to_dict() if config.model else None

    def publish(record: Record, kind: object = None) -> None:
        if isinstance(record, EvalProgress):
            PROGRESS.show(record.done, record.total, record.message)

    evals = Evals(
        root=root,
        git=GitStore(root),
        config=lambda: config,
        env=os.environ,
        publish=publish,
        store=ws.state_dir / "evals",
        pending=pending_change,
        project=lambda: None,
        model=chat_model,
        sessions=lambda: [s.info() for s in sessions.known()],
        recorded=sessions.history,
    )
    try:
        change = await (evals.pending_change(args.change) if pending else evals.commit(args.change))
        task = asyncio.ensure_future(
            evals.check(
                change, scenarios=args.scenario or None, repeat=args.repeat, turns=args.turns, project=project
            )
        )
        try:
            result: EvalRun = await asyncio.shield(task)
        except asyncio.CancelledError:  # Ctrl-C: stop the eval, wait until its processes are gone
            await evals.close()
            raise
        return result.to_dict()
    except EvalError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        PROGRESS.clear()
        await evals.close()
        if journal is not None:
            journal.close()
