"""`evolve console`: the subcommand this package adds to the engine's command line (through the
`evolve.commands` entry point), so that the engine never imports the console.

Its agents come from repeated options (`--workspace DIR`, `--attach URL --token-file FILE`) and from
the agents file (`agentsfile.py`): the default one when no option names an agent, or the one
`--agents FILE` names, after those of the options. One agent is the console as it always was; several
open on the fleet view. `--web` serves the same console to a browser (`webserve.py`).
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agentsfile import AgentSpec
    from .client import Target


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `console` to the `evolve` command's subparsers."""
    # Not `common`'s --workspace (one value): the console's may be repeated, one agent each.
    p = sub.add_parser("console", help="the operator console (starts the engine if needed)")
    p.add_argument(
        "--workspace",
        metavar="DIR",
        action="append",
        dest="workspaces",
        help="an agent's workspace (repeat it for several; default: $OPENCODE_EVOLVE_WORKSPACE, else ~/workspace)",
    )
    p.add_argument(
        "--attach",
        metavar="URL",
        action="append",
        default=[],
        help="an engine elsewhere (repeat it for several)",
    )
    p.add_argument(
        "--token-file",
        metavar="FILE",
        action="append",
        default=[],
        help="the file holding the token of the --attach before it (mode 600)",
    )
    p.add_argument(
        "--token", metavar="TOKEN", help="the token of a single --attach (a token file keeps it off ps)"
    )
    p.add_argument("--ca", metavar="FILE", help="the certificate to trust for the https engines of --attach")
    p.add_argument(
        "--agents",
        metavar="FILE",
        help="an agents file (default: $XDG_CONFIG_HOME/evolve/agents.jsonc, read when no option names an agent)",
    )
    p.add_argument(
        "--no-bell",
        action="store_true",
        help="no terminal bell when a change awaits review or a hook starts failing (also EVOLVE_CONSOLE_BELL=0)",
    )
    p.add_argument(
        "--web", action="store_true", help="serve the console to a browser instead of this terminal"
    )
    p.add_argument(
        "--web-host", metavar="HOST", default="127.0.0.1", help="--web: the address (default 127.0.0.1)"
    )
    p.add_argument(
        "--web-port", metavar="PORT", type=int, default=8765, help="--web: the port (default 8765)"
    )
    p.add_argument(
        "--web-token-file",
        metavar="FILE",
        help="--web: the file holding the password (mode 600; default: a new one, printed with the address)",
    )
    p.add_argument(
        "--behind-tunnel",
        action="store_true",
        help="--web: allow a --web-host that is not loopback (it is inside a tunnel or a private network you trust)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .agentsfile import AgentsFileError
    from .launch import LaunchError

    try:
        if args.web:
            from .webserve import WebError, serve_web

            try:
                return serve_web(args)
            except WebError as exc:
                print(f"evolve console --web: {exc}", file=sys.stderr)
                return 1
        specs = agents_of(args)
        if specs is None:
            return _single(args)
        return _fleet(specs, bell=False if args.no_bell else None)
    except (LaunchError, AgentsFileError) as exc:
        print(f"evolve console: {exc}", file=sys.stderr)
        return 1


def agents_of(args: argparse.Namespace) -> list[AgentSpec] | None:
    """The agents the options and the agents file name; None for the console of one agent as it
    always was (one workspace or one --attach, or none and no agents file)."""
    from .agentsfile import AgentsFileError, AgentSpec, default_path, load, name_for

    workspaces = list(args.workspaces or [])
    if not workspaces and getattr(args, "workspace", None):
        workspaces = [args.workspace]  # `evolve --workspace DIR console`
    attach, token_files = list(args.attach or []), list(args.token_file or [])
    if token_files and len(token_files) != len(attach):
        raise AgentsFileError("the command line", "give one --token-file after each --attach")
    named = len(workspaces) + len(attach)
    file = Path(args.agents) if args.agents else (default_path() if named == 0 else None)
    from_file = load(file) if file is not None and (args.agents or file.exists()) else []
    if not from_file and named <= 1 and not token_files:
        return None
    taken = {spec.name for spec in from_file}
    specs: list[AgentSpec] = []
    for workspace in workspaces:
        path = Path(os.path.expanduser(workspace)).resolve()
        specs.append(AgentSpec(name_for(workspace=path, taken=taken), workspace=path))
        taken.add(specs[-1].name)
    ca = Path(args.ca) if args.ca else None
    for n, url in enumerate(attach):
        if not token_files:
            raise AgentsFileError(
                "the command line", f"--attach {url}: give its token with --token-file FILE"
            )
        specs.append(
            AgentSpec(name_for(url=url, taken=taken), url=url, token_file=Path(token_files[n]), ca=ca)
        )
        taken.add(specs[-1].name)
    return specs + from_file


def targets_of(specs: list[AgentSpec]) -> list[tuple[str, Target]]:
    """Each agent's engine: an engine by URL with the token of its file; a workspace's running
    engine, started when none runs (all at once: one slow start holds up no other). A workspace
    whose engine does not start is still listed: its row says it is down, and E starts it."""
    from .client import Target
    from .launch import LaunchError, engine_for

    def local(spec: AgentSpec) -> Target:
        assert spec.workspace is not None
        try:
            return engine_for(spec.workspace, create=False)
        except (LaunchError, OSError) as exc:
            print(f"evolve console: {spec.name}: {exc}", file=sys.stderr)
            return Target("", "", str(spec.workspace))

    with ThreadPoolExecutor(max_workers=8) as pool:
        started = {spec.name: pool.submit(local, spec) for spec in specs if spec.workspace is not None}
        found = []
        for spec in specs:
            if spec.workspace is not None:
                found.append((spec.name, started[spec.name].result()))
            else:
                assert spec.url is not None
                found.append(
                    (spec.name, Target(spec.url, spec.read_token(), ca=str(spec.ca) if spec.ca else None))
                )
    return found


def _fleet(specs: list[AgentSpec], bell: bool | None) -> int:
    from .app import EvolveConsole

    EvolveConsole(targets_of(specs), bell=bell).run()
    local = [spec for spec in specs if spec.workspace is not None]
    if local:
        print(
            f"evolve console: closed; the engines of {', '.join(s.name for s in local)} keep running "
            "(evolve stop --workspace DIR stops one)",
            file=sys.stderr,
        )
    return 0


def _single(args: argparse.Namespace) -> int:
    from engine.protocol.workspace import resolve_workspace

    from .launch import is_workspace

    attach = args.attach[0] if args.attach else None
    given = (args.workspaces or [None])[0] or getattr(args, "workspace", None)
    workspace = None if attach else resolve_workspace(given)
    # Only the default ~/workspace is created unasked (a fresh machine's first start); a directory the
    # user named (--workspace or $OPENCODE_EVOLVE_WORKSPACE) may be a typo.
    named = given or os.environ.get("OPENCODE_EVOLVE_WORKSPACE")
    if workspace is not None and named and not is_workspace(workspace) and not _confirm(workspace):
        print(
            f"evolve console: {workspace} is not an evolve workspace (no hooks/ or config/); check the path, "
            f"or create it with: evolve init {workspace}",
            file=sys.stderr,
        )
        return 1
    return _run_console(workspace, attach, args.token, bell=False if args.no_bell else None, ca=args.ca)


def _run_console(
    workspace: Path | None, attach: str | None, token: str | None, bell: bool | None, ca: str | None = None
) -> int:
    from engine.protocol import Announcement

    from .app import EvolveConsole
    from .client import Target
    from .launch import LaunchError, engine_for

    if attach:
        if not token:
            raise LaunchError(
                "--attach needs --token-file FILE (or --token TOKEN): the engine's token, from its "
                "state/engine.json or the file it was started with"
            )
        target = Target(attach, token, ca=ca)
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
