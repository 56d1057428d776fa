"""The screen never lies: each finding of a trial as an operator, against a real engine. The console
must show what is true now (live, without waiting for a reload), say what it cannot know, and let
the operator read what it had to cut."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Input

from evolve_console.app import EvolveConsole
from evolve_console.client import EngineGone, why_unanswered
from evolve_console.detail import DetailPane
from evolve_console.diffview import DiffView
from evolve_console.screens import DismissScreen, MoreScreen, RejectScreen, RevertScreen, StageScreen
from evolve_console.threeway import ThreeWayScreen
from tests.console.conftest import (
    StartEngine,
    cell_text,
    connection_text,
    drive,
    edit_prompt,
    notifications,
    row_keys,
    select_row,
    settle,
    table,
    text_of,
    wait_until,
)
from tests.support.engine_process import EngineProcess, stop_workspace_engine


def opencode_event(engine: EngineProcess, kind: str, properties: dict[str, Any]) -> None:
    engine.post("/v1/opencode/event", {"type": kind, "properties": properties})


def connect_opencode(engine: EngineProcess) -> str:
    """Announce an opencode connection, as the shim does. Its address is the engine's own: it
    answers (with a refusal), which is all the engine's liveness check asks of it."""
    found: dict[str, Any] = engine.post(
        "/v1/opencode/connect", {"url": engine.url, "directory": str(engine.workspace), "mode": "server"}
    )
    return str(found["id"])


def heartbeat_text(app: EvolveConsole) -> str:
    return text_of(app.query_one("#hb-summary"))


# ---- 1. the heartbeat knows opencode connected, at once ----------------------------------------------


def test_the_heartbeat_view_says_opencode_connected_and_when_the_first_tick_comes(
    engine: EngineProcess,
) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("4")
        await wait_until(
            pilot, lambda: "WAITING" in heartbeat_text(app), "the heartbeat waiting for opencode"
        )
        assert "no opencode connected" in heartbeat_text(app)
        await asyncio.to_thread(connect_opencode, engine)
        await wait_until(
            pilot,
            lambda: "opencode connected · first tick in" in heartbeat_text(app),
            lambda: f"the first tick announced (shows {heartbeat_text(app)!r})",
            timeout=5,
        )
        assert "opencode ● 1 connected" in connection_text(app)

    drive(engine, scenario)


# ---- 2, 3, 4, 14. sessions: live, busy or idle, the chat's agent, named by title ----------------------


def test_sessions_appear_and_change_live_with_their_title_state_and_agent(engine: EngineProcess) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("3")
        sessions = table(app, "sessions")
        opencode_event(engine, "session.created", {"info": {"id": "ses_live0001", "title": "Fresh start"}})
        await wait_until(pilot, lambda: "ses_live0001" in sessions.rows, "the new session, without a reload")
        assert cell_text(sessions, "ses_live0001", "session") == "Fresh start"

        engine.post("/v1/opencode/chat-message", {"session": "ses_live0001", "agent": "build"})
        opencode_event(engine, "session.status", {"sessionID": "ses_live0001", "status": {"type": "busy"}})
        await wait_until(pilot, lambda: cell_text(sessions, "ses_live0001", "state") == "busy", "busy")
        # A notification is a synthetic message to the heartbeat agent: it says nothing of the chat.
        engine.post(
            "/v1/opencode/chat-message", {"session": "ses_live0001", "agent": "evolve", "synthetic": True}
        )
        opencode_event(engine, "session.idle", {"sessionID": "ses_live0001"})
        await wait_until(pilot, lambda: cell_text(sessions, "ses_live0001", "state") == "idle", "idle again")
        assert cell_text(sessions, "ses_live0001", "agent") == "build"

        await select_row(pilot, sessions, "ses_live0001")
        pane = app.query_one("#session-detail", DetailPane)
        await wait_until(pilot, lambda: "Fresh start" in pane.plain, "the session's detail")
        assert "agent build" in pane.plain and " · idle" in pane.plain and "busy True" not in pane.plain
        opencode_event(engine, "session.updated", {"info": {"id": "ses_live0001", "title": "Renamed"}})
        await wait_until(pilot, lambda: "Renamed" in pane.plain, "the detail to follow a new title")
        assert cell_text(sessions, "ses_live0001", "session") == "Renamed"

        # Other tables name the session by its title too.
        engine.stage("idle", {"answer": "done"}, session="ses_live0001")
        await pilot.press("1")
        runs = table(app, "runs")
        await wait_until(
            pilot,
            lambda: any(cell_text(runs, k, "session") == "Renamed" for k in row_keys(runs)),
            "a run of that session named by its title",
        )

    drive(engine, scenario)


