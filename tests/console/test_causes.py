"""From a symptom to the change behind it, in the console, against a real engine: a hook that starts
failing is alerted with its error and the change most likely behind it (one key shows that change,
one reverts it), the failed run and view 5 say the same; an edit its test rejected has its own row
and a badge; a change lists who runs it, and each session and answer opens; the behaviour checks'
key; toasts close with a key, last at most a minute unless they wait for a decision, and a long
error opens whole in a dialog."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button, TextArea

import tests.console.test_operator_loop as loop
from evolve_console.alerts import TOAST_MAX_S
from evolve_console.alertscreen import AlertScreen
from evolve_console.app import EvolveConsole
from evolve_console.diffview import DiffView
from evolve_console.evals import EvalScreen
from evolve_console.messages import Toast
from evolve_console.reach import ReachScreen
from evolve_console.screens import MoreScreen, RevertScreen
from evolve_console.table import KeyedTable
from evolve_console.views import ChangesView
from tests.console.conftest import (
    Scenario,
    StartEngine,
    cell_text,
    connected,
    detail_text,
    drive,
    notifications,
    select_row,
    settle,
    table,
    text_of,
    wait_until,
)
from tests.support.engine_process import EngineProcess

# Passes the example hook's test (which does not run the heartbeat stage) and breaks the heartbeat.
BREAKS_THE_HEARTBEAT = {
    "hook": "notes.py",
    "oldString": "count = f\"You have {len(notes)} note{'' if len(notes) == 1 else 's'}.\"",
    "newString": 'count = "You have " + len(notes) + " notes."',
}
TYPE_ERROR = 'TypeError: can only concatenate str (not "int") to str'
# Rejected by the example hook's test (it requires a tool named "list").
RENAMES_A_TOOL = {"hook": "notes.py", "oldString": '"name": "list",', "newString": '"name": "show",'}


def views_text(app: EvolveConsole) -> str:
    return text_of(app.main.view_bar)


def toasts(app: EvolveConsole) -> list[Widget]:
    """The toasts on screen (Textual's Toast widgets, by their type's name)."""
    return list(app.screen.query("Toast"))


def reach_shown(app: EvolveConsole) -> ReachScreen | None:
    """The "who runs it" screen once its rows are there (they are filled when it mounts)."""
    screen = app.screen
    if isinstance(screen, ReachScreen) and any(table.keys() for table in screen.query(KeyedTable)):
        return screen
    return None


def break_the_heartbeat(engine: EngineProcess) -> str:
    """The agent's hook edit, in its session "Errands": it passes its test; its commit."""
    shim = loop.Shim(engine)
    shim.open_session("ses_errands", "Errands")
    edit = shim.call(
        "evolve_hook_edit",
        BREAKS_THE_HEARTBEAT,
        session="ses_errands",
        call_id="call_edit",
        text="The heartbeat's count line can be simpler.",
    )
    assert edit["commit"] and edit["validation"]["ok"], edit
    return str(edit["commit"])


def heartbeat_stage(engine: EngineProcess) -> dict[str, Any]:
    return engine.stage("heartbeat", {"sessions": []})


def with_toasts(engine: EngineProcess, scenario: Scenario) -> list[Message]:
    """As `drive`, with Textual's toasts drawn (a test app draws none by default)."""
    seen: list[Message] = []

    async def main() -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=(140, 40), notifications=True, message_hook=seen.append) as pilot:
            await connected(pilot)
            await scenario(app, pilot, seen)
            await settle(pilot)

    asyncio.run(main())
    return seen


