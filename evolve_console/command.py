"""`evolve console`: the subcommand this package adds to the engine's command line (through the
`evolve.commands` entry point), so that the engine never imports the console.

Its agents come from repeated options (`--workspace DIR`, `--attach URL --token-file FILE`) and from
the agents file (`agentsfile.py`): the default one when no option names an agent, or the one
`--agents FILE` names, after those of the options. One agent is the console as it always was; several
open on the fleet view. `--web` serves the same console to a browser (`webserve.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

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

    run_in_terminal(EvolveConsole(targets_of(specs), bell=bell))
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
    try:
        return _run_console(workspace, attach, args.token, bell=False if args.no_bell else None, ca=args.ca)
    except KeyboardInterrupt:  # before the console opened (a Ctrl-C in it is a key: it says to press q)
        _closing_line(workspace, "interrupted")
        return 130


def _run_console(
    workspace: Path | None, attach: str | None, token: str | None, bell: bool | None, ca: str | None = None
) -> int:
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
    app = EvolveConsole(target, bell=bell)
    interrupted: list[int] = []

    def on_sigint(signum: int, frame: object) -> None:
        # A SIGINT from elsewhere (`kill -INT`; in the console the Ctrl-C key is a key) closes it as q
        # does; one that comes while it is still starting, as soon as it runs (its terminal restored).
        interrupted.append(signum)
        threading.Thread(target=_once_running, args=(app, app.exit, None, 130), daemon=True).start()

    signal.signal(signal.SIGINT, on_sigint)
    run_in_terminal(app)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _closing_line(workspace, "interrupted" if interrupted else "closed")
    return 130 if interrupted else 0


def run_in_terminal(app: App[Any]) -> None:
    """`app.run()`, its process left as it was. Textual resumes its terminal on any SIGCONT, even one
    with no suspend before it (the kernel sends one with the SIGHUP of a closed terminal) and one
    after it closed: it then starts an input thread that spins on the dead terminal and keeps the
    process from ever exiting. Here a SIGCONT resumes it only after a SIGTSTP (Ctrl-Z) suspended it,
    and Textual's handlers go with it."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    threading.Thread(target=_once_running, args=(app, _resume_after_suspend_only), daemon=True).start()
    try:
        app.run()
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def _resume_after_suspend_only() -> None:
    """Wrap Textual's SIGTSTP and SIGCONT handlers (in the main thread, the app running)."""
    suspend, resume = signal.getsignal(signal.SIGTSTP), signal.getsignal(signal.SIGCONT)
    suspended: list[int] = []

    def on_suspend(signum: int, frame: FrameType | None) -> None:
        suspended.append(signum)
        if callable(suspend):
            suspend(signum, frame)

    def on_resume(signum: int, frame: FrameType | None) -> None:
        if suspended and callable(resume):
            suspended.clear()
            resume(signum, frame)

    signal.signal(signal.SIGTSTP, on_suspend)
    signal.signal(signal.SIGCONT, on_resume)


def _once_running(app: App[Any], then: Callable[..., object], *args: object) -> None:
    """Call `then(*args)` in the app's thread once it runs (nothing if it never does, or closed)."""
    deadline = time.monotonic() + 60
    while not app.is_running and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(RuntimeError):  # closed already
        app.call_from_thread(then, *args)


def _closing_line(workspace: Path | None, what: str) -> None:
    """One line, so nobody wonders whether the agent stopped with the console."""
    from engine.protocol import Announcement

    if workspace is None and what == "closed":  # attached to an engine elsewhere: nothing to say
        return
    found = Announcement.read(workspace) if workspace is not None else None
    if found is None:
        line = f"evolve console: {what}"
    else:
        line = (
            f"evolve console: {what}; the engine for {workspace} keeps running (pid {found.pid}); "
            f"stop it with: {evolve_here()} stop --workspace {workspace}"
        )
    with contextlib.suppress(OSError):  # the terminal is gone
        print(line, file=sys.stderr)


def evolve_here() -> str:
    """`evolve` as the shell that started this one can run it, in one line: `evolve` when its PATH
    finds this program, else the program's full path (./scripts/run.sh runs .venv/bin/evolve without
    it on PATH)."""
    from .nextstep import evolve_command  # rich, only once the console has closed

    return evolve_command(activate=False).command


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
