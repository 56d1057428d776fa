"""`evolve demo` and `evolve opencode` (install, path, model): the subcommands this package adds to the engine's command line
(through the `evolve.commands` entry point), so that the engine never imports it. Nothing heavy is
imported until a command runs."""

from __future__ import annotations

import argparse
import os
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

    p = sub.add_parser(
        "opencode",
        help="the opencode release evolve is tested with (install it, or show it), and a project's model",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser(
        "install",
        help="install it with npm into evolve's cache (unless it is there) and print the binary's path",
    )
    a.set_defaults(func=run_opencode)
    a = actions.add_parser("path", help="print the binary's path; exit 1 when it is not installed")
    a.set_defaults(func=run_opencode)
    a = actions.add_parser(
        "model",
        help="make an OpenAI-compatible server the model of an opencode project (merged into its "
        "opencode.json; nothing else changes)",
    )
    a.add_argument(
        "--project", metavar="DIR", help="the opencode project directory (default: the current one)"
    )
    a.add_argument(
        "--base-url", required=True, metavar="URL", help="the server's base, e.g. http://127.0.0.1:8080/v1"
    )
    a.add_argument("--model", required=True, metavar="NAME", help="the model's name, as the server knows it")
    a.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the environment variable that holds the API key (opencode reads it when it starts); "
        "none for a server that needs no key",
    )
    a.add_argument(
        "--provider",
        default="llm",
        metavar="ID",
        help="the provider's id in opencode.json; the model becomes ID/NAME (default: llm)",
    )
    a.add_argument("--name", metavar="TEXT", help="the provider's name, as opencode shows it")
    a.set_defaults(func=run_model)


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


def run_model(args: argparse.Namespace) -> int:
    """`evolve opencode model`: the provider merged into the project's opencode.json."""
    from engine.cli.common import UsageError, print_json, project_directory
    from engine.opencode.model import (
        ModelError,
        check_base_url,
        check_env_name,
        check_model,
        check_provider,
        set_model,
    )
    from engine.opencode.shim_install import InstallError

    try:  # the input first: a refused command creates nothing
        check_base_url(args.base_url)
        check_model(args.model)
        check_provider(args.provider)
        if args.api_key_env is not None:
            check_env_name(args.api_key_env)
        project = project_directory(args.project, "opencode model")
        result = set_model(project, args.base_url, args.model, args.api_key_env, args.provider, args.name)
    except ModelError as exc:
        raise UsageError(str(exc)) from exc
    except InstallError as exc:
        print(f"evolve opencode model: {exc}", file=sys.stderr)
        return 1
    print_json(result)
    if args.api_key_env and not os.environ.get(args.api_key_env):
        print(
            f"evolve opencode model: {args.api_key_env} is not set in this shell; set it where you start "
            f"opencode (export {args.api_key_env}=…)",
            file=sys.stderr,
        )
    print(
        f"evolve opencode model: opencode in {project} now uses {result['model']}; check that it answers "
        f"with: evolve doctor --project {project}",
        file=sys.stderr,
    )
    return 0
