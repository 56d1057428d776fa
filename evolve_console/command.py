"""`evolve console`: the subcommand this package adds to the engine's command line (through the
`evolve.commands` entry point), so that the engine never imports the console."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `console` to the `evolve` command's subparsers."""
    p = sub.add_parser("console", parents=[common], help="the operator console (starts the engine if needed)")
    p.add_argument("--attach", metavar="URL", help="attach to an engine elsewhere instead of the workspace's")
    p.add_argument("--token", metavar="TOKEN", help="that engine's token")
    p.add_argument(
        "--no-bell",
        action="store_true",
        help="no terminal bell when a change awaits review or a hook starts failing (also EVOLVE_CONSOLE_BELL=0)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.protocol.workspace import resolve_workspace

    from .launch import LaunchError, is_workspace

    workspace = None if args.attach else resolve_workspace(getattr(args, "workspace", None))
    # Only the default ~/workspace is created unasked (a fresh machine's first start); a directory the
    # user named (--workspace or $OPENCODE_EVOLVE_WORKSPACE) may be a typo.
    named = getattr(args, "workspace", None) or os.environ.get("OPENCODE_EVOLVE_WORKSPACE")
    if workspace is not None and named and not is_workspace(workspace) and not _confirm(workspace):
        print(
            f"evolve console: {workspace} is not an evolve workspace (no hooks/ or config/); check the path, "
            f"or create it with: evolve init {workspace}",
            file=sys.stderr,
        )
        return 1
    try:
        return _run_console(workspace, args.attach, args.token, bell=False if args.no_bell else None)
    except LaunchError as exc:
        print(f"evolve console: {exc}", file=sys.stderr)
        return 1


def _run_console(workspace: Path | None, attach: str | None, token: str | None, bell: bool | None) -> int:
    from engine.protocol import Announcement

    from .app import EvolveConsole
    from .client import Target
    from .launch import LaunchError, engine_for

    if attach:
        if not token:
            raise LaunchError("--attach needs --token (the engine's token, from its state/engine.json)")
        target = Target(attach, token)
    else:
        assert workspace is not None
        target = engine_for(workspace)
    EvolveConsole(target, bell=bell).run()
    if workspace is not None:  # one line, so nobody wonders whether the agent stopped with the console
        found = Announcement.read(workspace)
        print(
            f"evolve console: closed; the engine for {workspace} keeps running"
            + (f" (pid {found.pid})" if found else "")
            + f"; stop it with: evolve stop --workspace {workspace}",
            file=sys.stderr,
        )
    return 0


def _confirm(workspace: object) -> bool:
    """Ask on a terminal whether to create the example workspace; never without one."""
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(
            f"evolve console: {workspace} is not an evolve workspace. Create the example workspace there "
            "and start its engine? [y/N] "
        )
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
