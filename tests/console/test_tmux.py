"""The installed `evolve console` in a real terminal (tmux): first start on a fresh machine, keys, quit.

HOME is a temporary directory, so `evolve console` finds no workspace, creates the example one under
~/workspace and starts the engine itself as its own process. The test reads the screen with
`tmux capture-pane`, and after `q` checks that the engine is still running (closing the console never
stops the agent's hooks), then stops it with `evolve stop`.

A second test checks that the console's "N runs in the journal" equals the journal's count when it
attaches to an engine that already has runs (it once counted the engine's replayed recent events on
top of the journal's count: "2 runs in the journal" for 1 run).

Skipped when tmux is not installed (`apt-get install tmux`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.engine_process import EngineProcess, stop_workspace_engine
from tests.support.environment import evolve_as_printed, isolated_env
from tests.support.processes import pid_alive, wait_gone
from tests.support.terminal import Terminal
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)


def installed_evolve() -> str:
    """The `evolve` command of the environment running the tests (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "evolve"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("evolve")
    if found is None:
        pytest.fail("the evolve command is not installed (pip install -e . in the project's venv)")
    return found


def clean_env(home: Path) -> dict[str, str]:
    """HOME in tmp, no workspace or evolve settings of the developer, an empty global git config."""
    return isolated_env(home, drop=("TMUX",), TERM="xterm-256color")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, dict[str, str], Path]]:
    home = tmp_path / "home"
    env = clean_env(home)
    term = Terminal(tmp_path, env)
    workspace = home / "workspace"
    try:
        yield term, env, workspace
    finally:
        term.kill()
        # Whatever happened, no engine of this test outlives it (only the one it caused, by pid).
        if (workspace / "state" / "engine.json").exists():
            stop_workspace_engine(workspace, env, command=[installed_evolve()], timeout=15)


def test_console_starts_engine_shows_views_and_quits_leaving_engine_running(
    terminal: tuple[Terminal, dict[str, str], Path], tmp_path: Path
) -> None:
    term, env, workspace = terminal
    evolve = installed_evolve()
    status_file = tmp_path / "console.status"
    # The pane's shell records the console's exit status (tmux 3.3 leaves #{pane_dead_status} empty here).
    term.start(f"{evolve} console; echo $? > {status_file}", cwd=tmp_path)

    screen = term.wait_for("engine ● connected", lambda s: "engine ● connected" in s, timeout=60)
    assert (workspace / "hooks" / "notes.py").is_file(), "the example workspace was not created"
    assert "Hook runs" in screen and "Self-modifications" in screen
    announcement = json.loads((workspace / "state" / "engine.json").read_text())
    engine_pid = int(announcement["pid"])
    assert pid_alive(engine_pid)

    # 5: self-modifications, with the workspace's initial commit.
    term.keys("5")
    screen = term.wait_for("the initial commit", lambda s: "Approve (a)" in s and "initial" in s)
    assert "Revert (r)" in screen

    # 4: the heartbeat view.
    term.keys("4")
    screen = term.wait_for(
        "the heartbeat view", lambda s: "Fire now (f)" in s and "heartbeats since cleanup" in s
    )
    assert "interval" in screen

    # q: the console exits cleanly...
    term.keys("q")
    deadline = time.monotonic() + 15
    while not status_file.exists() or not status_file.read_text().strip():
        assert time.monotonic() < deadline, "the console did not exit after q:\n" + term.screen()
        time.sleep(0.1)
    assert status_file.read_text().strip() == "0", "the console exited with an error:\n" + term.screen()
    # ...saying in one line that the engine keeps running, and how to stop it, with a command that
    # works in this shell (`evolve` when its PATH finds this evolve, else the full path).
    stop_command = f"{evolve_as_printed(env, evolve)} stop --workspace {workspace}"
    assert (
        f"evolve console: closed; the engine for {workspace} keeps running (pid {engine_pid}); "
        f"stop it with: {stop_command}"
    ) in term.tmux("capture-pane", "-p", "-J", "-t", term.name), term.screen()  # -J: wrapped lines joined

    # ...and the engine it started keeps running and answering.
    assert pid_alive(engine_pid), "closing the console stopped the engine"
    health = httpx.get(
        f"{announcement['url']}/v1/health",
        headers={"authorization": f"Bearer {announcement['token']}"},
        timeout=5,
        verify=False,
    )
    assert health.status_code == 200 and health.json()["pid"] == engine_pid

    stop = subprocess.run(["bash", "-c", stop_command], env=env, capture_output=True, text=True, timeout=30)
    assert stop.returncode == 0, stop.stderr
    assert wait_gone(engine_pid, timeout=15), "the printed stop command did not stop the engine"
    assert not (workspace / "state" / "engine.json").exists()


def test_console_run_count_equals_the_journal_on_start(
    terminal: tuple[Terminal, dict[str, str], Path], tmp_path: Path
) -> None:
    term, env, workspace = terminal
    evolve = installed_evolve()
    # The engine first, and its discover run committed to the journal, so the console finds both.
    subprocess.run([evolve, "init", str(workspace)], env=env, check=True, capture_output=True, timeout=60)
    engine = EngineProcess(
        workspace, env, tmp_path / "engine.log", command=[evolve], cwd=tmp_path, own_session=True
    )
    try:
        engine.start(timeout=60)
        wait_for(
            "the engine's discover run in the journal",
            lambda: engine.get("/v1/runs", limit=1)["counts"]["runs"] >= 1,
            timeout=60,
        )

        term.start(f"{evolve} console", cwd=tmp_path)
        screen = term.wait_for(
            "the run count",
            lambda s: "engine ● connected" in s and re.search(r"\d runs? in the journal", s),
            timeout=30,
        )
        # The console applies events four times a second: its figure is read once it has stayed the
        # same for a second (four batches), so a batch still to come cannot change it afterwards.
        shown: int | None = None
        since = time.monotonic()
        deadline = since + 15.0
        while time.monotonic() - since < 1.0:
            assert time.monotonic() < deadline, f"the run count never settled:\n{screen}"
            time.sleep(0.1)
            screen = term.screen()
            match = re.search(r"([\d,]+) runs? in the journal", screen)
            value = int(match.group(1).replace(",", "")) if match else None
            if value != shown:
                shown, since = value, time.monotonic()
        counts = engine.get("/v1/runs", limit=1)["counts"]
        assert shown == counts["runs"], (
            f"the console shows {shown} runs, the journal has {counts['runs']}:\n{screen}"
        )
    finally:
        term.kill()
        engine.stop(wait=15)
