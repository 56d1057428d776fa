"""The console's actions, driven with Pilot against a real engine (a subprocess) on a real workspace.

Each test presses the keys an operator would, then checks what the action did where it matters: the
workspace's git history and files, and the engine's own state through its API; the screen second.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Checkbox, Select, Switch, TextArea

from evolve_console.app import EvolveConsole
from evolve_console.detail import DetailPane
from evolve_console.format import MORE_LIMIT, PREVIEW_LIMIT
from evolve_console.screens import (
    MoreScreen,
    RejectScreen,
    ResultScreen,
    RevertScreen,
    StageScreen,
)
from evolve_console.section import Section
from evolve_console.views import RunsView
from tests.console.conftest import (
    StartEngine,
    cell_text,
    connection_text,
    detail_text,
    drive,
    edit_prompt,
    errors_shown,
    notifications,
    row_keys,
    select_row,
    settle,
    table,
    text_of,
    wait_until,
    write_hook,
)
from tests.support.engine_process import EngineProcess


def section_text(app: EvolveConsole, section_id: str) -> str:
    return text_of(app.query_one(f"#{section_id}", Section).query_one(".section-body"))


def is_cut(app: EvolveConsole, pane: str, part: str) -> bool:
    return any(p.id == part for p in app.query_one(f"#{pane}", DetailPane).truncated)


# Hooks of these tests: small python3 scripts; argv[1] is the stage, the input JSON is on stdin.
ECHO_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
data = json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "echo"}))
else:
    print(json.dumps({"echo": stage, "answer_seen": data.get("answer")}))
"""

FAIL_IDLE_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "idle":
    sys.stderr.write("this hook refuses idle\\n")
    sys.exit(3)
print("{}")
"""

BIG_STDOUT_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "idle":
    sys.stdout.write(json.dumps({"big": "b" * 3_000_000}) + "\\n")
elif stage != "discover":
    print("{}")
"""

GARBAGE_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "idle":
    sys.stdout.buffer.write(bytes(b for b in range(256) if b != 10) * 8 + b"\\x1b[31mred\\x1b[0m\\x00\\xff\\xfe\\n")
elif stage != "discover":
    print("{}")
"""

HUGE_SYSTEM_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "mutate_request":
    sys.stdout.write(json.dumps({"system": ["S" * 10_000_000]}) + "\\n")
elif stage != "discover":
    print("{}")
"""


# ---- heartbeat -------------------------------------------------------------------------------------


def test_fire_without_opencode_is_skipped_and_shown(engine: EngineProcess) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("4", "f")
        await wait_until(
            pilot,
            lambda: (engine.get("/v1/heartbeat").get("last") or {}).get("trigger") == "manual",
            "the engine to record the manual tick",
        )
        last = engine.get("/v1/heartbeat")["last"]
        assert last["outcome"] == "skipped"
        assert last["reason"].startswith("opencode unreachable"), last["reason"]
        await wait_until(
            pilot,
            lambda: any("heartbeat skipped: opencode unreachable" in n[2] for n in notifications(seen)),
            lambda: f"a notification of the skipped tick (seen: {notifications(seen)})",
        )
        await wait_until(
            pilot,
            lambda: "reason: opencode unreachable" in section_text(app, "hb-last"),
            lambda: f"the heartbeat view to show the reason (shows {section_text(app, 'hb-last')!r})",
        )
        assert "manual tick at" in section_text(app, "hb-last")
        assert ": skipped" in section_text(app, "hb-last")

    seen = drive(engine, scenario)
    assert not errors_shown(seen)


