"""The console's first hour, against a real engine: what it says to do while nothing happens yet (no
opencode connected), rows that stay where the operator picked them while new ones arrive, and a
connection bar that never cuts the key to the engine's problems.

The screen is read as it is drawn (`drawn`: the lines a widget paints), in the sizes an operator's
terminal has: 100 and 160 columns.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static

from evolve_console.app import EvolveConsole
from evolve_console.nextstep import Evolve, connect_steps
from evolve_console.table import KeyedTable
from tests.console.conftest import (
    StartEngine,
    connected,
    drawn,
    edit_prompt,
    make_isolated_env,
    table,
    text_of,
    wait_until,
)
from tests.support.engine_process import EngineProcess

Scenario = Callable[[EvolveConsole, Pilot[Any]], Coroutine[Any, Any, None]]


def run(engine: EngineProcess, size: tuple[int, int], scenario: Scenario) -> None:
    """The console attached to `engine`, `evolve` on the operator's PATH, in a terminal of `size`."""

    async def main() -> None:
        app = EvolveConsole(engine.target, evolve=Evolve())
        async with app.run_test(size=size) as pilot:
            await connected(pilot)
            await scenario(app, pilot)

    asyncio.run(main())


def connect_opencode(engine: EngineProcess) -> None:
    """An opencode connection as the plugin announces it (its address is the engine's own: it
    answers, which is all the engine's liveness check asks)."""
    engine.post(
        "/v1/opencode/connect", {"url": engine.url, "directory": str(engine.workspace), "mode": "server"}
    )


def guide(app: EvolveConsole) -> Static:
    return app.main.query_one("#connect-guide", Static)


def line_of(shown: KeyedTable, key: str) -> int:
    """The line of the screen (under the table's header) that shows the row `key`."""
    return shown.get_row_index(key) - shown.scroll_offset.y + 1


# ---- what to do next --------------------------------------------------------------------------------


