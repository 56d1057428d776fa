"""`evolve console`: find (or start) the workspace's engine, then run the console attached to it.

The engine is started as its own process, so closing the console never stops the agent's hooks.
On a machine with no workspace yet, the example workspace is created first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .client import Target


class LaunchError(RuntimeError):
    pass


def is_workspace(workspace: Path) -> bool:
    return (workspace / "hooks").is_dir() or (workspace / "config").is_dir()


def engine_for(workspace: Path, start_timeout: float = 30.0, create: bool = True) -> Target:
    """The running engine of `workspace`, started (detached) when none runs; `create`: make the
    example workspace first when there is none."""
    if create and not is_workspace(workspace):
        print(f"evolve console: no workspace at {workspace}; creating the example workspace", file=sys.stderr)
        _to_the_end([sys.executable, "-m", "engine", "init", str(workspace)])
    found = Target.announced(str(workspace), alive=True)
    if found:
        return found
    (workspace / "state").mkdir(parents=True, exist_ok=True)
    log = open(workspace / "state" / "engine.log", "ab")  # noqa: SIM115 - handed to the child
    engine, interrupted = _start(
        [sys.executable, "-m", "engine", "serve", "--workspace", str(workspace)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        cwd=str(workspace),
        env={**os.environ, "OPENCODE_EVOLVE_WORKSPACE": str(workspace)},
    )
    try:
        log.close()
        deadline = time.monotonic() + start_timeout
        if interrupted:
            raise KeyboardInterrupt
        while time.monotonic() < deadline:
            time.sleep(0.1)
            found = Target.announced(str(workspace), alive=True)
            if found:
                return found
    except KeyboardInterrupt:  # before the console opened: the engine it was starting stops too
        engine.terminate()
        _wait_to_the_end(engine)
        raise
    raise LaunchError(
        f"the engine for {workspace} did not start within {start_timeout:.0f} s; "
        f"see {workspace / 'state' / 'engine.log'}"
    )


def _to_the_end(argv: list[str]) -> None:
    """Run `argv` to its end, even when a Ctrl-C comes meanwhile (raised once it is done): a
    workspace is created whole or not at all. Its own session: the terminal's Ctrl-C is not its."""
    proc, interrupted = _start(argv, stdout=subprocess.DEVNULL, start_new_session=True)
    code = _wait_to_the_end(proc, interrupted)
    if code != 0:
        raise LaunchError(f"creating the example workspace failed: {' '.join(argv[2:])} exited {code}")


def _start(argv: list[str], **options: Any) -> tuple[subprocess.Popen[bytes], bool]:
    """`subprocess.Popen(argv, **options)` and whether a Ctrl-C came meanwhile: one raised inside
    Popen would leave the process running with nobody holding it. (Off the main thread, where the
    console's `E` key starts an engine, no Ctrl-C is raised.)"""
    if threading.current_thread() is not threading.main_thread():
        return subprocess.Popen(argv, **options), False
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum))
    try:
        return subprocess.Popen(argv, **options), bool(interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_to_the_end(proc: subprocess.Popen[bytes], interrupted: bool = False) -> int:
    """`proc.wait()`, through any Ctrl-C meanwhile (raised once it is done)."""
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        raise KeyboardInterrupt
    return code