def test_pause_and_resume(engine: EngineProcess) -> None:
    state_file = engine.workspace / "state" / "evolve.json"

    def paused_in_state() -> Any:
        return json.loads(state_file.read_text(encoding="utf-8")).get("heartbeat_paused")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("4", "p")
        await wait_until(pilot, lambda: engine.get("/v1/heartbeat")["paused"] is True, "the engine to pause")
        assert paused_in_state() is True
        await wait_until(
            pilot,
            lambda: app.model.heartbeat is not None and app.model.heartbeat.paused is True,
            "the console to see the pause",
        )
        summary = text_of(app.query_one("#hb-summary"))
        assert "PAUSED" in summary, summary
        assert app.query_one("#hb-resume").display and not app.query_one("#hb-pause").display

        await pilot.press("p")
        await wait_until(
            pilot, lambda: engine.get("/v1/heartbeat")["paused"] is False, "the engine to resume"
        )
        assert paused_in_state() is False
        await wait_until(
            pilot,
            lambda: app.model.heartbeat is not None and app.model.heartbeat.paused is False,
            "the console to see the resume",
        )
        assert "PAUSED" not in text_of(app.query_one("#hb-summary"))
        assert [n[2] for n in notifications(seen) if n[2].startswith("heartbeat ")][-2:] == [
            "heartbeat paused",
            "heartbeat resumed",
        ]

    drive(engine, scenario)


# ---- self-modifications ----------------------------------------------------------------------------


def test_approve_records_a_git_note(engine: EngineProcess) -> None:
    edit = edit_prompt(engine, "Answer plainly", "Answer tersely")
    sha = edit["commit"]
    assert sha, edit

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the edit in the changes table")
        # An operator's own change needs no review, but can be approved all the same.
        assert cell_text(changes, sha, "review") == "no review"
        assert cell_text(changes, sha, "origin") == "operator"
        await select_row(pilot, changes, sha)
        await pilot.press("a")
        note = await wait_until(
            pilot,
            lambda: engine.git("notes", "--ref=refs/notes/evolve-review", "show", sha, check=False),
            "the approval note in git",
        )
        assert note.startswith("approved by operator"), note
        await wait_until(
            pilot,
            lambda: cell_text(changes, sha, "review") == "approved",
            lambda: f"the row to show 'approved' (shows {cell_text(changes, sha, 'review')!r})",
        )
        reviewed = {c["sha"]: c["review"] for c in engine.get("/v1/changes")["changes"]}
        assert reviewed[sha] == note.strip()

    drive(engine, scenario)


def test_revert_asks_first_and_cancel_reverts_nothing(engine: EngineProcess) -> None:
    chat = engine.workspace / "prompts" / "chat.md"
    original = chat.read_text(encoding="utf-8")
    sha = edit_prompt(engine, "Answer plainly", "Answer tersely")["commit"]
    edited = chat.read_text(encoding="utf-8")
    assert edited != original

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the edit in the changes table")
        await select_row(pilot, changes, sha)

        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, RevertScreen), "the confirmation")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, RevertScreen), "the dialog to close")
        await settle(pilot)
        assert engine.head() == sha, "cancel must revert nothing"
        assert chat.read_text(encoding="utf-8") == edited

        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, RevertScreen), "the confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: engine.head() != sha, "the revert commit")
        message = engine.git("log", "-1", "--format=%B")
        assert message.startswith("revert: edit prompt chat.md"), message
        assert f"Evolve-Reverts: {sha}" in message
        assert chat.read_text(encoding="utf-8") == original
        assert engine.git("status", "--porcelain") == ""
        revert_sha = engine.head()
        await wait_until(pilot, lambda: revert_sha in changes.rows, "the revert in the changes table")
        assert cell_text(changes, revert_sha, "change").startswith("revert: edit prompt chat.md")

    seen = drive(engine, scenario)
    assert any(n[2].startswith(f"reverted {sha[:10]}") for n in notifications(seen)), notifications(seen)


