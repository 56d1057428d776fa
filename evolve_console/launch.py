"""`evolve console`: find (or start) the workspace's engine, then run the console attached to it.

The engine is started as its own process, so closing the console never stops the agent's hooks.
On a machine with no workspace yet, the example workspace is created first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from engine.protocol import Announcement

from .client import Target


class LaunchError(RuntimeError):
    pass


def is_workspace(workspace: Path) -> bool:
    return (workspace / "hooks").is_dir() or (workspace / "config").is_dir()


def engine_for(workspace: Path, start_timeout: float = 30.0) -> Target:
    """The running engine of `workspace`, started (detached) when none runs."""
    if not is_workspace(workspace):
        print(f"evolve console: no workspace at {workspace}; creating the example workspace", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "engine", "init", str(workspace)], check=True, stdout=subprocess.DEVNULL
        )
    found = Target.announced(str(workspace), alive=True)
    if found:
        return found
    (workspace / "state").mkdir(parents=True, exist_ok=True)
    log = open(workspace / "state" / "engine.log", "ab")  # noqa: SIM115 - handed to the child
    subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--workspace", str(workspace)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        cwd=str(workspace),
        env={**os.environ, "OPENCODE_EVOLVE_WORKSPACE": str(workspace)},
    )
    log.close()
    deadline = time.monotonic() + start_timeout
    while time.monotonic() < deadline:
        time.sleep(0.1)
        found = Target.announced(str(workspace), alive=True)
        if found:
            return found
    raise LaunchError(
        f"the engine for {workspace} did not start within {start_timeout:.0f} s; "
        f"see {workspace / 'state' / 'engine.log'}"
    )


def run(workspace: Path | None, attach: str | None, token: str | None) -> int:
    from .app import EvolveConsole

    if attach:
        if not token:
            raise LaunchError("--attach needs --token (the engine's token, from its state/engine.json)")
        target = Target(attach, token)
    else:
        assert workspace is not None
        target = engine_for(workspace)
    EvolveConsole(target).run()
    if workspace is not None:  # one line, so nobody wonders whether the agent stopped with the console
        found = Announcement.read(workspace)
        print(
            f"evolve console: closed; the engine for {workspace} keeps running"
            + (f" (pid {found.pid})" if found else "")
            + f"; stop it with: evolve stop --workspace {workspace}",
            file=sys.stderr,
        )
    return 0