# ---- 6, 12. what the console cannot know, it says; the engine down; how to start it -------------------


def test_engine_down_shows_last_known_facts_how_long_and_how_to_start_it(engine: EngineProcess) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await asyncio.to_thread(connect_opencode, engine)
        await wait_until(
            pilot, lambda: "opencode ● 1 connected" in connection_text(app), "opencode connected"
        )
        await asyncio.to_thread(engine.cli, "stop")
        await wait_until(pilot, lambda: "engine ○ down" in connection_text(app), "the engine down")
        await asyncio.to_thread(engine.wait_exit, 10)
        await pilot.pause(1.2)
        bar = connection_text(app)
        assert "engine ○ down for" in bar and str(engine.workspace) in bar, bar
        assert f"start it: evolve serve --workspace {engine.workspace} (or E)" in bar, bar
        assert "opencode ● 1 connected" in bar and "(as of " in bar, (
            "what only the engine knew, as last known"
        )
        await pilot.press("4")
        assert "UNKNOWN · the engine does not answer: last known as of" in heartbeat_text(app)
        assert "next tick in" not in heartbeat_text(app)

        await pilot.press("E")  # start it from the console
        await wait_until(pilot, lambda: app.engine_connected, "the engine started again", timeout=30)
        assert "engine ● connected" in connection_text(app)
        assert "opencode ○ not connected" in connection_text(app), "the new engine knows no opencode"

    try:
        drive(engine, scenario)
    finally:  # the engine the console started is not the fixture's process: stop it here
        stop_workspace_engine(engine.workspace, engine.env)


def test_a_request_lost_while_the_engine_answers_leaves_the_console_connected_and_current(
    engine: EngineProcess,
) -> None:
    """A request that fails on the way (a kept-alive connection closed as it was reused) is not the
    engine gone: the top bar stays connected and the views keep following the engine."""

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: len(changes.rows) >= 1, "the changes listed")
        before = len(changes.rows)

        async def lost() -> None:
            # What the client raises for a connection closed as it was reused.
            reason = why_unanswered(httpx.RemoteProtocolError("closed"))
            raise EngineGone(f"the engine at {engine.url} does not answer: {reason}")

        app.run_worker(lost(), name="load the change", group="change-detail", exit_on_error=False)
        await wait_until(
            pilot,
            lambda: any("does not answer" in n[2] for n in notifications(seen)),
            "the failed request told",
        )
        await pilot.pause(1.0)  # the health check answers
        assert app.engine_connected and "engine ● connected" in connection_text(app), connection_text(app)
        assert [n[2] for n in notifications(seen) if "does not answer" in n[2]] == [
            f"could not load the change: the engine at {engine.url} does not answer: the connection "
            "closed before it answered. Try again in a moment"
        ], "what failed is named, in words"

        await asyncio.to_thread(edit_prompt, engine, "Answer plainly", "Answer tersely")
        await wait_until(pilot, lambda: len(changes.rows) > before, "the new change listed")

    drive(engine, scenario)


def test_a_bad_config_is_named_and_readable_in_full(workspace: Path, start_engine: StartEngine) -> None:
    long_name = "this_field_does_not_exist_and_its_name_is_long_enough_to_be_cut_off_at_any_width"
    (workspace / "config" / "evolve.jsonc").write_text(
        '{\n  "hook_timeout": "soon",\n  "' + long_name + '": 1,\n}\n', encoding="utf-8"
    )
    engine = start_engine(workspace)

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await wait_until(pilot, lambda: "config: 1 error" in connection_text(app), "the config error")
        assert "(c: read)" in connection_text(app)
        await pilot.press("c")
        screen = await wait_until(
            pilot, lambda: app.screen if isinstance(app.screen, MoreScreen) else None, "the problems in full"
        )
        assert "field 'hook_timeout'" in screen.text and "expected an integer" in screen.text
        assert long_name in screen.text, "the warning, whole"
        await pilot.press("escape")

    drive(engine, scenario)


