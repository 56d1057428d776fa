"""Every key in reach and said for what it does, against a real engine: `?` lists the keys of the view
or the dialog shown; the keys that need the engine are dimmed while it does not answer; at 100
columns every view, key and badge is on screen (the bars wrap), and at 160 columns the origin and
files of a change read whole."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Button

from evolve_console.app import EvolveConsole
from evolve_console.help import HelpScreen, KeyHelp
from evolve_console.keybar import KeyBar
from evolve_console.screens import RevertScreen
from evolve_console.table import KeyedTable
from evolve_console.viewbar import ViewBar
from tests.console.conftest import (
    StartEngine,
    connected,
    drive,
    edit_prompt,
    notifications,
    row_keys,
    select_row,
    settle,
    table,
    wait_until,
    write_hook,
)
from tests.support.engine_process import EngineProcess
from tests.support.environment import run_git

FAIL_IDLE_HOOK = """#!/usr/bin/env python3
import json, sys
json.load(sys.stdin)
if sys.argv[1] == "idle":
    sys.stderr.write("this hook refuses idle\\n")
    sys.exit(3)
print("{}")
"""


def help_keys(app: EvolveConsole) -> dict[str, KeyHelp]:
    screen = app.screen
    assert isinstance(screen, HelpScreen), screen
    return {key.name: key for key in screen.keys}


async def open_help(app: EvolveConsole, pilot: Pilot[Any]) -> HelpScreen:
    under = app.screen
    await pilot.press("question_mark")
    return await wait_until(
        pilot,
        lambda: app.screen if isinstance(app.screen, HelpScreen) else None,
        f"the keys of {type(under).__name__}",
    )


def bar_lines(widget: KeyBar | ViewBar) -> list[str]:
    size = widget.size
    return [widget.render_line(y).text.rstrip() for y in range(size.height)]


# ---- ? -----------------------------------------------------------------------------------------------


def test_question_mark_lists_the_keys_of_the_view_and_of_a_dialog_with_what_each_does(
    engine: EngineProcess,
) -> None:
    edit_prompt(engine, "Answer plainly", "Answer tersely")
    initial, edit = [c["sha"] for c in reversed(engine.get("/v1/changes")["changes"])]

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        screen = await open_help(app, pilot)
        assert screen.heading == "Keys in view 1, Hook runs"
        assert [g.title for g in screen.groups] == ["this view: Hook runs", "every view", "the console"]
        keys = help_keys(app)
        assert keys["Failures"] == KeyHelp("x", "Failures", "Show only failed runs", True)
        assert keys["Fire"] == KeyHelp("f", "Fire", "Run one heartbeat tick now", True)
        assert keys["Self-modifications"] == KeyHelp(
            "5", "Self-modifications", "Show view 5, self-modifications", True
        )
        assert keys["Keys"].does == "The keys of this view or dialog, with what each does"
        assert "Approve" not in keys, "another view's keys are not this view's"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, "back to the view")
        assert app.shown == "runs"

        # View 5 on the first commit: it cannot be reverted, so r is listed as doing nothing now.
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: edit in changes.rows, "the changes")
        await select_row(pilot, changes, initial)
        await open_help(app, pilot)
        keys = help_keys(app)
        assert keys["Revert"] == KeyHelp("r", "Revert", "Revert the selected change (asks first)", False)
        assert keys["Replay"].enabled and keys["Needs review"].does == "Show only what needs review"
        await pilot.press("question_mark")  # ? again closes it
        await wait_until(pilot, lambda: app.screen is app.main, "back to the view")

        # In a dialog, the dialog's keys; escape goes back to the dialog, then out of it.
        await select_row(pilot, changes, edit)
        await pilot.press("r")
        dialog = await wait_until(
            pilot, lambda: app.screen if isinstance(app.screen, RevertScreen) else None, "the revert dialog"
        )
        screen = await open_help(app, pilot)
        assert screen.heading == "Keys of this dialog: revert a change"
        keys = help_keys(app)
        assert keys["Revert"] == KeyHelp("y", "Revert", "Revert, refreshing the checked sessions", True)
        assert keys["Cancel"].does == "Close and revert nothing"
        assert "Fire" not in keys, "the views' keys do not act in a dialog"
        assert "space checks or unchecks" in screen.note
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is dialog, "back to the dialog")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.main, "out of the dialog")
        assert engine.head() == edit, "nothing reverted"

    drive(engine, scenario)


# ---- dimmed while the engine does not answer --------------------------------------------------------


def test_keys_that_need_the_engine_are_dimmed_while_it_does_not_answer(engine: EngineProcess) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        bar = app.main.query_one(KeyBar)

        def enabled() -> dict[str, bool]:
            return {key: on for key, _, _, on, _ in bar.keys}

        assert enabled()["f"] and enabled()["p"] and enabled()["s"]
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: changes.rows, "the changes")
        await select_row(pilot, changes, row_keys(changes)[0])
        await wait_until(pilot, lambda: enabled().get("e"), "replay offered")

        await asyncio.to_thread(engine.cli, "stop")
        await wait_until(pilot, lambda: not app.engine_connected, "the engine down")
        await wait_until(pilot, lambda: not enabled()["f"], lambda: f"f dimmed (keys: {enabled()})")
        dimmed = {key for key, on in enabled().items() if not on}
        assert {"f", "p", "s", "a", "e", "o", "enter"} <= dimmed, enabled()
        assert {"q", "w", "v", "n", "g", "slash", "question_mark"}.isdisjoint(dimmed), "these need no engine"
        assert enabled()["E"], "starting the engine is what applies now"
        assert app.main.query_one("#change-approve", Button).disabled
        await pilot.press("4")
        await wait_until(
            pilot, lambda: app.main.query_one("#hb-fire", Button).disabled, "the fire button disabled"
        )
        await pilot.press("f")
        await pilot.pause(0.3)
        assert not [n for n in notifications(seen) if "firing" in n[2]], "a dimmed key does nothing"

    drive(engine, scenario)


# ---- 100 and 160 columns --------------------------------------------------------------------------


def test_at_100_columns_every_view_key_and_badge_is_in_sight(
    workspace: Path, start_engine: StartEngine
) -> None:
    write_hook(workspace, "fail_idle.py", FAIL_IDLE_HOOK)
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    for prompt, old, new in (
        ("chat.md", "Answer plainly", "Answer tersely"),
        ("heartbeat.md", "Spend this turn on upkeep", "Spend this turn idle"),
    ):
        edit_prompt(engine, old, new, prompt, origin="tool", session="ses_agent")
    labels = [
        "1 Hook runs",
        "2 Stage results",
        "3 Sessions",
        "4 Heartbeat",
        "5 Self-modifications",
        "6 Tool calls",
    ]

    async def main() -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=(100, 40)) as pilot:
            await connected(pilot)
            await pilot.press("5")
            await asyncio.to_thread(engine.stage, "idle", {"answer": "done"})  # fails while view 5 is shown
            views = app.main.view_bar
            await wait_until(pilot, lambda: "1 failed" in views.badges.get("runs", ""), "the failures' badge")
            await wait_until(pilot, lambda: views.badges.get("changes") == "2 pending", "the pending badge")
            await settle(pilot)
            shown = bar_lines(views)
            assert all(len(line) <= 100 for line in shown), shown
            text = " ".join(shown)
            for label in labels:
                assert label in text, f"{label} is out of sight: {shown}"
            assert "1 Hook runs 1 failed" in text and "5 Self-modifications 2 pending" in text
            for number in "123456":
                await pilot.press(number)
                await settle(pilot)
                bar = app.main.query_one(KeyBar)
                shown = bar_lines(bar)
                assert all(len(line) <= 100 for line in shown), shown
                text = " ".join(shown)
                for _, key, description, _, _ in bar.keys:
                    assert f"{key} {description}" in text, (
                        f"view {number}: {key} {description} is out of sight"
                    )
            assert len(bar_lines(app.main.query_one(KeyBar))) >= 2, "the keys of view 6 take two lines"

    asyncio.run(main())


def test_at_160_and_220_columns_the_origin_and_files_of_a_change_read_whole(
    workspace: Path, start_engine: StartEngine, isolated_env: dict[str, str]
) -> None:
    config = workspace / "config" / "evolve.jsonc"
    config.write_text(
        config.read_text(encoding="utf-8") + "\n// hooks time out after 30 s\n", encoding="utf-8"
    )
    who = ("-c", "user.name=Operator", "-c", "user.email=operator@example.com")
    run_git(workspace, *who, "commit", "-qam", "a note in the config", env=isolated_env)
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    edit_prompt(engine, "Spend this turn on upkeep", "Spend this turn idle", "heartbeat.md", origin="tool")

    async def main(width: int) -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=(width, 40)) as pilot:
            await connected(pilot)
            await pilot.press("5")
            changes: KeyedTable = table(app, "changes")
            await wait_until(pilot, lambda: len(changes.rows) == 3, "the changes")
            await settle(pilot)
            drawn = [changes.render_line(y).text for y in range(1, 4)]
            by_origin = {line.split()[1]: line for line in drawn}
            assert "agent (held)" in drawn[2] and "prompts/heartbeat.md" in drawn[2], drawn
            assert "config/evolve.jsonc " in by_origin["manual"], drawn
            assert not any("agent (h…" in line or "evolve.j…" in line for line in drawn), drawn

    for width in (160, 220):
        asyncio.run(main(width))