def test_conflicting_revert_is_refused_once_naming_the_later_change(engine: EngineProcess) -> None:
    chat = engine.workspace / "prompts" / "chat.md"
    first = edit_prompt(engine, "Answer plainly and briefly.", "Answer plainly and very briefly.")["commit"]
    second = edit_prompt(engine, "Answer plainly and very briefly.", "Answer in one short line.")["commit"]
    assert first and second
    content = chat.read_text(encoding="utf-8")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: second in changes.rows, "both edits in the changes table")
        await select_row(pilot, changes, first)
        await pilot.press("r")
        screen = await wait_until(
            pilot, lambda: app.screen if isinstance(app.screen, RevertScreen) else None, "the revert dialog"
        )
        assert [c["sha"] for c in screen.impact.later] == [second]
        assert screen.query_one("#together", Checkbox).value is False
        await pilot.press("y")
        refused = await wait_until(
            pilot,
            lambda: [n for n in notifications(seen) if n[2].startswith("revert refused")],
            lambda: f"the refusal (notifications: {notifications(seen)})",
        )
        await settle(pilot)
        assert len(errors_shown(seen)) == 1, errors_shown(seen)  # one error, one toast
        severity, _, message = refused[0]
        assert severity == "error"
        assert "prompts/chat.md" in message and "conflicts" in message, message
        assert second[:10] in message and "revert them together" in message, message
        assert engine.head() == second
        assert engine.git("status", "--porcelain") == ""
        assert chat.read_text(encoding="utf-8") == content
        assert row_keys(changes)[-1] == second

        # Together: one new commit undoes both, and both rows say by which.
        await select_row(pilot, changes, first)
        await pilot.press("r")
        screen = await wait_until(
            pilot,
            lambda: app.screen if isinstance(app.screen, RevertScreen) else None,
            "the revert dialog again",
        )
        screen.query_one("#together", Checkbox).value = True
        await pilot.press("y")
        await wait_until(pilot, lambda: engine.head() != second, "the revert commit")
        revert = engine.head()
        assert "Answer plainly and briefly." in chat.read_text(encoding="utf-8")
        assert engine.git("show", "-s", "--format=%s", revert).strip() == (
            "revert: edit prompt chat.md and 1 later change(s)"
        )
        await wait_until(
            pilot,
            lambda: (
                cell_text(changes, first, "review") == f"reverted by {revert[:7]}"
                and cell_text(changes, second, "review") == f"reverted by {revert[:7]}"
            ),
            lambda: f"both rows reverted (shows {cell_text(changes, first, 'review')!r})",
        )

    drive(engine, scenario)


def test_review_gate_approve_installs_and_reject_drops(workspace: Path, start_engine: StartEngine) -> None:
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    chat = workspace / "prompts" / "chat.md"
    heartbeat = workspace / "prompts" / "heartbeat.md"
    chat_before, heartbeat_before = chat.read_text(encoding="utf-8"), heartbeat.read_text(encoding="utf-8")
    head_before = engine.head()
    for prompt, old, new, call in (
        ("chat.md", "Answer plainly", "Answer tersely", "call_chat"),
        ("heartbeat.md", "Spend this turn on upkeep", "Spend this turn idle", "call_hb"),
    ):
        out = edit_prompt(engine, old, new, prompt, origin="tool", session="ses_agent", call_id=call)
        assert "awaits review" in out["output"], out
    assert engine.head() == head_before, "a gated change must not be committed before approval"
    pending = {p["file"]: p["id"] for p in engine.get("/v1/changes")["pending"]}
    to_approve, to_reject = pending["prompts/chat.md"], pending["prompts/heartbeat.md"]

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: to_reject in changes.rows, "the pending changes in the table")
        for key in (to_approve, to_reject):
            assert cell_text(changes, key, "review") == "awaits review"
        assert "2 pending" in text_of(app.query_one("#views")), "the view bar counts what awaits review"

        await select_row(pilot, changes, to_approve)
        await pilot.press("a")
        await wait_until(pilot, lambda: engine.head() != head_before, "the approved change's commit")
        message = engine.git("log", "-1", "--format=%B")
        assert "Evolve-Approved-By: operator" in message, message
        assert f"Evolve-Pending: {to_approve}" in message
        assert "Evolve-Session: ses_agent" in message and "Evolve-Call: call_chat" in message
        assert "Answer tersely" in chat.read_text(encoding="utf-8")
        approved_sha = engine.head()
        await wait_until(pilot, lambda: approved_sha in changes.rows, "the installed change as a commit row")
        assert to_approve not in changes.rows

        await select_row(pilot, changes, to_reject)
        await pilot.press("d")
        await wait_until(pilot, lambda: isinstance(app.screen, RejectScreen), "the reject dialog")
        await pilot.press(*["space" if ch == " " else ch for ch in "keep it busy"], "enter")
        await wait_until(
            pilot,
            lambda: (
                {p["id"]: p["status"] for p in engine.get("/v1/changes")["pending"]}[to_reject] == "rejected"
            ),
            "the engine to record the rejection",
        )
        rejected = {p["id"]: p for p in engine.get("/v1/changes")["pending"]}[to_reject]
        assert rejected["note"] == "rejected by operator: keep it busy"
        # A rejected proposal stays in sight, marked, with its reason in its detail.
        await wait_until(
            pilot, lambda: cell_text(changes, to_reject, "review") == "rejected", "the row marked rejected"
        )
        await wait_until(
            pilot,
            lambda: ("information", "", "rejected: edit prompt heartbeat.md") in notifications(seen),
            lambda: f"the rejection's toast (notifications: {notifications(seen)})",
        )
        assert ("information", "", "approved and installed: edit prompt chat.md") in notifications(seen)
        assert heartbeat.read_text(encoding="utf-8") == heartbeat_before
        assert engine.head() == approved_sha, "a rejection commits nothing"

    drive(engine, scenario)
    assert chat.read_text(encoding="utf-8") != chat_before