def test_a_hook_that_starts_failing_is_alerted_with_its_error_and_the_change_behind_it(
    engine: EngineProcess,
) -> None:
    sha = break_the_heartbeat(engine)
    rings: list[int] = []

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
        dispatched = await asyncio.to_thread(heartbeat_stage, engine)
        assert dispatched["failed"] == ["notes.py"]
        await wait_until(
            pilot,
            lambda: [n for n in notifications(seen) if "started failing" in n[2]],
            lambda: f"the alert (notifications: {notifications(seen)})",
        )
        (failure,) = engine.get("/v1/failures")["failures"]
        assert failure["suspect"]["sha"] == sha
        # The error's own last line and the change behind it, with its origin and session.
        assert failure["message"].startswith(
            f"hooks/notes.py started failing at heartbeat: {TYPE_ERROR} (since {sha[:7]}, agent, "
        )
        assert failure["message"].endswith('before the first failure, session "Errands")')
        alerts = [n for n in notifications(seen) if "started failing" in n[2]]
        assert alerts == [
            ("warning", f"a hook started failing · j: show {sha[:7]} · R: revert it", failure["message"])
        ]
        assert rings == [1], "the bell rang"

        # j: the change, selected in view 5, says it has been failing since; escape comes back.
        await pilot.press("j")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: app.shown == "changes" and changes.selected_key() == sha, "j")
        assert cell_text(changes, sha, "review") == "failing since: 1 run"
        detail = app.query_one("#change-detail", DiffView)
        await wait_until(pilot, lambda: "failing since: 1 run" in detail.head.plain, "the change's detail")
        assert f"hooks/notes.py at heartbeat: 1 failed run: {TYPE_ERROR}" in detail.head.plain
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.shown == "runs", "back to the hook runs")

        # The failed run says the same, with the same keys.
        runs = table(app, "runs")
        (failed,) = engine.get("/v1/runs", failed="true")["runs"]
        await wait_until(pilot, lambda: failed["id"] in runs.rows, "the failed run")
        await select_row(pilot, runs, failed["id"])
        await wait_until(pilot, lambda: detail_text(app, "run-detail", "cause"), "why it failed")
        cause = detail_text(app, "run-detail", "cause")
        assert cause.startswith(TYPE_ERROR) and failure["cause"] in cause
        assert f"that change: {sha[:10]} “edit hook notes.py”" in cause
        assert "j: show it in view 5 · R: revert it" in cause

        # z closes the toasts; j and R then act on the selected failed run's change. R: the revert
        # dialog, asked first; y reverts it.
        await pilot.press("z")
        await wait_until(pilot, lambda: not toasts(app), "the toasts closed")
        await pilot.press("R")
        screen = await wait_until(
            pilot, lambda: isinstance(app.screen, RevertScreen) and app.screen, "the revert dialog"
        )
        assert (
            isinstance(screen, RevertScreen) and screen.question == f"Revert {sha[:10]} “edit hook notes.py”?"
        )
        assert app.shown == "changes" and changes.selected_key() == sha
        await pilot.press("y")
        await wait_until(
            pilot, lambda: engine.head() != sha and "Evolve-Reverts" in engine.git("log", "-1"), "the revert"
        )
        healed = await asyncio.to_thread(heartbeat_stage, engine)
        assert healed["failed"] == []
        await wait_until(
            pilot,
            lambda: cell_text(changes, sha, "review").startswith("reverted by"),
            lambda: f"the failure cleared (shows {cell_text(changes, sha, 'review')!r})",
        )
        # The engine's `cleared` event follows the healed run: the hook is no longer failing.
        await wait_until(pilot, lambda: app.model.failures == {}, lambda: f"cleared ({app.model.failures})")

        # Read again (N), the alert still names the change (j), but no longer offers to revert it.
        await pilot.press("N")
        screen = await wait_until(pilot, lambda: isinstance(app.screen, AlertScreen) and app.screen, "N")
        assert isinstance(screen, AlertScreen)
        for _ in range(len(screen.alerts)):
            if screen.alert is not None and "started failing" in screen.alert.text:
                break
            await pilot.press("left")
        assert screen.alert is not None and screen.alert.change == sha and screen.alert.revert is None
        assert screen.check_action("show", ()) and screen.check_action("revert", ()) is None
        assert "R: revert it" not in text_of(screen.query_one("#alert-keys"))
        await pilot.press("escape")

    drive(engine, scenario)