# ---- 10. escape leaves a filter; q in a dialog ----------------------------------------------------------


def test_escape_leaves_a_filter_field_and_the_next_key_is_a_command(engine: EngineProcess) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("slash")
        stage_filter = app.query_one("#filter-stage", Input)
        assert app.focused is stage_filter
        await pilot.press("i", "escape")
        assert app.focused is table(app, "runs")
        await pilot.press("s")  # a command again, not a letter in the field
        await wait_until(pilot, lambda: isinstance(app.screen, StageScreen), "the stage dialog")
        assert stage_filter.value == "i"
        await pilot.press("q")  # in a dialog with fields, q is a letter
        await settle(pilot)
        assert isinstance(app.screen, StageScreen) and app.return_code is None
        await pilot.press("escape")

    drive(engine, scenario)


def test_q_quits_from_a_dialog_without_fields(engine: EngineProcess) -> None:
    edit_prompt(engine, "Answer plainly", "Answer tersely")

    async def main() -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: app.engine_connected, "connected")
            await pilot.press("5")
            changes = table(app, "changes")
            await wait_until(pilot, lambda: len(changes.rows) >= 2, "the edit")
            await select_row(pilot, changes, row_keys(changes)[-1])
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RevertScreen), "the revert dialog")
            await pilot.press("q")
            await wait_until(pilot, lambda: app.return_code is not None, "the console to quit")

    asyncio.run(main())


# ---- 11. tables fit a narrow terminal -------------------------------------------------------------------


def test_at_100_columns_the_review_column_is_there(engine: EngineProcess) -> None:
    edit_prompt(engine, "Answer plainly", "Answer tersely")

    async def main() -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=(100, 40)) as pilot:
            await wait_until(pilot, lambda: app.engine_connected, "connected")
            await pilot.press("5")
            changes = table(app, "changes")
            await wait_until(pilot, lambda: len(changes.rows) >= 2, "the changes")
            await settle(pilot)
            header = changes.render_line(0).text
            assert "review" in header, header
            assert "no review" in changes.render_line(len(changes.rows)).text

    asyncio.run(main())


# ---- 13. details that no longer apply go; m works where it is offered; one state word -----------------


def test_a_run_filtered_out_takes_its_details_along(workspace: Path, start_engine: StartEngine) -> None:
    engine = start_engine(workspace)
    engine.stage("idle", {"answer": "done"})

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        runs = table(app, "runs")
        await wait_until(pilot, lambda: len(runs.rows) >= 2, "the runs")
        await select_row(pilot, runs, row_keys(runs)[-1])
        pane = app.query_one("#run-detail", DetailPane)
        await wait_until(pilot, lambda: "hooks/notes.py" in pane.plain, "the run's details")
        await pilot.press("x")  # failures only: there are none
        await wait_until(pilot, lambda: not runs.rows, "no run listed")
        await wait_until(pilot, lambda: pane.plain == "select a run", "the details gone with the run")

    drive(engine, scenario)


def test_heartbeat_state_says_paused_once_and_m_shows_the_last_tick(engine: EngineProcess) -> None:
    engine.post("/v1/heartbeat/fire")  # skipped (no opencode): still a last tick to read

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("4", "p")
        await wait_until(pilot, lambda: "PAUSED" in heartbeat_text(app), "paused")
        text = heartbeat_text(app)
        assert text.count("PAUSED") == 1 and "paused" not in text.replace("PAUSED", ""), text
        await pilot.press("m")
        screen = await wait_until(
            pilot, lambda: app.screen if isinstance(app.screen, MoreScreen) else None, "the last tick in full"
        )
        assert "manual tick at" in screen.text and "skipped" in screen.text
        await pilot.press("escape", "p")

    drive(engine, scenario)


# ---- the second trial: words, order, the detail of the selected row ------------------------------------