# ---- hook runs -------------------------------------------------------------------------------------


def test_stage_filter_and_failures_switch(workspace: Path, start_engine: StartEngine) -> None:
    write_hook(workspace, "echo.py", ECHO_HOOK)
    write_hook(workspace, "fail_idle.py", FAIL_IDLE_HOOK)
    engine = start_engine(workspace)
    engine.stage("observe_message", {"answer": "hi"})
    engine.stage("idle", {"answer": "done"})
    idle_runs = {r["id"] for r in engine.get("/v1/runs", stage="idle")["runs"]}
    failed_runs = {r["id"] for r in engine.get("/v1/runs", failed="true")["runs"]}
    all_runs = {r["id"] for r in engine.get("/v1/runs")["runs"]}
    assert len(idle_runs) == 3  # echo, fail_idle, notes (the example hook)
    assert len(failed_runs) == 1
    assert {r["stage"] for r in engine.get("/v1/runs")["runs"]} >= {"discover", "observe_message", "idle"}

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        runs = table(app, "runs")
        await wait_until(pilot, lambda: set(row_keys(runs)) == all_runs, "every run in the table")

        await pilot.click("#filter-stage")
        assert app.focused is not None and app.focused.id == "filter-stage"
        await pilot.press(*"idle", "enter")
        await wait_until(
            pilot,
            lambda: set(row_keys(runs)) == idle_runs,
            lambda: f"only idle runs (rows: {row_keys(runs)})",
        )
        assert {cell_text(runs, k, "stage") for k in row_keys(runs)} == {"idle"}

        await pilot.press(*["backspace"] * 4, "enter")
        await wait_until(pilot, lambda: set(row_keys(runs)) == all_runs, "every run again")

        runs.focus()
        await pilot.press("x")
        assert app.query_one("#filter-failed", Switch).value is True
        await wait_until(
            pilot,
            lambda: set(row_keys(runs)) == failed_runs,
            lambda: f"only failed runs (rows: {row_keys(runs)})",
        )
        (failed,) = failed_runs
        assert cell_text(runs, failed, "status") == "failed"
        assert cell_text(runs, failed, "hook") == "fail_idle.py"

        await pilot.press("x")
        await wait_until(pilot, lambda: set(row_keys(runs)) == all_runs, "every run once the switch is off")

    drive(engine, scenario)


def test_slash_focuses_the_stage_filter(workspace: Path, start_engine: StartEngine) -> None:
    write_hook(workspace, "echo.py", ECHO_HOOK)
    engine = start_engine(workspace)
    engine.stage("idle", {"answer": "done"})
    idle_runs = {r["id"] for r in engine.get("/v1/runs", stage="idle")["runs"]}

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("slash")
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "filter-stage", f"focus is on {app.focused}"
        await pilot.press(*"idle", "enter")
        runs = table(app, "runs")
        await wait_until(pilot, lambda: set(row_keys(runs)) == idle_runs, "only the idle runs")

    drive(engine, scenario)