def test_the_hooks_failing_when_the_console_starts_are_alerted_without_the_bell(
    engine: EngineProcess,
) -> None:
    sha = break_the_heartbeat(engine)
    assert heartbeat_stage(engine)["failed"] == ["notes.py"]
    assert heartbeat_stage(engine)["failed"] == ["notes.py"]
    rings: list[int] = []

    async def main() -> list[Message]:
        seen: list[Message] = []
        app = EvolveConsole(engine.target)
        app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
        async with app.run_test(size=(140, 40), message_hook=seen.append) as pilot:
            await connected(pilot)
            await wait_until(pilot, lambda: "a hook is failing" in str(notifications(seen)), "the alert")
            await pilot.press("5")
            changes = table(app, "changes")
            await wait_until(pilot, lambda: sha in changes.rows, "the change")
            assert cell_text(changes, sha, "review") == "failing since: 2 runs"
        return seen

    seen = asyncio.run(main())
    (failure,) = engine.get("/v1/failures")["failures"]
    alerts = [n for n in notifications(seen) if n[1].startswith("a hook is failing")]
    assert alerts == [
        (
            "warning",
            f"a hook is failing · j: show {sha[:7]} · R: revert it",
            f"{failure['message']} [2 failed runs so far]",
        )
    ]
    assert rings == [], "not news: no bell"


def test_an_edit_its_test_rejected_has_its_own_row_a_badge_and_takes_no_decision(
    engine: EngineProcess,
) -> None:
    shim = loop.Shim(engine)
    shim.open_session("ses_rename", "Rename a tool")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        out = await asyncio.to_thread(
            shim.call,
            "evolve_hook_edit",
            RENAMES_A_TOOL,
            session="ses_rename",
            call_id="call_rename",
            text="Renaming the tool in my hook.",
        )
        assert out["output"].startswith("validation failed"), out
        await wait_until(pilot, lambda: "1 new attempt" in views_text(app), "the badge")
        (attempt,) = engine.get("/v1/changes")["attempts"]
        assert attempt["state"] == "rejected by its test"
        await pilot.press("5")
        await wait_until(pilot, lambda: "new attempt" not in views_text(app), "the badge seen")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: attempt["id"] in changes.rows, "its row")
        assert cell_text(changes, attempt["id"], "review") == "rejected by its test"
        assert cell_text(changes, attempt["id"], "files") == "hooks/notes.py"
        assert engine.head() == changes.keys()[-2], "no commit: its row comes after the history"
        await select_row(pilot, changes, attempt["id"])
        detail = app.query_one("#change-detail", DiffView)
        await wait_until(pilot, lambda: detail.head.plain.startswith("attempt: "), "its detail")
        head = detail.head.plain
        assert "never installed: its test rejected it" in head
        assert "why: what the agent said before the call\nRenaming the tool in my hook." in head
        assert (
            "tests/notes_test.py: FAILED (exit 1" in head and "FAIL discover: tool 'list' is missing" in head
        )
        added = [
            line.text for f in detail.diff.files for h in f.hunks for line in h.lines if line.kind == "+"
        ]
        assert added == ['        "name": "show",'], "the diff it proposed"
        view = app.query_one(ChangesView)
        for action in ("approve", "revert", "reject", "replay", "evaluate", "reach", "diff_file"):
            assert view.check_action(action, ()) is None, f"{action} takes no attempt"
        assert all(app.query_one(f"#change-{a}", Button).disabled for a in ("approve", "revert", "reject"))
        await pilot.press("a", "r", "d")
        await settle(pilot)
        assert engine.get("/v1/changes")["pending"] == [] and engine.head() == changes.keys()[-2]

    drive(engine, scenario)


