"""`evolve console`: the subcommand this package adds to the engine's command line (through the
`evolve.commands` entry point), so that the engine never imports the console."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `console` to the `evolve` command's subparsers."""
    p = sub.add_parser("console", parents=[common], help="the operator console (starts the engine if needed)")
    p.add_argument("--attach", metavar="URL", help="attach to an engine elsewhere instead of the workspace's")
    p.add_argument("--token", metavar="TOKEN", help="that engine's token")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os

    from engine.protocol.workspace import resolve_workspace

    from .launch import LaunchError, is_workspace
    from .launch import run as launch

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
        return launch(workspace, args.attach, args.token)
    except LaunchError as exc:
        print(f"evolve console: {exc}", file=sys.stderr)
        return 1


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
