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