def test_without_opencode_each_view_says_what_comes_and_view_1_how_to_connect_this_agent(
    engine: EngineProcess,
) -> None:
    workspace = str(engine.workspace)
    shim_install = f"evolve shim install --workspace {workspace} --project ~/code/myproject"

    async def scenario(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        # The main screen: the hook runs (the example hook's discover run), and above them, in words,
        # why nothing else comes and the exact commands that connect this workspace's agent.
        await wait_until(pilot, lambda: guide(app).display, "the way to connect opencode")
        said = text_of(guide(app))
        assert said.startswith(
            "No opencode is connected: until one is, the agent's hooks do not run and its heartbeat waits."
        ), said
        lines = [line.strip() for line in said.splitlines()]
        assert shim_install in lines
        assert (
            'cd ~/code/myproject && "$(evolve opencode install)"   (installs opencode first if needed)'
            in lines
        )
        assert (
            "evolve opencode model --project ~/code/myproject --base-url URL --model NAME --api-key-env VAR"
            in lines
        )
        assert lines[-1] == "Or first see a living agent, offline, in a throwaway directory: evolve demo"
        shown = [line.lstrip("▊").strip() for line in drawn(guide(app)).splitlines()]
        assert " ".join(shown) == " ".join(lines), "all of it on screen"
        short = [line for line in lines if workspace not in line]  # (the test's workspace is long)
        assert [line for line in shown if line in short] == short, "at 100 columns, each on a line"
        runs = table(app, "runs")
        assert runs.row_count >= 1 and runs.region.height > 5, "the runs still have room below it"

        # The heartbeat: when its first tick comes, and the same commands.
        await pilot.press("4")
        beat = text_of(app.main.query_one("#hb-summary"))
        assert (
            "WAITING · no opencode connected: the first tick comes 30:00 after one connects (how: below)"
            in beat
        )
        assert shim_install in beat and "evolve demo" in beat

        # Each empty table: what will appear there and when, and where to read how to connect.
        for key, view, words in (
            ("2", "stages", "Stage results appear here as the engine dispatches a stage to the hooks"),
            ("3", "sessions", "Sessions appear here as a connected opencode opens them"),
            ("6", "tools", "Tool calls appear here as the agent calls the tools"),
        ):
            await pilot.press(key)
            await pilot.pause()
            shown = " ".join(" ".join(drawn(table(app, view)).split()).split("\n"))
            assert words in shown, shown
            assert "No opencode is connected to this agent yet: view 1 says how to connect one." in shown

        # An opencode connects: the way to connect goes, the views say only what will come.
        await asyncio.to_thread(connect_opencode, engine)
        await wait_until(pilot, lambda: not guide(app).display, "the way to connect to go")
        shown = " ".join(drawn(table(app, "tools")).split())
        assert "Tool calls appear here" in shown and "view 1 says" not in shown
        await pilot.press("4")
        assert "WAITING" not in text_of(app.main.query_one("#hb-summary"))

    run(engine, (100, 30), scenario)


def test_the_commands_it_says_connect_this_workspace_when_run_as_written(tmp_path: Path) -> None:
    """The commands up to starting opencode, run as an operator pastes them into a shell with
    `evolve` on the PATH (in a HOME of the test's own): the project is made, and its opencode.json
    names the plugin, serving this very workspace."""
    workspace = tmp_path / "my agent"  # (a space: the command quotes it)
    home = tmp_path / "home"
    bin_dir = str(Path(sys.executable).parent)  # this checkout's evolve
    env = make_isolated_env(home, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    steps = connect_steps(str(workspace), Evolve()).plain.splitlines()
    commands = [line.strip() for line in steps if line.startswith("  ")]
    assert commands[0] == "mkdir -p ~/code/myproject" and commands[1].startswith("evolve shim install ")

    for command in commands[:2]:
        done = subprocess.run(
            ["bash", "-c", command], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, (command, done.stderr)

    config = json.loads((home / "code" / "myproject" / "opencode.json").read_text(encoding="utf-8"))
    entries = [e for e in config["plugin"] if isinstance(e, list) and str(e[0]).endswith("/evolve.js")]
    assert len(entries) == 1 and entries[0][1]["workspace"] == str(workspace), config["plugin"]


# ---- rows that stay still ---------------------------------------------------------------------------


def test_rows_arriving_while_the_operator_presses_up_move_neither_the_cursor_nor_the_rows(
    workspace: Path, start_engine: StartEngine
) -> None:
    """As in the demo: the operator looks for a change four rows up while the agent goes on. Here a
    change held for review ends the list, so each new commit comes in above it and the table is
    drawn anew each time: the picked row must stay the picked row, on its line."""
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    for n in range(24):
        engine.call_tool("notes_add", {"text": f"note {n}"})
    edit_prompt(engine, "Answer plainly", "Answer tersely", origin="tool", session="ses_agent", call_id="c1")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: changes.row_count >= 26, "the history and the held change")
        keys = changes.keys()
        assert changes.following and changes.selected_key() == keys[-1], "at first, the newest row"
        target = keys[-5]  # four rows up

        await pilot.press("up")
        picked = line_of(changes, target)
        before = drawn(changes).splitlines()
        for n in range(2):  # a new commit between the presses
            await asyncio.to_thread(engine.call_tool, "notes_add", {"text": f"later {n}"})
            await wait_until(pilot, lambda n=n: changes.row_count == len(keys) + n + 1, "the new commit")
            await pilot.press("up")
        await pilot.press("up")

        assert changes.selected_key() == target, "four presses of up: four rows up from where it was"
        assert not changes.following and changes.unseen == 2
        after = drawn(changes).splitlines()
        assert line_of(changes, target) == picked, "the row on the line it was on"
        assert after[1 : picked + 1] == before[1 : picked + 1], "and the rows above it where they were"
        assert "following paused · +2 new · g: follow" in after[-1]

        await pilot.press("g")
        assert changes.following and changes.selected_key() == changes.keys()[-1]

    run(engine, (100, 30), scenario)


def test_the_runs_say_following_paused_and_its_key_whole_at_100_columns(engine: EngineProcess) -> None:
    for _ in range(3):
        engine.stage("idle", {})

    async def scenario(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        runs = table(app, "runs")
        await wait_until(pilot, lambda: runs.row_count >= 4, "the runs")
        runs.focus()
        await pilot.press("up")
        await asyncio.to_thread(engine.stage, "idle", {})
        status = app.query_one("#runs-status")
        await wait_until(
            pilot,
            lambda: drawn(status).strip().startswith("following paused · +1 new (g to follow) · "),
            lambda: f"the key to follow again on screen ({drawn(status)!r})",
        )

    run(engine, (100, 30), scenario)


# ---- the connection bar -----------------------------------------------------------------------------


def test_the_key_to_the_engines_problems_is_never_cut(workspace: Path, start_engine: StartEngine) -> None:
    (workspace / "config" / "evolve.jsonc").write_text('{\n  "hook_timeout": "soon",\n}\n', encoding="utf-8")
    engine = start_engine(workspace)
    problems = "config: 1 error, last good config in use (c: read)"
    connect_opencode(engine)  # the longest bar: opencode connected, with its mode

    def at(width: int) -> Scenario:
        async def scenario(app: EvolveConsole, pilot: Pilot[Any]) -> None:
            bar = app.main.connection
            await wait_until(pilot, lambda: problems in drawn(bar), lambda: f"the problems in {drawn(bar)!r}")
            lines = drawn(bar).splitlines()
            assert lines[0].startswith(f" engine ● connected  {workspace}  "), lines
            assert " ".join(lines).count("opencode ● 1 connected (server)") == 1, lines
            assert len([line for line in lines if problems in line]) == 1, "whole, on one line"
            assert len(lines) <= 3 and all(len(line) <= width for line in lines), lines

        return scenario

    for width in (160, 100):
        run(engine, (width, 30), at(width))