def held_edits(engine: EngineProcess, *edits: tuple[str, str, str]) -> list[str]:
    """Prompt edits by the agent, held under the review gate: the ids of the held changes."""
    ids = []
    for n, (prompt, old, new) in enumerate(edits):
        out = edit_prompt(engine, old, new, prompt, origin="tool", session="ses_agent", call_id=f"call_{n}")
        assert "awaits review" in out["output"], out
        ids.append(str(out["output"]).split("pending change ")[1].split(")")[0])
    return ids


def test_a_refused_command_is_told_in_plain_words(workspace: Path, start_engine: StartEngine) -> None:
    """Two held edits of one prompt: once the first is installed, the second was made against a file
    that is no longer there. It is `stale` at once (no restart), says why and which commit changed its
    file, and no longer counts as pending; approving it anyway is refused by the engine, and the
    operator reads what happened and what to do, with the three versions to compare (what it was
    based on, what is there now, what it would install), not `approve_change: EngineError: …`. It is
    then dismissed with a reason."""
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    first, second = held_edits(
        engine,
        ("chat.md", "Answer plainly", "Answer tersely"),
        ("chat.md", "Answer plainly", "Answer warmly"),
    )

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: second in changes.rows, "the held changes")
        assert "5 Self-modifications 2 pending" in text_of(app.main.view_bar)
        await select_row(pilot, changes, first)
        await pilot.press("a")
        await wait_until(pilot, lambda: first not in changes.rows, "the first one installed")
        installed = engine.head()
        await wait_until(
            pilot,
            lambda: cell_text(changes, second, "review") == "stale",
            lambda: f"the second one stale at once (shows {cell_text(changes, second, 'review')!r})",
        )
        assert "pending" not in text_of(app.main.view_bar), "a stale change awaits no decision"
        await select_row(pilot, changes, second)
        why = (
            f'prompts/chat.md changed after the agent proposed this change (commit {installed[:10]} "edit '
            'prompt chat.md" changed it), so it can no longer be approved as it is: it would undo that '
            "change. Dismiss it, or ask the agent to make its change again on the file as it is now."
        )
        detail = app.query_one("#change-detail", DiffView)
        await wait_until(
            pilot, lambda: why in detail.head.plain, lambda: f"why (shows {detail.head.plain!r})"
        )
        assert f"changed under it by {installed[:10]}" in detail.head.plain

        await pilot.press("a")
        screen = await wait_until(
            pilot, lambda: isinstance(app.screen, ThreeWayScreen) and app.screen, "the three versions"
        )
        assert isinstance(screen, ThreeWayScreen)
        three = screen.three
        assert three.message == (
            f'Not approved: prompts/chat.md changed after the agent proposed this change (commit {installed[:10]} "edit '
            'prompt chat.md" changed it), and installing it now would undo that change. Nothing was installed. '
            "Compare what the change was based on, what is there now and what it would install; then dismiss "
            "it, or ask the agent to redo it on the file as it is now."
        )
        assert three.message in text_of(screen.query_one("#three-way-message"))
        assert three.base is not None and "Answer plainly" in three.base
        assert "Answer tersely" in three.current and "Answer warmly" in three.proposed
        proposed = str(three.proposed_diff).splitlines()  # what the agent changed, from its base
        assert any(line.startswith("-") and "Answer plainly" in line for line in proposed)
        assert any(line.startswith("+") and "Answer warmly" in line for line in proposed)
        assert three.changed_by == installed
        for _, _, text in notifications(seen):
            assert "approve_change" not in text and "Error" not in text, text

        await pilot.press("d")  # dismiss it, with a reason the agent is told
        await wait_until(pilot, lambda: isinstance(app.screen, DismissScreen), "the reason asked")
        await pilot.press(*"redo it on the new prompt", "enter")
        await wait_until(
            pilot, lambda: cell_text(changes, second, "review") == "dismissed", "the change dismissed"
        )
        held = {p["id"]: p for p in engine.get("/v1/changes")["pending"]}[second]
        assert held["status"] == "dismissed" and "redo it on the new prompt" in held["note"]
        assert engine.get("/v1/changes")["counts"]["awaiting"] == 0

    drive(engine, scenario)


