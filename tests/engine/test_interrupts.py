"""A Ctrl-C (SIGINT) at any moment of `evolve serve` and `evolve replay`: exit 130, one line, no
traceback, and nothing left of what the command started (the engine's announcement, its hooks'
interpreters, a replay's throwaway copies of the workspace).

The moments: while Python imports the command line (the installed `evolve` script, as a person runs
it), while the command starts its work, and while it does it. `evolve console` and `evolve demo` are
in tests/console/test_interrupts.py and tests/e2e/test_demo_signals.py."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.engine_process import announcement
from tests.support.environment import isolated_env, run_git
from tests.support.processes import importing, processes_in, wait_gone
from tests.support.waiting import wait_for

EVOLVE = str(Path(sys.executable).parent / "evolve")
SLOW_HOOK = '#!/bin/sh\nsleep 5\necho \'{"name": "slow", "stages": ["discover"]}\'\n'

pytestmark = pytest.mark.skipif(not Path(EVOLVE).is_file(), reason="the evolve script is not installed")


def make_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return isolated_env(tmp_path / "home", TMPDIR=str(tmp_path / "tmp"))


def init(tmp_path: Path, env: dict[str, str], name: str = "ws") -> Path:
    ws = tmp_path / name
    subprocess.run([EVOLVE, "init", str(ws)], env=env, check=True, capture_output=True, timeout=60)
    return ws


def interrupt(
    argv: list[str], env: dict[str, str], when: Callable[[subprocess.Popen[str]], object]
) -> tuple[int, list[str], str]:
    """Start `evolve ARGV`, send SIGINT once `when(process)` returns, and wait for the end: the exit
    status, the lines on stderr, and the whole of stderr."""
    proc = subprocess.Popen(
        [EVOLVE, *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        when(proc)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err.splitlines(), err


def during_imports(proc: subprocess.Popen[str]) -> None:
    assert importing(proc.pid), "the command ended (or never imported httpx) before it could be interrupted"


def assert_ended_cleanly(code: int, lines: list[str], err: str, expected: str) -> None:
    assert "Traceback" not in err, err
    assert code == 130, err
    assert len(lines) == 1 and lines[0].startswith(expected), err


@pytest.mark.parametrize("moment", ["importing", "starting", "serving"])
def test_serve_stops_on_a_ctrl_c_at_any_moment(tmp_path: Path, moment: str) -> None:
    env = make_env(tmp_path)
    ws = init(tmp_path, env)
    lock = ws / "state" / "engine.lock"

    def when(proc: subprocess.Popen[str]) -> None:
        if moment == "importing":
            during_imports(proc)
        elif moment == "starting":  # the lock is taken first, the engine is announced last
            wait_for("the engine's lock", lambda: lock.exists() and announcement(ws) is None, interval=0.002)
        else:
            wait_for("the engine's announcement", lambda: announcement(ws), timeout=60)

    code, lines, err = interrupt(["serve", "--workspace", str(ws)], env, when)
    listening = [line for line in lines if " listening on http://127.0.0.1:" in line]
    assert_ended_cleanly(
        code,
        [line for line in lines if line not in listening],
        err,
        "evolve serve: interrupted",
    )
    if moment == "serving":
        assert listening and lines[-1] == f"evolve serve: interrupted; the engine for {ws} stopped", err
    assert announcement(ws) is None
    assert wait_gone(*processes_in(ws)), "a process the engine started outlived it"


@pytest.mark.parametrize("moment", ["importing", "replaying"])
def test_replay_stops_on_a_ctrl_c_and_leaves_no_copy_of_the_workspace(tmp_path: Path, moment: str) -> None:
    env = make_env(tmp_path)
    ws = init(tmp_path, env)
    hook = ws / "hooks" / "slow.sh"
    hook.write_text(SLOW_HOOK)
    hook.chmod(0o755)
    run_git(ws, "add", "-A", env=env)
    run_git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a slow hook", env=env)
    scratch = tmp_path / "tmp"

    def when(proc: subprocess.Popen[str]) -> None:
        if moment == "importing":
            during_imports(proc)
        else:  # the replay's copies of the workspace are made, the slow hook runs in them
            wait_for(
                "the replay's copies", lambda: list(scratch.glob("evolve-replay-*/*/hooks")), interval=0.01
            )

    code, lines, err = interrupt(["replay", "HEAD", "--workspace", str(ws)], env, when)
    assert_ended_cleanly(code, lines, err, "evolve replay: interrupted")
    assert list(scratch.iterdir()) == []
    assert wait_gone(*processes_in(tmp_path)), "a hook the replay started outlived it"
