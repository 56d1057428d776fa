"""The environment that engines, `evolve` commands and git run with under test: nothing of the
developer's settings (workspace, engine, opencode, git or Textual configuration) leaks in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EVOLVE = [sys.executable, "-m", "engine"]
"""The `evolve` command of this checkout, with the Python that runs the tests."""


def evolve_command() -> str:
    """`evolve` as a shell command: the one installed beside this Python, else `python -m engine`."""
    beside = Path(sys.executable).parent / "evolve"
    return str(beside) if beside.is_file() else f"{sys.executable} -m engine"


SETTINGS = ("EVOLVE_", "OPENCODE_")
ISOLATED = (*SETTINGS, "GIT_", "TEXTUAL_", "XDG_")
# The test run's own switch (tests/conftest.py, --warm-start): every engine under test gets it. And
# where the run's opencode is installed (EVOLVE_CACHE_DIR): an engine whose behaviour checks start
# opencode finds the release the end-to-end tests installed.
TEST_RUN = ("EVOLVE_HOOK_WARM_START", "EVOLVE_CACHE_DIR")
# Where the test run keeps compiled modules (tests/conftest.py): never in the checkout, also for the
# processes started with no PYTHON* variables.
KEPT = (*TEST_RUN, "PYTHONPYCACHEPREFIX")
# The size of the terminal the tests run in (pytest-xdist's workers set 80x24): a console started in a
# terminal of its own must take that terminal's size.
TERMINAL_SIZE = ("COLUMNS", "LINES")


def _setting(name: str) -> bool:
    return name.startswith(SETTINGS) and name not in TEST_RUN


def without_settings(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (the process's environment) without EVOLVE_* and OPENCODE_* variables, which would point
    opencode or evolve at another workspace or engine (but with the test run's own switches)."""
    return {k: v for k, v in (os.environ if base is None else base).items() if not _setting(k)}


def bare_env(**variables: str) -> dict[str, str]:
    """`variables` and nothing else of the environment but where the test run keeps compiled modules."""
    return {**{k: v for k, v in os.environ.items() if k == "PYTHONPYCACHEPREFIX"}, **variables}


def isolated_env(home: Path, *, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """The environment with HOME at `home` (created), an empty global git config, no system git config,
    and no EVOLVE_*, OPENCODE_*, GIT_*, TEXTUAL_*, XDG_* variables (nor those starting with a prefix in
    `drop`) but the test run's own switches and its PYTHONPYCACHEPREFIX, nor COLUMNS and LINES; `extra`
    is set last."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith(ISOLATED + drop) or k in KEPT) and k not in TERMINAL_SIZE
    }
    home.mkdir(parents=True, exist_ok=True)
    gitconfig = home / "empty.gitconfig"
    gitconfig.touch()
    env.update(
        HOME=str(home),
        GIT_CONFIG_GLOBAL=str(gitconfig),
        GIT_CONFIG_NOSYSTEM="1",
        XDG_CONFIG_HOME=str(home / ".config"),
    )
    env.update(extra)
    return env


def run_git(cwd: Path, *args: str, env: dict[str, str], check: bool = True) -> str:
    """`git ARGS` in `cwd`; its stdout. With `check`, a non-zero exit fails with git's stderr."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def drop_shims(env: MutableMapping[str, str]) -> str:
    """Take version-manager shims (pyenv, asdf) off `env`'s PATH; returns the python3 found on it then.

    A pyenv `python3` shim is a shell script costing ~200 ms per start, which would bury what a
    benchmark measures; hooks keep their `#!/usr/bin/env python3` line and get the real python3.
    """
    parts = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(p for p in parts if not p.rstrip("/").endswith("/shims"))
    return shutil.which("python3", path=env["PATH"]) or "?"
