"""`evolve demo` as a user runs it, in a real terminal (tmux): real opencode, the engine, the scripted
model and the console. The test waits until the console shows the demo's notice of the bad hook
edit, finds that edit in the self-modifications view with the arrow keys, reverts it with `r` and
`y`, checks the revert in the workspace's git, and quits with `q`: the demo then stops every process
it started.

`--dir` keeps the demo's directory, so that the test can read its git history and logs. HOME is a
temporary directory; opencode and its plugin dependencies come from the cache the other end-to-end
tests use (EVOLVE_CACHE_DIR, else the project's .cache/), installed once.
Skipped without tmux.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve_demo import opencode_setup, story
from tests.support.engine_process import announcement
from tests.support.environment import evolve_command, isolated_env, run_git
from tests.support.processes import pid_alive, processes_in, wait_gone
from tests.support.terminal import Terminal
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)

BAD_LINE = story.BAD_RULE.split(":")[1].strip()[:24]  # "forget every note that i", as the diff shows it


@pytest.fixture
def demo(tmp_path: Path, opencode_bin: Path) -> Iterator[tuple[Terminal, Path, Path]]:
    env = isolated_env(
        tmp_path / "home",
        drop=("TMUX", "PYTHON"),
        TERM="xterm-256color",
        EVOLVE_CACHE_DIR=str(opencode_setup.cache_dir()),
    )
    term = Terminal(tmp_path, env, size=(160, 48))
    base = tmp_path / "demo"
    status = tmp_path / "demo.status"
    try:
        yield term, base, status
    finally:
        term.kill()  # a hangup: the demo stops what it started
        leftovers = processes_in(base)
        if leftovers and not wait_gone(*leftovers, timeout=30):
            for pid in leftovers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_the_operator_finds_and_reverts_the_bad_hook_edit(
    demo: tuple[Terminal, Path, Path], tmp_path: Path
) -> None:
    term, base, status = demo
    term.start(f"{evolve_command()} demo --dir {base}; echo $? > {status}", cwd=tmp_path)
    ws = base / "workspace"

    # The agent at work: a chat turn's tool call in the hook runs view, then the notice of the bad edit.
    term.wait_for("a chat turn's tool call", lambda s: "execute_tool" in s, timeout=180)
    term.wait_for("the notice of the bad hook edit", lambda s: "passed its test, but" in s, timeout=240)
    commits = run_git(ws, "log", "--format=%H %s", env=term.env or {}).splitlines()
    bad = [c.split()[0] for c in commits if c.endswith(" edit hook notes.py")]
    assert len(bad) == 1, commits
    assert story.BAD_RULE in (ws / "hooks" / "notes.py").read_text()

    # 5, then up the history until the detail pane shows the bad edit (its subject is unique: the
    # rejected edit made no commit), and its diff.
    term.keys("5")
    term.wait_for("the self-modifications view", lambda s: "Revert (r)" in s)
    for _ in range(60):
        try:
            term.wait_for("the bad edit selected", lambda s: "▊ edit hook notes.py" in s, timeout=1.0)
            break
        except AssertionError:
            term.keys("Up")
    else:
        pytest.fail(f"the bad edit was never selected:\n{term.screen()}")
    # The diff comes last in the detail, after the change's story (why, the call, the checks, who runs
    # it): on a busy machine more sessions have run the edit by now and push it below the fold. As an
    # operator would: tab to the detail, end, shift+tab back to the table.
    try:
        term.wait_for("the bad edit's diff", lambda s: BAD_LINE in s, timeout=5)
    except AssertionError:
        term.keys("Tab", "End")
        term.wait_for("the bad edit's diff, at the end of the detail", lambda s: BAD_LINE in s, timeout=25)
        term.keys("BTab")
    term.keys("r")
    term.wait_for("the revert question", lambda s: f"Revert {bad[0][:10]}" in s)
    term.keys("y")

    def reverted() -> str | None:
        log = run_git(ws, "log", "--format=%H%n%B%x00", env=term.env or {})
        found = [c for c in log.split("\0") if f"Evolve-Reverts: {bad[0]}" in c]
        return found[0] if found else None

    commit = wait_for("the revert commit", reverted, timeout=60)
    assert "revert: edit hook notes.py" in commit and "Evolve-Origin: operator" in commit
    assert story.BAD_RULE not in (ws / "hooks" / "notes.py").read_text()
    # The warning goes once it was acted on, and the demo says what the revert did.
    term.wait_for(
        "the demo's word that it is fixed", lambda s: "Done: hooks/notes.py no longer" in s, timeout=30
    )
    # Its toast goes with it (the screen is drawn again a moment after a toast is taken away).
    term.wait_for("the warning gone", lambda s: "passed its test, but" not in s, timeout=5)

    # q: the console closes and the demo stops opencode, the engine and the scripted model.
    engine = announcement(ws)
    assert engine is not None
    children = processes_in(base)
    assert pid_alive(int(engine["pid"])) and children
    term.keys("q")
    wait_for("the demo to exit", lambda: status.is_file() and status.read_text().strip(), timeout=60)
    assert status.read_text().strip() == "0", term.screen()
    assert wait_gone(int(engine["pid"]), *children, timeout=30), processes_in(base)
    assert "evolve demo: stopped opencode, the engine and the scripted model; kept" in term.screen()