def test_a_change_lists_who_runs_it_and_each_session_and_answer_opens(engine: EngineProcess) -> None:
    shim = loop.Shim(engine)
    shim.open_session("ses_reach", "Short answers")
    edit = shim.edit_prompt(
        "Answer plainly", "Answer tersely", session="ses_reach", call_id="call_terse", text="Shorter."
    )
    sha = str(edit["commit"])
    shim.request("ses_reach", turn="msg_user1")  # frozen under it
    shim.finished("ses_reach", "msg_reply1", "msg_user1", "Tersely: your list has two errands.")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the prompt edit")
        await select_row(pilot, changes, sha)
        detail = app.query_one("#change-detail", DiffView)
        await wait_until(pilot, lambda: "who runs it: 1 session" in detail.head.plain, "who runs it")
        head = detail.head.plain
        assert "  Short answers (frozen under it; 1 answer since)" in head
        assert "Tersely: your list has two errands." in head
        # A prompt edit ran no test: said where the evidence would be.
        assert "what was checked\nno test covers prompts/chat.md" in head

        await pilot.press("u")
        screen = await wait_until(pilot, lambda: reach_shown(app), "u")
        assert isinstance(screen, ReachScreen)
        rows = screen.query_one("#reach-rows")
        (reach,) = engine.get(f"/v1/changes/{sha}/reach")["sessions"]
        (answer,) = reach["answers"]
        assert rows.keys() == ["session:ses_reach", f"answer:{answer['dispatch']}"]  # type: ignore[attr-defined]
        await pilot.press("enter")  # the session, in view 3
        sessions = table(app, "sessions")
        await wait_until(
            pilot, lambda: app.shown == "sessions" and sessions.selected_key() == "ses_reach", "view 3"
        )
        await pilot.press("escape")  # back to who runs it, as it was
        screen = await wait_until(pilot, lambda: reach_shown(app), "back")
        assert isinstance(screen, ReachScreen)
        await pilot.press("down", "enter")  # the answer's stage result, in view 2
        stages = table(app, "stages")
        await wait_until(
            pilot, lambda: app.shown == "stages" and stages.selected_key() == answer["dispatch"], "view 2"
        )
        await pilot.press("escape")
        screen = await wait_until(pilot, lambda: reach_shown(app), "back")
        assert isinstance(screen, ReachScreen)
        assert screen.query_one("#reach-rows").selected_key() == f"answer:{answer['dispatch']}"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_until(
            pilot, lambda: app.shown == "changes" and changes.selected_key() == sha, "the change"
        )

    drive(engine, scenario)


def test_b_runs_the_behaviour_checks_and_says_why_they_could_not_run(engine: EngineProcess) -> None:
    """Without an opencode project and model to run the agent with (none is connected, none is
    configured), the checks end `failed` with the engine's reason, on the screen and in the detail."""
    sha = str(
        loop.Shim(engine).edit_prompt("Answer plainly", "Answer tersely", session="ses_x", call_id="c")[
            "commit"
        ]
    )

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the prompt edit")
        await select_row(pilot, changes, sha)
        detail = app.query_one("#change-detail", DiffView)
        await wait_until(pilot, lambda: "behaviour checks: none yet (b runs" in detail.head.plain, "none yet")
        await pilot.press("b")
        screen = await wait_until(pilot, lambda: isinstance(app.screen, EvalScreen) and app.screen, "b")
        assert isinstance(screen, EvalScreen)
        await wait_until(pilot, lambda: screen.result is not None and not screen.running, "the checks' end")
        assert screen.result is not None
        result = engine.get(f"/v1/changes/{sha}/eval")
        assert result["state"] == screen.result.state == "failed" and result["error"]
        assert text_of(screen.query_one("#eval-status")).startswith("failed in ")
        assert result["error"] in text_of(screen.query_one("#eval-status"))
        assert screen.check_action("cancel", ()) is None, "nothing left to cancel"
        await pilot.press("escape")
        said = f"failed: {result['error']}"
        await wait_until(
            pilot, lambda: said in detail.head.plain, lambda: f"the detail's line ({detail.head.plain!r})"
        )

    drive(engine, scenario)