def test_run_stage_by_hand(workspace: Path, start_engine: StartEngine) -> None:
    write_hook(workspace, "echo.py", ECHO_HOOK)
    engine = start_engine(workspace)
    context = {"session": {"id": "manual", "agent": "build"}, "answer": "marker-4711"}

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("s")
        screen = await wait_until(
            pilot, lambda: app.screen if isinstance(app.screen, StageScreen) else None, "the stage dialog"
        )
        screen.query_one("#stage", Select).value = "idle"
        editor = screen.query_one("#context", TextArea)
        await wait_until(pilot, lambda: '"answer": "done"' in editor.text, "the idle template in the editor")
        editor.text = json.dumps(context, indent=2)
        await pilot.press("ctrl+r")
        result = await wait_until(
            pilot,
            lambda: app.screen if isinstance(app.screen, ResultScreen) else None,
            lambda: f"the result dialog (screen: {app.screen!r}, notifications: {notifications(seen)})",
        )
        assert result.title_text.startswith("idle: 2 hooks"), result.title_text
        merged = json.loads(result.text)
        assert merged["answer_seen"] == "marker-4711"
        assert merged["echo"] == "idle"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ResultScreen), "the result to close")

    drive(engine, scenario)
    dispatches = engine.get("/v1/dispatches", stage="idle")["dispatches"]
    assert [d["context"] for d in dispatches] == [context]
    assert dispatches[0]["merged"]["answer_seen"] == "marker-4711"


def test_tail_mode_follows_until_the_cursor_moves(workspace: Path, start_engine: StartEngine) -> None:
    engine = start_engine(workspace, EVOLVE_DEBUG_LOAD="1")

    def load(count: int) -> None:
        assert engine.post("/v1/debug/load", {"count": count})["recorded"] == count

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        runs = table(app, "runs")
        status = app.query_one("#runs-status")
        base = runs.row_count  # the example hook's discover run
        load(5)
        await wait_until(pilot, lambda: runs.row_count == base + 5, "five synthetic runs")
        assert runs.following and runs.cursor_row == runs.row_count - 1
        load(3)
        await wait_until(pilot, lambda: runs.row_count == base + 8, "three more runs")
        assert runs.cursor_row == runs.row_count - 1, "the cursor on the last row follows new runs"

        runs.focus()
        await pilot.press("up")
        assert not runs.following
        parked = runs.cursor_row
        parked_key = row_keys(runs)[parked]
        load(4)
        await wait_until(pilot, lambda: runs.row_count == base + 12, "four more runs")
        assert runs.cursor_row == parked and row_keys(runs)[parked] == parked_key
        await wait_until(
            pilot,
            lambda: "+4 new (g to follow)" in text_of(status),
            lambda: f"'+4 new' in the status line ({text_of(status)})",
        )

        await pilot.press("g")
        assert runs.following and runs.cursor_row == runs.row_count - 1
        await wait_until(pilot, lambda: "new (g to follow)" not in text_of(status), "the count to clear")
        load(2)
        await wait_until(pilot, lambda: runs.row_count == base + 14, "two more runs")
        assert runs.cursor_row == runs.row_count - 1

    drive(engine, scenario)


def test_status_line_counts_match_the_journal(engine: EngineProcess) -> None:
    engine.stage("idle", {"answer": "done"})
    counts = engine.get("/v1/runs")["counts"]

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        status = app.query_one("#runs-status")
        await pilot.pause(0.6)  # two batches of events
        assert text_of(status).startswith(
            f"{counts['runs']:,} {'run' if counts['runs'] == 1 else 'runs'} in the journal · 0 failed · 0 received live · showing {counts['runs']:,}"
        ), text_of(status)

    drive(engine, scenario)


# ---- the engine going away -------------------------------------------------------------------------


