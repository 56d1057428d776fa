"""`evolve demo` ended by a signal at any moment: a Ctrl-C (SIGINT) while it starts, a SIGINT or a
closed terminal (SIGHUP) while the console shows, and a closed terminal while the demo is already
stopping after `q`. Each time the demo stops opencode, the engine and the scripted model, removes its
temporary directory whole, and says so in one line (SIGINT: exit 130), with no traceback.

The demo's temporary directory is made in the test's own TMPDIR, so that what is left of it shows;
HOME is a temporary directory; opencode and its plugin dependencies come from evolve's cache."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.engine_process import announcement
from tests.support.environment import isolated_env
from tests.support.processes import child_of, importing, pid_alive, processes_in, wait_gone
from tests.support.terminal import Terminal
from tests.support.waiting import wait_for

EVOLVE = str(Path(sys.executable).parent / "evolve")
STOPPED = "stopped opencode, the engine and the scripted model, and removed the demo's directory"

pytestmark = pytest.mark.skipif(not Path(EVOLVE).is_file(), reason="the evolve script is not installed")
needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)


@pytest.fixture
def scratch(tmp_path: Path, opencode_bin: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """The demo's environment (HOME and TMPDIR of the test) and that TMPDIR; whatever a failed test
    left running in it is killed at the end."""
    del opencode_bin  # installed (or the test skipped) before the demo needs it
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = isolated_env(tmp_path / "home", drop=("TMUX", "PYTHON"), TERM="xterm-256color", TMPDIR=str(tmp))
    try:
        yield env, tmp
    finally:
        for pid in processes_in(tmp):
            if not wait_gone(pid, timeout=1):
                os.kill(pid, signal.SIGKILL)


def demo_dir(tmp: Path) -> Path | None:
    found = list(tmp.glob("evolve-demo-*"))
    return found[0] if found else None


def assert_nothing_left(tmp: Path, *pids: int) -> None:
    assert wait_gone(*pids, timeout=60), "the demo did not exit"
    assert wait_gone(*processes_in(tmp), timeout=30), (
        f"processes of the demo outlived it: {processes_in(tmp)}"
    )
    assert list(tmp.iterdir()) == [], (
        f"left in the temporary directory: {sorted(p.name for p in tmp.iterdir())}"
    )


def engine_up(tmp: Path) -> object:
    base = demo_dir(tmp)
    return (
        base is not None
        and announcement(base / "workspace") is not None
        and not (base / "opencode.log").exists()
    )


def opencode_up(tmp: Path) -> object:
    base = demo_dir(tmp)
    return base is not None and (base / "opencode.log").exists()


MOMENTS: dict[str, Callable[[Path], object]] = {
    "the engine started": engine_up,
    "opencode starting": opencode_up,
}


@pytest.mark.parametrize("moment", ["importing", *MOMENTS])
def test_a_ctrl_c_while_the_demo_starts_stops_what_it_started(
    scratch: tuple[dict[str, str], Path], moment: str
) -> None:
    env, tmp = scratch
    proc = subprocess.Popen(
        [EVOLVE, "demo"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if moment == "importing":
            assert importing(proc.pid), "the demo ended before it could be interrupted"
        else:
            wait_for(moment, lambda: MOMENTS[moment](tmp), timeout=120, interval=0.01)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err and proc.returncode == 130, err
    lines = err.splitlines()
    said = [line for line in lines if "interrupted" in line]
    if moment == "importing":
        assert said == lines == ["evolve demo: interrupted"], err
    else:
        assert said == [f"evolve demo: interrupted; {STOPPED}"] == lines[-1:], err
    assert_nothing_left(tmp)


@pytest.fixture
def demo_in_terminal(
    scratch: tuple[dict[str, str], Path], tmp_path: Path
) -> Iterator[tuple[Terminal, Path, int]]:
    """`evolve demo` in tmux, its console open: (the terminal, the TMPDIR, the demo's pid)."""
    env, tmp = scratch
    term = Terminal(tmp_path, env, size=(160, 48))
    try:
        term.start(f"{EVOLVE} demo; echo exit=$?", cwd=tmp_path)
        shell = term.pane_pid()
        pid = wait_for("the demo's process", lambda: child_of(shell), interval=0.01)
        term.wait_for("the console on the demo", lambda s: "engine ● connected" in s, timeout=180)
        yield term, tmp, pid
    finally:
        term.kill()


@needs_tmux
def test_closing_the_terminal_while_the_console_shows_stops_the_demo(
    demo_in_terminal: tuple[Terminal, Path, int],
) -> None:
    term, tmp, pid = demo_in_terminal
    assert processes_in(tmp)
    # The demo's opencode has a temporary directory of its own, inside the demo's: its native library
    # is there, not in the TMPDIR the demo was given.
    base = demo_dir(tmp)
    assert base is not None
    wait_for(
        "opencode's library in its own directory",
        lambda: list((base / "home" / ".tmp").glob(".*.so")),
        timeout=120,
    )
    assert [p.name for p in tmp.iterdir()] == [base.name]
    term.kill()  # tmux's server goes: the demo gets SIGHUP, as when a terminal window is closed
    assert_nothing_left(tmp, pid)


@needs_tmux
def test_closing_the_terminal_while_the_demo_stops_after_q_leaves_nothing(
    demo_in_terminal: tuple[Terminal, Path, int],
) -> None:
    term, tmp, pid = demo_in_terminal
    term.keys("q")
    term.wait_for("the console closed", lambda s: "engine ● connected" not in s, timeout=30)
    assert pid_alive(pid) and demo_dir(tmp) is not None, "the demo had stopped before the terminal closed"
    term.kill()
    assert_nothing_left(tmp, pid)


@needs_tmux
def test_a_sigint_while_the_console_shows_closes_it_and_stops_the_demo(
    demo_in_terminal: tuple[Terminal, Path, int],
) -> None:
    term, tmp, pid = demo_in_terminal
    os.kill(pid, signal.SIGINT)
    term.wait_for("the demo's exit", lambda s: "exit=" in s, timeout=90)
    text = term.tmux("capture-pane", "-p", "-J", "-S", "-100", "-t", term.name)
    assert "Traceback" not in text and "exit=130" in text, text
    assert [line for line in text.splitlines() if "interrupted" in line] == [
        f"evolve demo: interrupted; {STOPPED}"
    ]
    assert_nothing_left(tmp, pid)
