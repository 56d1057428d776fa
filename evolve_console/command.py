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
    p.add_argument(
        "--no-bell",
        action="store_true",
        help="no terminal bell when a change awaits review or a hook starts failing (also EVOLVE_CONSOLE_BELL=0)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.protocol.workspace import resolve_workspace

    from .app import EvolveConsole
    from .client import Target
    from .launch import LaunchError, engine_for

    try:
        workspace = None if args.attach else resolve_workspace(getattr(args, "workspace", None))
        if args.attach:
            if not args.token:
                raise LaunchError("--attach needs --token (the engine's token, from its state/engine.json)")
            target = Target(args.attach, args.token)
        else:
            assert workspace is not None
            target = engine_for(workspace)
        EvolveConsole(target, bell=False if args.no_bell else None).run()
        return 0
    except LaunchError as exc:
        print(f"evolve console: {exc}", file=sys.stderr)
        return 1