def test_engine_gone_keeps_the_rows(engine: EngineProcess) -> None:
    engine.stage("idle", {"answer": "done"})
    expected = {r["id"] for r in engine.get("/v1/runs")["runs"]}

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        runs, changes = table(app, "runs"), table(app, "changes")
        await wait_until(pilot, lambda: set(row_keys(runs)) == expected, "the runs")
        commits = row_keys(changes)
        assert commits
        await asyncio.to_thread(engine.cli, "stop")
        await wait_until(
            pilot,
            lambda: not app.engine_connected and "engine ○ down" in connection_text(app),
            lambda: f"'engine ○ down' (connection bar: {connection_text(app)!r})",
        )
        await asyncio.to_thread(engine.wait_exit, 10)
        await pilot.pause(0.6)  # a few batches of the event loop, to see that nothing gets cleared
        assert set(row_keys(runs)) == expected
        assert row_keys(changes) == commits
        assert not app.engine_connected

    drive(engine, scenario)


def test_engine_stop_is_seen_promptly(engine: EngineProcess) -> None:
    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await asyncio.to_thread(engine.cli, "stop")
        await wait_until(
            pilot,
            lambda: not app.engine_connected,
            lambda: f"'disconnected' within 2 s of `evolve stop` (connection bar: {connection_text(app)!r})",
            timeout=2.0,
        )

    drive(engine, scenario)


def test_engine_restart_reconnects_with_history(engine: EngineProcess) -> None:
    engine.stage("idle", {"answer": "done"})
    before = {r["id"] for r in engine.get("/v1/runs")["runs"]}
    port = engine.port

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        runs = table(app, "runs")
        await wait_until(pilot, lambda: set(row_keys(runs)) == before, "the runs")
        engine.kill()  # a crash; and no wait for the shutdown grace period
        await wait_until(pilot, lambda: not app.engine_connected, "'disconnected'")
        await asyncio.to_thread(engine.start, port)  # the same workspace, even the same port
        await asyncio.to_thread(engine.stage, "idle", {"answer": "again"})
        # The restarted engine has a new token: the console reads it from state/engine.json.
        await wait_until(
            pilot,
            lambda: app.engine_connected,
            lambda: f"the console to reconnect (connection bar: {connection_text(app)!r})",
        )
        assert app.engine_connected, f"not reconnected: {connection_text(app)}"
        assert " connected " in connection_text(app)
        after = {r["id"] for r in engine.get("/v1/runs")["runs"]}
        await wait_until(pilot, lambda: set(row_keys(runs)) == after, "the history and the new runs")
        assert before < after

    drive(engine, scenario)


def test_runs_just_recorded_are_in_the_next_read(workspace: Path, start_engine: StartEngine) -> None:
    """The journal writes in batches; a read must still hold every run recorded (and announced on
    the event stream) before it, or a console loading its history would miss them."""
    engine = start_engine(workspace, EVOLVE_DEBUG_LOAD="1")
    base = engine.get("/v1/runs", limit=0)["counts"]["runs"]
    for round_ in range(1, 6):
        assert engine.post("/v1/debug/load", {"count": 40})["recorded"] == 40
        runs = engine.get("/v1/runs", limit=1000)
        assert runs["counts"]["runs"] == base + 40 * round_
        assert len(runs["runs"]) == min(base + 40 * round_, 1000)


def test_runs_recorded_while_connecting_are_not_lost(workspace: Path, start_engine: StartEngine) -> None:
    engine = start_engine(workspace, EVOLVE_DEBUG_LOAD="1")
    stop = threading.Event()

    def feed() -> None:
        for _ in range(300):  # below the console's 500 rows of history
            if stop.is_set():
                return
            engine.post("/v1/debug/load", {"count": 1})
            time.sleep(0.01)

    feeder = threading.Thread(target=feed, name="feeder")
    feeder.start()
    try:

        async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
            runs = table(app, "runs")
            stop.set()
            await asyncio.to_thread(feeder.join)
            # The journal writes in batches: read it again until it and the table agree.
            journal: set[str] = set()

            def agree() -> bool:
                journal.clear()
                journal.update(r["id"] for r in engine.get("/v1/runs", limit=1000)["runs"])
                return set(row_keys(runs)) == journal

            await wait_until(
                pilot,
                agree,
                lambda: (
                    f"every run of the journal in the table ({len(journal - set(row_keys(runs)))} missing, "
                    f"{len(set(row_keys(runs)) - journal)} not in the journal)"
                ),
                timeout=10,
            )

        drive(engine, scenario)
    finally:
        stop.set()
        feeder.join()