def test_held_rows_keep_one_order_live_under_n_and_after_a_restart(
    workspace: Path, start_engine: StartEngine
) -> None:
    """Commits oldest first, then the held changes as they were proposed: the same when they arrive
    live, when a commit comes between, when `n` hides and shows the others, after a restart."""
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    chat, heartbeat = held_edits(
        engine,
        ("chat.md", "Answer plainly", "Answer tersely"),
        ("heartbeat.md", "Spend this turn on upkeep", "Spend this turn idle"),
    )
    initial = engine.head()
    port = engine.port

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: heartbeat in changes.rows, "the held changes")
        assert row_keys(changes) == [initial, chat, heartbeat]
        (compaction,) = await asyncio.to_thread(
            held_edits, engine, ("compaction.md", "Summarise", "Sum up")
        )  # live
        await wait_until(pilot, lambda: compaction in changes.rows, "the change proposed live")
        assert row_keys(changes) == [initial, chat, heartbeat, compaction]

        await select_row(pilot, changes, heartbeat)
        await pilot.press("a")  # installed: a commit, listed among the commits
        await wait_until(pilot, lambda: engine.head() != initial, "the approval's commit")
        installed = engine.head()
        expected = [initial, installed, chat, compaction]
        await wait_until(
            pilot, lambda: row_keys(changes) == expected, lambda: f"one order (shows {row_keys(changes)})"
        )
        assert list(app.model.changes) == expected
        await pilot.press("n")
        await wait_until(pilot, lambda: row_keys(changes) == [chat, compaction], "only what needs review")
        await pilot.press("n")
        await wait_until(
            pilot,
            lambda: row_keys(changes) == expected,
            lambda: f"the same order (shows {row_keys(changes)})",
        )

        engine.kill()
        await wait_until(pilot, lambda: not app.engine_connected, "the engine gone")
        await asyncio.to_thread(engine.start, port)
        await wait_until(pilot, lambda: app.engine_connected, "the engine back")
        await settle(pilot)
        await pilot.pause(0.5)
        assert row_keys(changes) == expected, "the same order after a restart"

    drive(engine, scenario)


def test_the_detail_follows_the_selection_when_the_last_held_row_leaves(
    workspace: Path, start_engine: StartEngine
) -> None:
    """Under `n`, rejecting the only held change empties the table: the detail must not go on
    saying `awaits review`. Without `n`, the rejected row stays and its detail says so."""
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    chat, heartbeat = held_edits(
        engine,
        ("chat.md", "Answer plainly", "Answer tersely"),
        ("heartbeat.md", "Spend this turn on upkeep", "Spend this turn idle"),
    )

    async def reject(app: EvolveConsole, pilot: Pilot[Any], key: str) -> None:
        await select_row(pilot, table(app, "changes"), key)
        await wait_until(pilot, lambda: "awaits review" in head_of(app), "the held change in detail")
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, RejectScreen), "the reject dialog")
        await pilot.press("enter")

    def head_of(app: EvolveConsole) -> str:
        return app.query_one("#change-detail", DiffView).head.plain

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: heartbeat in changes.rows, "the held changes")
        # Without n: the rejected row stays, and its detail follows its new state.
        await reject(app, pilot, chat)
        await wait_until(pilot, lambda: cell_text(changes, chat, "review") == "rejected", "the row rejected")
        await wait_until(
            pilot,
            lambda: "· rejected" in head_of(app) and "awaits review" not in head_of(app),
            lambda: f"the detail to follow (shows {head_of(app)[:200]!r})",
        )
        # Under n: the last held row goes, and the detail with it.
        await pilot.press("n")
        await wait_until(pilot, lambda: row_keys(changes) == [heartbeat], "only the held one")
        await reject(app, pilot, heartbeat)
        await wait_until(pilot, lambda: row_keys(changes) == [], "nothing left to review")
        await wait_until(
            pilot,
            lambda: head_of(app) == "nothing needs review (n: every change)",
            lambda: f"the detail emptied (shows {head_of(app)[:200]!r})",
        )
        assert "awaits review" not in app.query_one("#change-detail", DiffView).as_text()

    drive(engine, scenario)
