"""`evolve console`: the subcommand this package adds to the engine's command line (through the
`evolve.commands` entry point), so that the engine never imports the console."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App


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
    except KeyboardInterrupt:  # before the console opened (a Ctrl-C in it is a key: it says to press q)
        _closing_line(workspace, "interrupted")
        return 130


def _run_console(workspace: Path | None, attach: str | None, token: str | None, bell: bool | None) -> int:
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
