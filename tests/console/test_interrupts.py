"""A SIGINT at any moment of `evolve console`, in a real terminal (tmux), on a fresh machine (HOME
is a temporary directory, so the console creates the example workspace and starts its engine).

- While Python imports the command line, or while the console waits for the engine it is starting:
  exit 130 with one line and no traceback; the engine it was starting is stopped (nothing runs).
- Once the console shows: a SIGINT (from `kill -INT`; in the console, the Ctrl-C key is a key of the
  console, which says which key quits) closes it as `q` does, with exit 130 and the one line that says
  the engine keeps running and how to stop it, a command that works in that shell.

Skipped without tmux."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_process import announcement, stop_workspace_engine
from tests.support.environment import evolve_as_printed, isolated_env
from tests.support.processes import child_of, importing, pid_alive, processes_in, wait_gone
from tests.support.terminal import Terminal
from tests.support.waiting import wait_for

EVOLVE = str(Path(sys.executable).parent / "evolve")

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None or not Path(EVOLVE).is_file(),
    reason="tmux is not installed (apt-get install tmux), or the evolve script is not",
)


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[Terminal, dict[str, str], Path, int]]:
    """`evolve console` started in a terminal; (terminal, its environment, the workspace, its pid)."""
    env = isolated_env(tmp_path / "home", drop=("TMUX",), TERM="xterm-256color")
    term = Terminal(tmp_path, env)
    workspace = tmp_path / "home" / "workspace"
    try:
        term.start(f"{EVOLVE} console; echo exit=$?", cwd=tmp_path)
        shell = term.pane_pid()
        pid = wait_for("the console's process", lambda: child_of(shell), interval=0.002)
        yield term, env, workspace, pid
    finally:
        term.kill()
        if announcement(workspace) is not None:
            stop_workspace_engine(workspace, env, command=[EVOLVE], timeout=15)


def ended(term: Terminal) -> str:
    """The pane's text once the console has exited, wrapped lines joined."""
    term.wait_for("the console to exit", lambda s: "exit=" in s, timeout=60)
    return term.tmux("capture-pane", "-p", "-J", "-S", "-100", "-t", term.name)


@pytest.mark.parametrize("moment", ["importing", "starting the engine"])
def test_a_ctrl_c_before_the_console_opens_stops_what_it_started(
    console: tuple[Terminal, dict[str, str], Path, int], moment: str
) -> None:
    term, _env, workspace, pid = console
    if moment == "importing":
        assert importing(pid), "the console ended before it could be interrupted"
    else:  # the workspace is made, the engine is starting and has not announced itself yet
        wait_for(
            "the engine starting",
            lambda: (workspace / "state" / "engine.log").exists() and announcement(workspace) is None,
            interval=0.002,
        )
    os.kill(pid, signal.SIGINT)
    text = ended(term)
    assert "Traceback" not in text, text
    assert "exit=130" in text, text
    assert [line for line in text.splitlines() if "interrupted" in line] == ["evolve console: interrupted"], (
        text
    )
    assert announcement(workspace) is None
    if workspace.exists():
        assert wait_gone(*processes_in(workspace), timeout=15), "the engine it was starting still runs"


def test_a_sigint_closes_the_open_console_and_says_how_to_stop_the_engine(
    console: tuple[Terminal, dict[str, str], Path, int],
) -> None:
    term, env, workspace, pid = console
    term.wait_for("engine ● connected", lambda s: "engine ● connected" in s, timeout=60)
    found = announcement(workspace)
    assert found is not None
    os.kill(pid, signal.SIGINT)
    text = ended(term)
    assert "Traceback" not in text and "exit=130" in text, text
    stop_command = f"{evolve_as_printed(env, EVOLVE)} stop --workspace {workspace}"
    line = (
        f"evolve console: interrupted; the engine for {workspace} keeps running (pid {found['pid']}); "
        f"stop it with: {stop_command}"
    )
    assert [x for x in text.splitlines() if "evolve console:" in x and "creating" not in x] == [line], text
    assert pid_alive(int(found["pid"]))
    stop = subprocess.run(["bash", "-c", stop_command], env=env, capture_output=True, text=True, timeout=30)
    assert stop.returncode == 0, stop.stderr
    assert wait_gone(int(found["pid"]), timeout=15)