def test_toasts_close_with_a_key_and_stay_at_most_a_minute_unless_they_wait_for_a_decision(
    workspace: Path, start_engine: StartEngine
) -> None:
    loop.gate(workspace)
    engine = start_engine(workspace)
    shim = loop.Shim(engine)
    shim.open_session("ses_toasts", "Toasts")
    long = "could not do that: " + "the engine said something long and plain. " * 12

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        held = await asyncio.to_thread(
            shim.edit_prompt, "Answer plainly", "Answer tersely", session="ses_toasts", call_id="call_t"
        )
        (pending,) = engine.get("/v1/changes")["pending"]
        await wait_until(
            pilot,
            lambda: len(toasts(app)) == 1,
            lambda: f"the toast of the held change ({len(toasts(app))} toasts, {notifications(seen)})",
        )
        await asyncio.to_thread(heartbeat_stage, engine)  # a hook that does not fail: no alert
        app.post_message(Toast("approved something", "information", timeout=3600))
        await wait_until(pilot, lambda: len(toasts(app)) == 2, "two toasts")
        timeouts = {m.notification.message: m.notification.timeout for m in seen if isinstance(m, Notify)}
        assert timeouts["approved something"] == TOAST_MAX_S, "at most a minute"
        waits = timeouts["a change awaits your review: edit prompt chat.md (prompts/chat.md)"]
        assert waits > TOAST_MAX_S, "it waits for the decision"
        # j selects the change the newest toast naming one names.
        await pilot.press("j")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: changes.selected_key() == pending["id"], "the held change selected")
        await pilot.press("z")
        await wait_until(pilot, lambda: not toasts(app), "the toasts closed")
        assert app.main.check_action("show_named", ()) is None, "nothing named any more"

        # A long error opens whole in a dialog (the toast would cut it); N reads the alerts again.
        app.post_message(Toast(long, "error"))
        screen = await wait_until(
            pilot, lambda: isinstance(app.screen, AlertScreen) and app.screen, "the dialog"
        )
        assert isinstance(screen, AlertScreen)
        assert text_of(screen.query_one("#alert-text")) == long
        await pilot.press("escape")
        await pilot.press("N")
        screen = await wait_until(pilot, lambda: isinstance(app.screen, AlertScreen) and app.screen, "N")
        assert isinstance(screen, AlertScreen) and screen.alert is not None and screen.alert.text == long
        await pilot.press("left", "left")
        assert screen.alert is not None and screen.alert.text.startswith("a change awaits your review")
        await pilot.press("escape")
        assert "awaits review" in held["output"]

    with_toasts(engine, scenario)


def test_the_config_errors_dialog_wraps_its_messages(workspace: Path, start_engine: StartEngine) -> None:
    long_name = "a_field_whose_name_goes_on_and_on_" * 6
    (workspace / "config" / "evolve.jsonc").write_text('{\n  "' + long_name + '": 1,\n}\n', encoding="utf-8")
    engine = start_engine(workspace)

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await wait_until(pilot, lambda: app.main.check_action("problems", ()), "the engine's problem")
        await pilot.press("c")
        screen = await wait_until(pilot, lambda: isinstance(app.screen, MoreScreen) and app.screen, "c")
        assert isinstance(screen, MoreScreen) and long_name in screen.text
        area = screen.query_one(TextArea)
        await pilot.pause()
        assert area.soft_wrap
        widest = max(len(row) for line in area.wrapped_document.lines for row in line)
        assert widest <= area.content_size.width, "no line runs past the dialog"
        assert area.wrapped_document.height > area.document.line_count, "the long one wraps"

    drive(engine, scenario)