# ---- bad data --------------------------------------------------------------------------------------


def test_huge_and_binary_output_is_bounded(workspace: Path, start_engine: StartEngine) -> None:
    write_hook(workspace, "big.py", BIG_STDOUT_HOOK)
    write_hook(workspace, "garbage.py", GARBAGE_HOOK)
    write_hook(workspace, "huge_system.py", HUGE_SYSTEM_HOOK)
    engine = start_engine(workspace, EVOLVE_HOOK_OUTPUT_LIMIT=str(16 * 1024 * 1024))
    engine.stage("idle", {"answer": "done"})
    frozen = engine.post("/v1/opencode/system", {"session": "ses_big", "system": ["You are opencode."]})
    assert frozen["reason"] == "frozen" and len(frozen["system"][0]) == 10_000_000
    idle = {r["hook"]: r for r in engine.get("/v1/runs", stage="idle")["runs"]}
    big, garbage = idle["big.py"]["id"], idle["garbage.py"]["id"]
    assert idle["big.py"]["error"] is None
    assert "not valid UTF-8" in idle["garbage.py"]["error"]

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        runs = table(app, "runs")
        await wait_until(pilot, lambda: big in runs.rows and garbage in runs.rows, "the idle runs")

        runs_view = app.query_one(RunsView)
        await select_row(pilot, runs, big)
        await wait_until(
            pilot, lambda: runs_view.run is not None and runs_view.run.id == big, "the big run's details"
        )
        await wait_until(pilot, lambda: is_cut(app, "run-detail", "stdout"), "the stdout field to be cut")
        pane = app.query_one("#run-detail", DetailPane)
        assert "press m to see more" in pane.plain
        assert len(detail_text(app, "run-detail", "stdout")) <= PREVIEW_LIMIT
        assert len(pane.plain) < 3 * PREVIEW_LIMIT
        await pilot.press("m")
        more = await wait_until(
            pilot, lambda: app.screen if isinstance(app.screen, MoreScreen) else None, "the full view"
        )
        assert more.title_text in ("stdout lines", "parsed result")  # both hold the 3 MB string
        # cut at MORE_LIMIT characters, long lines broken into pieces (newlines added)
        assert MORE_LIMIT <= len(more.query_one("#more-text", TextArea).text) <= MORE_LIMIT * 1.01
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, MoreScreen), "the full view to close")

        runs.focus()
        await select_row(pilot, runs, garbage)
        await wait_until(
            pilot, lambda: runs_view.run is not None and runs_view.run.id == garbage, "the garbage run"
        )
        assert "not valid UTF-8" in detail_text(app, "run-detail", "error")
        body = detail_text(app, "run-detail", "stdout")
        assert "\\x00" in body and "\\x1b[31mred" in body, body[:300]
        assert not any(ch in body for ch in "\x00\x1b\x07"), "control characters must be made visible"

        await pilot.press("3")
        sessions = table(app, "sessions")
        await wait_until(pilot, lambda: "ses_big" in sessions.rows, "the session with the 10 MB prompt")
        chars = int(cell_text(sessions, "ses_big", "prompt").removesuffix(" ch").replace(",", ""))
        assert chars == sum(len(s) for s in frozen["system"])
        await select_row(pilot, sessions, "ses_big")
        await wait_until(pilot, lambda: is_cut(app, "session-detail", "system"), "the frozen prompt, cut")
        assert "press m to see more" in app.query_one("#session-detail", DetailPane).plain
        assert len(detail_text(app, "session-detail", "system")) <= PREVIEW_LIMIT
        assert app.is_running

    seen = drive(engine, scenario)
    assert not errors_shown(seen), errors_shown(seen)
