"""`evolve demo` and `evolve opencode`: the subcommands this package adds to the engine's command line
(through the `evolve.commands` entry point), so that the engine never imports it. Nothing heavy is
imported until a command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `demo` and `opencode` to the `evolve` command's subparsers."""
    del common  # neither works on the user's workspace
    p = sub.add_parser(
        "demo",
        help="a living agent in a throwaway directory: opencode, the engine and a scripted model, "
        "offline, with the console",
    )
    p.add_argument(
        "--dir",
        metavar="DIR",
        type=Path,
        help="build the demo in DIR (new or empty) and keep it afterwards (default: a temporary "
        "directory, removed when the demo stops)",
    )
    p.add_argument(
        "--heartbeat-ms",
        metavar="MS",
        type=int,
        default=8000,
        help="milliseconds between heartbeats (default 8000)",
    )
    p.set_defaults(func=run_demo)

    p = sub.add_parser("opencode", help="the opencode release evolve is tested with: install it, or show it")
    p.add_argument(
        "action",
        choices=["install", "path"],
        help="install: install it with npm into evolve's cache (unless it is there) and print the "
        "binary's path; path: print that path, exit 1 when it is not installed",
    )
    p.set_defaults(func=run_opencode)


def run_demo(args: argparse.Namespace) -> int:
    from .demo import DemoOptions, run

    return run(DemoOptions(directory=args.dir, heartbeat_ms=args.heartbeat_ms))


def run_opencode(args: argparse.Namespace) -> int:
    from . import opencode_setup

    if args.action == "path":
        found = opencode_setup.installed_binary()
        if found is None:
            print(
                f"evolve opencode: opencode {opencode_setup.OPENCODE_VERSION} is not installed "
                f"(expected at {opencode_setup.binary_path()}); install it with: evolve opencode install",
                file=sys.stderr,
            )
            return 1
        print(found)
        return 0
    try:
        binary = opencode_setup.install(
            progress=lambda text: print(f"evolve opencode: {text}", file=sys.stderr)
        )
        opencode_setup.prepare_seed(progress=lambda text: print(f"evolve opencode: {text}", file=sys.stderr))
    except opencode_setup.SetupError as exc:
        print(f"evolve opencode: {exc}", file=sys.stderr)
        return 1
    print(binary)
    return 0
