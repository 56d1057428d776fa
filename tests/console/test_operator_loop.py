"""The operator's loop (notice, understand, judge, act) with the real console against a real engine.

The agent is simulated through the engine's API exactly as the opencode plugin (shim/evolve.js)
speaks for it: a session opens with opencode's events and its first chat message, its frozen prompt
is `POST /v1/opencode/system`, the tools opencode offers are `POST /v1/opencode/tools-offered`, a
tool call carries the agent's words (`context: {text, reasoning}`) and its turn, a finished response
is `POST /v1/opencode/assistant`. Each test then presses the keys an operator would and checks what
came of it in the engine (its API) and in git (commits, trailers, notes), and on the screen.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.command import CommandPalette
from textual.message import Message
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, OptionList, SelectionList

from engine.opencode.notifier import wrap
from evolve_console.app import EvolveConsole
from evolve_console.detail import DetailPane
from evolve_console.diffview import DiffView
from evolve_console.screens import ConfirmScreen, RejectScreen, RevertScreen
from evolve_console.table import KeyedTable
from evolve_console.turn import TurnScreen
from tests.console.conftest import (
    SIZE,
    StartEngine,
    cell_text,
    connected,
    drawn,
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
from tests.support.waiting import wait_for

PROVENANCE = "--ref=refs/notes/evolve-provenance"
REVIEW = "--ref=refs/notes/evolve-review"
CONNECTION_HEADER = "x-evolve-connection"  # as the plugin sends it after connecting

# The example hook's list tool, as the agent edits it: the test of the hook passes this edit...
LIST_OLD = '"description": "List your notes, one per line, oldest first; optionally only those with a tag."'
LIST_NEW = '"description": "List your notes, one per line, newest first; optionally only those with a tag."'
# ... and rejects this one ("optional" must be a boolean).
BROKEN_OLD = '"tag": {"type": "string", "optional": True}'
BROKEN_NEW = '"tag": {"type": "string", "optional": "yes"}'

FAIL_IDLE_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "idle":
    sys.stderr.write("no idle today\\n")
    sys.exit(1)
print("{}")
"""


class Shim:
    """The opencode plugin, as far as these tests need it: one opencode connection, and what it
    tells the engine about its sessions, its requests and the agent's tool calls."""

    def __init__(self, engine: EngineProcess) -> None:
        self.engine = engine
        # The connection's address is the engine's own: it answers (with a refusal), which is all
        # the engine's liveness check asks; a notification delivered there fails, and is recorded.
        found = engine.post(
            "/v1/opencode/connect", {"url": engine.url, "directory": str(engine.workspace), "mode": "server"}
        )
        self.connection = str(found["id"])

    def post(self, path: str, body: dict[str, Any]) -> Any:
        resp = httpx.post(
            self.engine.url + path,
            json=body,
            headers={"authorization": f"Bearer {self.engine.token}", CONNECTION_HEADER: self.connection},
            timeout=60,
            verify=False,
        )
        assert resp.status_code < 400, f"POST {path} -> {resp.status_code}: {resp.text[:2000]}"
        return resp.json()

    def open_session(self, session: str, title: str) -> None:
        """opencode creates a session and the user's first message reaches the build agent."""
        self.post(
            "/v1/opencode/event",
            {"type": "session.created", "properties": {"info": {"id": session, "title": title}}},
        )
        self.post("/v1/opencode/chat-message", {"session": session, "agent": "build"})

    def request(
        self,
        session: str,
        turn: str | None = None,
        history: list[dict[str, Any]] | None = None,
        tools: list[str] | None = None,
    ) -> dict[str, Any]:
        """An LLM request of the session: its system prompt (frozen at the first one)."""
        body: dict[str, Any] = {"session": session, "system": ["You are opencode."], "turn": turn}
        if history is not None:
            body["history"] = history
        if tools is not None:
            body["tools"] = tools
        answer: dict[str, Any] = self.post("/v1/opencode/system", body)
        return answer

    def chat_message(self, session: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.post(
            "/v1/opencode/chat-message", {"session": session, "agent": "build"}
        )
        return answer

    def call(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        session: str,
        call_id: str,
        text: str = "",
        reasoning: str = "",
        turn: str | None = None,
        permission: str = "not asked",
        refused: str | None = None,
        history: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A tool call of the agent, as the plugin's `makeTool` sends it."""
        body: dict[str, Any] = {
            "args": args,
            "session": session,
            "call_id": call_id,
            "context": {"text": text, "reasoning": reasoning},
            "permission": permission,
            "turn": turn,
        }
        if refused is not None:
            body["refused"] = refused
        if history is not None:
            body["history"] = history
        answer: dict[str, Any] = self.post(f"/v1/tools/{tool}/call", body)
        return answer

    def edit_prompt(self, old: str, new: str, prompt: str = "chat.md", **call: Any) -> dict[str, Any]:
        return self.call("evolve_prompt_edit", {"prompt": prompt, "oldString": old, "newString": new}, **call)

    def finished(self, session: str, message_id: str, turn: str, text: str) -> None:
        """A finished response of the agent (text only: the loop stops, so idle runs too)."""
        self.post(
            "/v1/opencode/assistant",
            {
                "session": session,
                "message": {"id": message_id, "agent": "build", "finish": "stop", "turn": turn},
                "parts": [{"type": "text", "text": text}],
            },
        )


# ---- running the console ----------------------------------------------------------------------------

Scenario = Callable[[EvolveConsole, Pilot[Any], list[Message]], Coroutine[Any, Any, None]]


def run_console(engine: EngineProcess, scenario: Scenario, **options: Any) -> list[Message]:
    """The console attached to `engine` (with `options`), playing `scenario`; the messages seen."""
    seen: list[Message] = []

    async def main() -> None:
        app = EvolveConsole(engine.target, **options)
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await connected(pilot)
            await scenario(app, pilot, seen)
            await settle(pilot)
        assert app.return_code in (None, 0), f"the console exited with {app.return_code}"

    asyncio.run(main())
    return seen


def test_the_palettes_go_commands_lead_to_the_session_and_back(engine: EngineProcess) -> None:
    shim = Shim(engine)
    shim.open_session("ses_palette", "Palette please")
    call = shim.call("evolve_datetime", {}, session="ses_palette", call_id="call_palette")

    async def command(app: EvolveConsole, pilot: Pilot[Any], text: str) -> None:
        """`text` typed in the command palette (ctrl+p), then enter on the first hit."""
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), "the command palette")
        app.screen.query_one(Input).value = text
        hits = app.screen.query_one(OptionList)
        await wait_until(
            pilot,
            lambda: hits.option_count > 0 and text in str(hits.get_option_at_index(0).prompt),
            f"{text!r} offered",
        )
        await pilot.press("enter")
        await wait_until(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette closed")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await command(app, pilot, "view: tool calls")
        tools = table(app, "tools")
        await wait_until(pilot, lambda: app.shown == "tools" and call["id"] in tools.rows, "the call listed")
        await select_row(pilot, tools, call["id"])
        await command(app, pilot, "go: the session of the selected row")
        await wait_until(pilot, lambda: app.shown == "sessions", "the sessions view")
        assert shown_in(app, "sessions") == "ses_palette"
        await command(app, pilot, "go: back")
        await wait_until(pilot, lambda: app.shown == "tools", "back to the tool calls")
        assert shown_in(app, "tools") == call["id"]

    run_console(engine, scenario)


def diff_text(app: EvolveConsole) -> str:
    return app.query_one("#change-detail", DiffView).as_text()


def views_text(app: EvolveConsole) -> str:
    return text_of(app.query_one("#views"))


def shown_in(app: EvolveConsole, view: str) -> str | None:
    """The key of the row selected in `view`'s table."""
    return app.query_one(f"#{view}-table", KeyedTable).selected_key()


def changes_by_sha(engine: EngineProcess) -> dict[str, dict[str, Any]]:
    return {c["sha"]: c for c in engine.get("/v1/changes")["changes"]}


def pending_by_id(engine: EngineProcess) -> dict[str, dict[str, Any]]:
    return {p["id"]: p for p in engine.get("/v1/changes")["pending"]}


def note(engine: EngineProcess, ref: str, sha: str) -> str:
    return engine.git("notes", ref, "show", sha, check=False).strip()


def trailers(engine: EngineProcess, sha: str) -> str:
    return engine.git("show", "-s", "--format=%(trailers)", sha)


def gate(workspace: Path) -> None:
    """`"review": "gate"` in the workspace's config."""
    config = workspace / "config" / "evolve.jsonc"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace('"hook_timeout": 30000,', '"hook_timeout": 30000,\n  "review": "gate",'))
    assert '"review": "gate"' in config.read_text(encoding="utf-8")


async def open_dialog(pilot: Pilot[Any], kind: type, what: str) -> Any:
    app = pilot.app
    return await wait_until(pilot, lambda: app.screen if isinstance(app.screen, kind) else None, what)


# ---- 1. why and what was checked, above the diff, in git and in the API -----------------------------


def test_a_hook_edit_shows_the_agents_words_reasoning_call_and_test_above_the_diff(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    shim.open_session("ses_hookedit01", "Shorter lists")
    said = "The person wants the newest notes first; I will change the list tool's description."
    thought = "The description is what the model reads, so it must say newest first."
    args = {"hook": "notes.py", "oldString": LIST_OLD, "newString": LIST_NEW}
    result = shim.call(
        "evolve_hook_edit",
        args,
        session="ses_hookedit01",
        call_id="call_edit01",
        text=said,
        reasoning=thought,
    )
    sha = result["commit"]
    assert sha and result["error"] is None, result

    # The record, kept with the commit: the git note and the API say the same.
    recorded = json.loads(note(engine, PROVENANCE, sha))
    assert recorded["agent_text"] == said and recorded["reasoning"] == thought
    assert recorded["tool"] == "evolve_hook_edit" and recorded["args"] == args
    assert recorded["session"] == "ses_hookedit01" and recorded["session_title"] == "Shorter lists"
    assert recorded["call_id"] == "call_edit01"
    checked = recorded["validation"]
    assert checked["test"] == "notes_test.py" and checked["command"] == "tests/notes_test.py"
    assert checked["ok"] is True and checked["exit_code"] == 0
    assert (checked["passed"], checked["failed"], checked["total"]) == (4, None, 4)
    assert "notes_test: 4 checks, 4 passed" in checked["output_tail"]
    assert engine.get(f"/v1/changes/{sha}")["provenance"] == recorded

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the hook edit in the changes table")
        assert cell_text(changes, sha, "origin") == "agent"
        assert cell_text(changes, sha, "review") == "not reviewed"
        await select_row(pilot, changes, sha)
        await wait_until(pilot, lambda: "what was checked" in diff_text(app), "the change's detail")
        shown = diff_text(app)
        head, _, diff = shown.partition("\n@@ ")
        assert diff, f"no diff below the head:\n{shown}"
        assert "session Shorter lists (ses_hookedit01)" in head
        assert f"why: what the agent said before the call\n{said}" in head
        assert f"its reasoning\n{thought}" in head
        assert "the call: evolve_hook_edit" in head and '"hook": "notes.py"' in head
        assert json.dumps(LIST_NEW)[1:-1] in head  # the arguments, as JSON
        assert "what was checked\ntests/notes_test.py: passed (exit 0, " in head
        assert "counts: 4 passed, 4 in all" in head
        assert "notes_test: 4 checks, 4 passed" in head
        assert "+        " + LIST_NEW in diff and "-        " + LIST_OLD in diff

    run_console(engine, scenario)


# ---- 2. the tool calls view: results, drill-down to the session and back ----------------------------


def test_tool_calls_view_shows_each_result_and_enter_goes_to_the_session_and_escape_back(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    shim.open_session("ses_toolcalls1", "Datetime please")
    shim.open_session("ses_toolcalls2", "Risky edits")
    ok = shim.call("evolve_datetime", {}, session="ses_toolcalls1", call_id="call_ok")
    failed = shim.call(
        "evolve_hook_edit",
        {"hook": "notes.py", "oldString": BROKEN_OLD, "newString": BROKEN_NEW},
        session="ses_toolcalls2",
        call_id="call_bad",
        text="Let me make tag optional in another way.",
    )
    denied = shim.call(
        "notes_add",
        {"text": "call the bank", "priority": "high"},
        session="ses_toolcalls2",
        call_id="call_no",
        permission="denied by opencode",
        refused="The user rejected permission to use this specific tool call.",
    )
    assert ok["error"] is None and ok["commit"] is None
    assert failed["error"] == "validation failed:" and failed["commit"] is None, failed
    assert "FAIL discover: tool list parameter tag: optional must be true or false" in failed["output"]
    assert denied["error"].startswith("permission denied: The user rejected"), denied
    assert engine.head() == engine.git("rev-list", "--max-parents=0", "HEAD").strip(), "nothing committed"
    journal = {c["id"]: c for c in engine.get("/v1/tool-calls")["tool_calls"]}
    assert journal[denied["id"]]["permission"] == "denied by opencode"
    assert journal[failed["id"]]["validation"]["ok"] is False

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("6")
        tools = table(app, "tools")
        await wait_until(pilot, lambda: denied["id"] in tools.rows, "the three calls in the tool calls view")
        assert row_keys(tools) == [ok["id"], failed["id"], denied["id"]]
        assert [cell_text(tools, k, "result") for k in row_keys(tools)] == ["ok", "failed", "denied"]
        assert [cell_text(tools, k, "session") for k in row_keys(tools)] == [
            "Datetime please",
            "Risky edits",
            "Risky edits",
        ]
        pane = app.query_one("#tool-detail", DetailPane)

        await select_row(pilot, tools, failed["id"])
        await wait_until(pilot, lambda: "evolve_hook_edit  failed" in pane.plain, "the failed call's detail")
        assert "validation failed:" in pane.bodies["output"]
        assert "optional must be true or false" in pane.bodies["output"], (
            "the test's output, as the agent read it"
        )
        assert "tests/notes_test.py: FAILED (exit 1" in pane.bodies["validation"]
        assert "counts: 3 passed, 1 failed, 4 in all" in pane.bodies["validation"]
        assert pane.bodies["said"] == "Let me make tag optional in another way."

        await select_row(pilot, tools, denied["id"])
        await wait_until(pilot, lambda: "notes_add  denied" in pane.plain, "the denied call's detail")
        assert "permission: denied by opencode" in pane.plain
        assert pane.bodies["output"].startswith("permission denied: The user rejected")

        # enter: the call's session in view 3, selected; escape: back to this call.
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.shown == "sessions", "the sessions view")
        assert shown_in(app, "sessions") == "ses_toolcalls2"
        session_pane = app.query_one("#session-detail", DetailPane)
        await wait_until(pilot, lambda: "Risky edits\nses_toolcalls2" in session_pane.plain, "its detail")
        # Meanwhile the agent goes on: a new call. The operator picked the denied call (the last row,
        # with the arrows): the table stays on it and counts the new one.
        later = await asyncio.to_thread(
            shim.call, "evolve_datetime", {}, session="ses_toolcalls1", call_id="c4"
        )
        await wait_until(pilot, lambda: later["id"] in tools.rows, "the new call in the table")
        assert shown_in(app, "tools") == denied["id"] and not tools.following and tools.unseen == 1
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.shown == "tools", "back to the tool calls")
        assert shown_in(app, "tools") == denied["id"], "the call enter was pressed on"
        await wait_until(
            pilot,
            lambda: "following paused · +1 new · g: follow" in drawn(tools),
            lambda: f"the table to say it does not follow ({drawn(tools)[-300:]!r})",
        )
        await pilot.press("g")
        assert shown_in(app, "tools") == later["id"] and tools.following, "g: the newest call, followed"

        await select_row(pilot, tools, ok["id"])
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.shown == "sessions", "the sessions view again")
        assert shown_in(app, "sessions") == "ses_toolcalls1"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.shown == "tools", "back again")
        assert shown_in(app, "tools") == ok["id"]

    run_console(engine, scenario)


# ---- 3. the turn that made a change ----------------------------------------------------------------


def test_enter_on_a_change_opens_its_turn_with_its_runs_and_leads_to_a_run_or_the_session(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    session = "ses_turn000001"
    shim.open_session(session, "Tone of voice")
    # The turn's first request freezes the session's prompt (mutate_request, marked with the turn).
    shim.request(session, turn="msg_user1")
    said = "You asked for terse answers; I will change my chat prompt."
    # The messages of the request whose response makes the call: the user's, and an earlier step
    # of the same turn (the calling response itself is not among them yet).
    earlier = "Let me look at my notes first."
    history = [
        {
            "info": {"role": "user", "id": "msg_user1"},
            "parts": [{"type": "text", "text": "Be terse from now on."}],
        },
        {
            "info": {"role": "assistant", "id": "msg_asst1a", "agent": "build"},
            "parts": [
                {"type": "text", "text": earlier},
                {"type": "tool", "tool": "notes_list", "callID": "call_list"},
            ],
        },
    ]
    edit = shim.edit_prompt(
        "Answer plainly and briefly.",
        "Answer tersely.",
        session=session,
        call_id="call_tone",
        text=said,
        turn="msg_user1",
        history=history,
    )
    sha = edit["commit"]
    assert sha, edit
    # Before the turn ends, the operator runs a stage by hand for the session: its run is the
    # session's, in the turn's time, and not the turn's.
    by_hand = engine.stage("observe_message", {"session": {"id": session}, "answer": "x"}, session=session)
    shim.finished(session, "msg_asst1", "msg_user1", "Done: I changed my prompt.")
    # The next turn's request carries the session's messages so far: the call's, and later ones.
    calling = {
        "info": {"role": "assistant", "id": "msg_asst1b", "agent": "build"},
        "parts": [
            {"type": "text", "text": said},
            {
                "type": "tool",
                "tool": "evolve_prompt_edit",
                "callID": "call_tone",
                "state": {"status": "completed", "input": {}, "output": edit["output"]},
            },
        ],
    }
    later = {"info": {"role": "user", "id": "msg_user2"}, "parts": [{"type": "text", "text": "Later words."}]}
    shim.request(session, turn="msg_user2", history=[*history, calling, later])
    shim.finished(session, "msg_asst2", "msg_user2", "A later turn.")

    def turns() -> list[str | None]:
        return [d.get("turn") for d in engine.get("/v1/dispatches", session=session)["dispatches"]]

    # The responses' stages run in the background.
    wait_for(
        "the stages of both turns",
        lambda: turns().count("msg_user1") == 3 and turns().count("msg_user2") == 2,
    )
    in_turn = [
        d for d in engine.get("/v1/dispatches", session=session)["dispatches"] if d.get("turn") == "msg_user1"
    ]
    assert sorted(d["stage"] for d in in_turn) == ["idle", "mutate_request", "observe_message"]
    turn_runs = {run for d in in_turn for run in d["runs"]}
    assert not turn_runs & set(by_hand["runs"])

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the agent's change")
        await select_row(pilot, changes, sha)
        await pilot.press("enter")
        screen = await open_dialog(pilot, TurnScreen, "the turn screen")
        runs = screen.query_one("#turn-runs", KeyedTable)
        assert set(row_keys(runs)) == turn_runs
        assert [cell_text(runs, k, "stage") for k in row_keys(runs)] == [
            "mutate_request",
            "observe_message",
            "idle",
        ]
        detail = screen.query_one("#turn-detail", DetailPane)
        assert "the turn that made “edit prompt chat.md”" in detail.plain
        assert f"session Tone of voice ({session})" in detail.plain
        assert f"{len(turn_runs)} hook runs in that turn" in detail.plain
        assert detail.bodies["said"] == f"{earlier}\n{said}", "what it said in the turn up to the call"
        assert '"newString": "Answer tersely."' in detail.bodies["call"]
        assert detail.bodies["result"].startswith("successfully")
        assert "Be terse from now on." in detail.bodies["history"]
        assert "→ tool evolve_prompt_edit (completed)" in detail.bodies["history"]
        assert "Later words." not in detail.bodies["history"], "the session up to the call, not after it"

        # enter on a run: view 1 with that run selected. escape goes back one step at a time: to
        # the turn screen, at that run, then to the change.
        run = row_keys(runs)[1]
        await select_row(pilot, runs, run)
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: app.shown == "runs" and app.screen is not screen, "the hook runs view"
        )
        assert shown_in(app, "runs") == run
        await pilot.press("escape")
        again = await open_dialog(pilot, TurnScreen, "the turn screen again, one step back")
        assert again is not screen and again.query_one("#turn-runs", KeyedTable).selected_key() == run
        assert app.shown == "changes" and shown_in(app, "changes") == sha, "the change under it"
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TurnScreen), "the turn screen to close")
        assert app.shown == "changes" and shown_in(app, "changes") == sha

        # Two steps on: the run, then its session; escape: the run, the turn, the change.
        await pilot.press("enter")
        screen = await open_dialog(pilot, TurnScreen, "the turn screen again")
        await select_row(pilot, screen.query_one("#turn-runs", KeyedTable), run)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.shown == "runs" and app.screen is not screen, "the run")
        await wait_until(pilot, lambda: app.main.shown_view.selected_session() == session, "its session")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.shown == "sessions", "the run's session")
        assert shown_in(app, "sessions") == session
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.shown == "runs", "back to the run")
        assert shown_in(app, "runs") == run and not isinstance(app.screen, TurnScreen)
        await pilot.press("escape")
        again = await open_dialog(pilot, TurnScreen, "back to the turn screen")
        assert again.query_one("#turn-runs", KeyedTable).selected_key() == run
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TurnScreen), "the turn screen to close")
        assert app.shown == "changes" and app.main.trail == [], "nothing left to go back to"

        # o: the session in view 3; escape: the turn screen; escape: the change.
        await pilot.press("enter")
        await open_dialog(pilot, TurnScreen, "the turn screen once more")
        await pilot.press("o")
        await wait_until(pilot, lambda: app.shown == "sessions", "the sessions view")
        assert shown_in(app, "sessions") == session
        await pilot.press("escape")
        await open_dialog(pilot, TurnScreen, "the turn screen, one step back from the session")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TurnScreen), "the turn screen to close")
        assert app.shown == "changes" and shown_in(app, "changes") == sha

        # escape on the turn screen: back to the change.
        await pilot.press("enter")
        await open_dialog(pilot, TurnScreen, "the turn screen a third time")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, TurnScreen), "the turn screen to close")
        assert app.shown == "changes" and shown_in(app, "changes") == sha

    run_console(engine, scenario)


# ---- 4. a session's context as the model saw it ----------------------------------------------------


def test_sessions_view_shows_the_prompt_as_sent_tools_offered_messages_and_notifications(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    session = "ses_context001"
    shim.open_session(session, "Context check")
    offered = [
        {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
        {
            "name": "evolve_prompt_edit",
            "description": "Edit a prompt.",
            "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}},
        },
    ]
    shim.post("/v1/opencode/tools-offered", {"tools": offered})
    question = "What did I tell you about Friday?"
    answer = "You said the release is on Friday."
    history = [
        {"info": {"role": "user", "id": "msg_u1"}, "parts": [{"type": "text", "text": question}]},
        {
            "info": {"role": "assistant", "id": "msg_a1", "agent": "build"},
            "parts": [
                {"type": "reasoning", "text": "Check the notes first."},
                {
                    "type": "tool",
                    "tool": "notes_list",
                    "callID": "call_l",
                    "state": {
                        "status": "completed",
                        "input": {"tag": "release"},
                        "output": "1. release on Friday",
                    },
                },
                {"type": "text", "text": answer},
            ],
        },
        {
            "info": {"role": "user", "id": "msg_u2"},
            "parts": [{"type": "text", "text": wrap("- notes: 3 notes kept"), "synthetic": True}],
        },
        {
            "info": {"role": "user", "id": "msg_u3"},
            "parts": [{"type": "text", "text": "[heartbeat] Tidy your notes.", "synthetic": True}],
        },
    ]
    sent = shim.request(session, turn="msg_u1", history=history, tools=[t["name"] for t in offered])
    assert sent["reason"] == "frozen"
    system = sent["system"]
    edit = shim.edit_prompt("Answer plainly", "Answer warmly", session=session, call_id="call_warm")
    engine.post(f"/v1/changes/{edit['commit']}/approve")
    known = engine.get(f"/v1/sessions/{session}")
    assert known["system"] == system
    (told,) = known["notifications"]
    assert told["change"] == edit["commit"] and "The operator approved your change" in told["text"]

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("3")
        sessions = table(app, "sessions")
        await wait_until(pilot, lambda: session in sessions.rows, "the session")
        await wait_until(
            pilot, lambda: cell_text(sessions, session, "notes") == "1", "its notification counted"
        )
        await select_row(pilot, sessions, session)
        pane = app.query_one("#session-detail", DetailPane)
        await wait_until(pilot, lambda: "Context check" in pane.plain, "the session's context")
        # The system prompt exactly as sent: every element, in order.
        assert pane.bodies["system"] == "\n\n──── next system message ────\n\n".join(system)
        assert pane.bodies["tools"] == "read, evolve_prompt_edit\n(t: with their schemas)"
        messages = pane.bodies["messages"]
        assert (
            f"──── user · {len(question)} chars · ~{(len(question) + 3) // 4} tokens ────\n{question}"
            in messages
        )
        assert "──── assistant · agent build · " in messages
        assert "(reasoning) Check the notes first." in messages
        assert (
            '→ tool notes_list (completed)\n  arguments: {"tag": "release"}\n  result: 1. release on Friday'
            in messages
        )
        assert answer in messages
        assert "──── notification (to the agent) · " in messages and "notes: 3 notes kept" in messages
        assert "──── user (sent by evolve) · " in messages and "[heartbeat] Tidy your notes." in messages
        assert "messages (4)" in pane.plain and "in 4 messages" in pane.plain
        assert f"about {edit['commit'][:10]}" in pane.bodies["notifications"]
        assert "The operator approved your change" in pane.bodies["notifications"]

        await pilot.press("t")  # the schemas
        await wait_until(pilot, lambda: '"properties"' in pane.bodies["tools"], "the tools' schemas")
        assert pane.bodies["tools"].startswith("read: Read a file.\n{")
        assert "evolve_prompt_edit: Edit a prompt." in pane.bodies["tools"]
        await pilot.press("t")  # names only again
        await wait_until(pilot, lambda: '"properties"' not in pane.bodies["tools"], "the names only")
        assert pane.bodies["tools"].startswith("read, evolve_prompt_edit")

    run_console(engine, scenario)


# ---- 5. what waits for the operator: pending count, bell, toast; a hook that starts failing -----------


@pytest.mark.parametrize("bell", [True, False], ids=["bell", "no-bell"])
def test_a_held_change_counts_as_pending_rings_the_bell_and_raises_a_toast(
    bell: bool, workspace: Path, start_engine: StartEngine
) -> None:
    gate(workspace)
    engine = start_engine(workspace)
    assert engine.get("/v1/status")["config"]["review"] == "gate"
    shim = Shim(engine)
    shim.open_session("ses_attention1", "Attention")
    rings: list[int] = []

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
        await pilot.press("5")
        assert "pending" not in views_text(app)
        held = await asyncio.to_thread(
            shim.edit_prompt, "Answer plainly", "Answer tersely", session="ses_attention1", call_id="call_a"
        )
        assert "awaits review" in held["output"], held
        await wait_until(pilot, lambda: "5 Self-modifications 1 pending" in views_text(app), "1 pending")
        await wait_until(
            pilot,
            lambda: any("a change awaits your review" in n[2] for n in notifications(seen)),
            lambda: f"the toast (notifications: {notifications(seen)})",
        )
        (toast,) = [n for n in notifications(seen) if "awaits your review" in n[2]]
        (pending,) = engine.get("/v1/changes")["pending"]
        # Its title names the change and the key that selects it.
        assert toast == (
            "warning",
            f"held for review · j: show {pending['id']}",
            "a change awaits your review: edit prompt chat.md (prompts/chat.md)",
        )
        await settle(pilot)
        assert rings == ([1] if bell else [])
        await pilot.press("6")  # the call that made it: held, naming the change
        tools = table(app, "tools")
        await wait_until(pilot, lambda: held["id"] in tools.rows, "the call")
        assert cell_text(tools, held["id"], "result") == "held"
        assert cell_text(tools, held["id"], "commit") == pending["id"]

    run_console(engine, scenario, bell=bell)
    assert [p["status"] for p in engine.get("/v1/changes")["pending"]] == ["pending"]


def test_a_hook_that_starts_failing_alerts_once_and_the_runs_badge_clears_when_seen(
    workspace: Path, start_engine: StartEngine
) -> None:
    write_hook(workspace, "fail_idle.py", FAIL_IDLE_HOOK)
    engine = start_engine(workspace)
    rings: list[int] = []

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
        await pilot.press("5")
        first = await asyncio.to_thread(engine.stage, "idle", {"answer": "done"})
        assert first["failed"] == ["fail_idle.py"]
        await wait_until(pilot, lambda: "1 Hook runs 1 failed" in views_text(app), "the runs badge")
        await wait_until(
            pilot, lambda: [n for n in notifications(seen) if "started failing" in n[2]], "the alert"
        )
        alerts = [n for n in notifications(seen) if "started failing" in n[2]]
        # The error's own last line (its stderr), and the change most likely behind it: the hook
        # was added by hand, committed as an external change; the keys show and revert it.
        (failure,) = engine.get("/v1/failures")["failures"]
        sha = failure["suspect"]["sha"]
        assert failure["message"].startswith(
            f"hooks/fail_idle.py started failing at idle: no idle today (since {sha[:7]}, external, "
        )
        assert alerts == [
            ("warning", f"a hook started failing · j: show {sha[:7]} · R: revert it", failure["message"])
        ]
        assert rings == [1]

        await asyncio.to_thread(engine.stage, "idle", {"answer": "again"})
        await wait_until(pilot, lambda: "1 Hook runs 2 failed" in views_text(app), "two failures counted")
        await settle(pilot)
        await pilot.pause(0.3)  # one more batch of events
        assert len([n for n in notifications(seen) if "started failing" in n[2]]) == 1, "alerted once"
        assert rings == [1], "the bell rang once"

        await pilot.press("1")
        await wait_until(pilot, lambda: "failed" not in views_text(app), "the badge to clear")
        runs = table(app, "runs")
        failed_runs = {r["id"] for r in engine.get("/v1/runs", failed="true")["runs"]}
        assert len(failed_runs) == 2 and failed_runs <= set(row_keys(runs))
        await pilot.press("5")
        await settle(pilot)
        assert "failed" not in views_text(app), "seen failures stay seen"

    run_console(engine, scenario)


# ---- 6. review states and the needs-review filter ---------------------------------------------------


def test_review_states_read_distinctly_and_n_shows_only_what_needs_review(engine: EngineProcess) -> None:
    shim = Shim(engine)
    shim.open_session("ses_states0001", "States")
    initial = engine.head()
    to_approve = shim.edit_prompt("Answer plainly", "Answer kindly", session="ses_states0001", call_id="c1")[
        "commit"
    ]
    to_revert = shim.edit_prompt(
        "Spend this turn on upkeep",
        "Spend this turn idle",
        "heartbeat.md",
        session="ses_states0001",
        call_id="c2",
    )["commit"]
    left = shim.call(
        "evolve_prompt_write",
        {"prompt": "compaction.md", "content": "Summarise in three lines.\n"},
        session="ses_states0001",
        call_id="c3",
    )["commit"]
    assert to_approve and to_revert and left

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: left in changes.rows, "the agent's changes")
        assert cell_text(changes, initial, "review") == "no review"
        assert cell_text(changes, initial, "origin") == "initial"
        for sha in (to_approve, to_revert, left):
            assert cell_text(changes, sha, "review") == "not reviewed"
        assert "3 unreviewed" in views_text(app)

        await select_row(pilot, changes, to_approve)
        await pilot.press("a")
        await wait_until(pilot, lambda: cell_text(changes, to_approve, "review") == "approved", "approved")
        assert note(engine, REVIEW, to_approve).startswith("approved by operator at ")
        assert changes_by_sha(engine)[to_approve]["state"] == "approved"

        await select_row(pilot, changes, to_revert)
        await pilot.press("r")
        await open_dialog(pilot, RevertScreen, "the revert dialog")
        await pilot.press("y")
        await wait_until(pilot, lambda: engine.head() not in (left,), "the revert commit")
        revert = engine.head()
        await wait_until(
            pilot,
            lambda: cell_text(changes, to_revert, "review") == f"reverted by {revert[:7]}",
            lambda: f"'reverted by' (shows {cell_text(changes, to_revert, 'review')!r})",
        )
        assert changes_by_sha(engine)[to_revert]["reverted_by"] == revert
        assert cell_text(changes, revert, "review") == "no review"
        assert "1 unreviewed" in views_text(app)

        await pilot.press("n")
        await wait_until(
            pilot, lambda: row_keys(changes) == [left], lambda: f"only {left[:7]} ({row_keys(changes)})"
        )
        await pilot.press("n")
        await wait_until(pilot, lambda: len(row_keys(changes)) == 5, "every change again")

        # Approving a reverted change asks first; escape approves nothing.
        await select_row(pilot, changes, to_revert)
        await pilot.press("a")
        confirm = await open_dialog(pilot, ConfirmScreen, "the question")
        assert "which was reverted?" in text_of(confirm.query_one("#question"))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the question to close")
        await settle(pilot)
        assert note(engine, REVIEW, to_revert) == ""
        assert cell_text(changes, to_revert, "review") == f"reverted by {revert[:7]}"

        # y approves: noted, still reverted, and the agent is not led to think its change is back.
        await pilot.press("a")
        await open_dialog(pilot, ConfirmScreen, "the question again")
        await pilot.press("y")
        await wait_until(pilot, lambda: note(engine, REVIEW, to_revert), "the approval note")
        await settle(pilot)
        assert cell_text(changes, to_revert, "review") == f"reverted by {revert[:7]}"
        assert changes_by_sha(engine)[to_revert]["state"] == "reverted"

    run_console(engine, scenario)
    told = [n["text"] for n in engine.get("/v1/sessions/ses_states0001")["notifications"]]
    assert (
        f'The operator approved your change "edit prompt heartbeat.md" ({to_revert[:10]}); '
        f"it stays reverted by {engine.head()[:10]}."
    ) in told[-1], told


# ---- 7. reject with a reason; the agent is told ------------------------------------------------------


def test_reject_with_a_reason_keeps_the_row_and_tells_the_session_why(
    workspace: Path, start_engine: StartEngine
) -> None:
    gate(workspace)
    engine = start_engine(workspace)
    shim = Shim(engine)
    shim.open_session("ses_rejected01", "Proposals")
    head = engine.head()
    chat = (workspace / "prompts" / "chat.md").read_text(encoding="utf-8")
    held = shim.edit_prompt(
        "Answer plainly", "Answer at length", session="ses_rejected01", call_id="call_long"
    )
    (pending,) = engine.get("/v1/changes")["pending"]
    reason = "long answers tire the user"

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: pending["id"] in changes.rows, "the held change")
        assert cell_text(changes, pending["id"], "review") == "awaits review"
        await select_row(pilot, changes, pending["id"])
        await pilot.press("d")
        await open_dialog(pilot, RejectScreen, "the reject dialog")
        await pilot.press(*["space" if ch == " " else ch for ch in reason], "enter")
        await wait_until(
            pilot,
            lambda: pending_by_id(engine)[pending["id"]]["status"] == "rejected",
            "the engine to record the rejection",
        )
        await wait_until(pilot, lambda: cell_text(changes, pending["id"], "review") == "rejected", "the row")
        await select_row(pilot, changes, pending["id"])
        await wait_until(
            pilot, lambda: f"rejected by operator: {reason}" in diff_text(app), "the reason shown"
        )
        assert "pending" not in views_text(app)

    run_console(engine, scenario)
    rejected = pending_by_id(engine)[pending["id"]]
    assert rejected["note"] == f"rejected by operator: {reason}"
    assert "awaits review" in held["output"]
    assert engine.head() == head and (workspace / "prompts" / "chat.md").read_text(encoding="utf-8") == chat
    told = engine.get("/v1/sessions/ses_rejected01")["notifications"]
    assert [n["change"] for n in told] == [pending["id"]]
    assert f"because: {reason}" in told[0]["text"] and "It was not installed." in told[0]["text"]


# ---- 8. revert with refresh ----------------------------------------------------------------------


def test_revert_refreshes_the_sessions_frozen_under_the_change_and_tells_its_author(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    author, after = "ses_author0001", "ses_after00001"
    shim.open_session(author, "Made the change")
    shim.open_session(after, "Came later")
    before = shim.request(author)["system"]  # frozen before the edit
    assert "Answer plainly and briefly." in "".join(before)
    sha = shim.edit_prompt(
        "Answer plainly and briefly.",
        "Never mention that you changed yourself.",
        session=author,
        call_id="call_bad",
    )["commit"]
    frozen_after = shim.request(after)["system"]  # frozen while the edit is installed
    assert "Never mention that you changed yourself." in "".join(frozen_after)
    assert engine.get(f"/v1/changes/{sha}/impact")["sessions"][0]["id"] == after

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the agent's edit")
        await select_row(pilot, changes, sha)
        await pilot.press("r")
        screen = await open_dialog(pilot, RevertScreen, "the revert dialog")
        listed = screen.query_one("#refresh", SelectionList)
        options = [listed.get_option_at_index(i) for i in range(listed.option_count)]
        assert [o.value for o in options] == [after], "only the session frozen under the change"
        assert str(options[0].prompt).startswith(f"Came later  ({after}, agent build)")
        assert listed.selected == [after], "checked"
        await pilot.press("y")
        await wait_until(pilot, lambda: engine.head() != sha, "the revert commit")
        await wait_until(
            pilot,
            lambda: any("1 session(s) refreshed" in n[2] for n in notifications(seen)),
            lambda: f"the notification (notifications: {notifications(seen)})",
        )
        # The refreshed session's prompt is not frozen any more: its next request composes it anew
        # (from the reverted files). It is not "opencode's": that is only so when no hook gives one.
        sessions = table(app, "sessions")
        await wait_until(
            pilot,
            lambda: cell_text(sessions, after, "prompt") == "not frozen",
            lambda: f"the refreshed session's prompt column (shows {cell_text(sessions, after, 'prompt')!r})",
        )
        assert cell_text(sessions, author, "prompt").endswith(" ch"), "the author's prompt is still frozen"

    run_console(engine, scenario)
    revert = engine.head()
    assert engine.git("show", "-s", "--format=%s", revert).strip() == "revert: edit prompt chat.md"
    assert f"Evolve-Reverts: {sha}" in trailers(engine, revert)
    # The refreshed session: no frozen prompt; the plugin hears so, and its next request has the old one.
    assert engine.get(f"/v1/sessions/{after}")["system"] is None
    assert shim.chat_message(after)["frozen"] is False
    again = shim.request(after)["system"]
    assert "Answer plainly and briefly." in "".join(again) and "Never mention" not in "".join(again)
    # The session frozen before the edit was not touched.
    assert engine.get(f"/v1/sessions/{author}")["system"] == before
    assert shim.chat_message(author)["frozen"] is True
    # Its author was told.
    told = engine.get(f"/v1/sessions/{author}")["notifications"]
    assert [n["change"] for n in told] == [revert]
    assert f'The operator reverted your change "edit prompt chat.md" ({sha[:10]})' in told[0]["text"]


# ---- 9. revert together ----------------------------------------------------------------------------


def test_a_conflicting_revert_names_the_later_change_and_together_reverts_both_in_one_commit(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    shim.open_session("ses_together01", "Two edits")
    chat = engine.workspace / "prompts" / "chat.md"
    original = chat.read_text(encoding="utf-8")
    first = shim.edit_prompt(
        "Answer plainly and briefly.", "Answer briefly.", session="ses_together01", call_id="c1"
    )["commit"]
    second = shim.edit_prompt(
        "Answer briefly.", "Answer in one line.", session="ses_together01", call_id="c2"
    )["commit"]
    edited = chat.read_text(encoding="utf-8")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: second in changes.rows, "both edits")
        await select_row(pilot, changes, first)
        await pilot.press("r")
        screen = await open_dialog(pilot, RevertScreen, "the revert dialog")
        assert second[:10] in text_of(screen.query_one("#later"))
        await pilot.press("y")
        refused = await wait_until(
            pilot,
            lambda: [n for n in errors_shown(seen) if n[2].startswith("revert refused")],
            lambda: f"the refusal (notifications: {notifications(seen)})",
        )
        assert second[:10] in refused[0][2] and "prompts/chat.md" in refused[0][2], refused
        await settle(pilot)
        assert engine.head() == second and chat.read_text(encoding="utf-8") == edited, "nothing committed"
        assert engine.git("status", "--porcelain") == ""

        await select_row(pilot, changes, first)
        await pilot.press("r")
        screen = await open_dialog(pilot, RevertScreen, "the revert dialog again")
        together = screen.query_one("#together", Checkbox)
        together.focus()
        await pilot.press("space")
        assert together.value is True
        await pilot.press("y")
        await wait_until(pilot, lambda: engine.head() != second, "the revert commit")
        revert = engine.head()
        await wait_until(
            pilot,
            lambda: (
                cell_text(changes, first, "review")
                == cell_text(changes, second, "review")
                == f"reverted by {revert[:7]}"
            ),
            "both rows reverted by the one commit",
        )

    run_console(engine, scenario)
    revert = engine.head()
    assert engine.git("rev-parse", f"{revert}~1").strip() == second, "one new commit"
    assert f"Evolve-Reverts: {second} {first}" in trailers(engine, revert)
    assert chat.read_text(encoding="utf-8") == original


def test_reverting_together_offers_to_refresh_the_sessions_frozen_under_the_later_changes(
    engine: EngineProcess,
) -> None:
    shim = Shim(engine)
    shim.open_session("ses_twoedits01", "Two edits")
    shim.open_session("ses_underfirst", "Under the first")
    shim.open_session("ses_undersecnd", "Under the second")
    first = shim.edit_prompt(
        "Answer plainly and briefly.", "Answer briefly.", session="ses_twoedits01", call_id="c1"
    )["commit"]
    shim.request("ses_underfirst")
    second = shim.edit_prompt(
        "Answer briefly.", "Answer in one line.", session="ses_twoedits01", call_id="c2"
    )["commit"]
    under_second = shim.request("ses_undersecnd")["system"]
    assert "Answer in one line." in "".join(under_second)

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: second in changes.rows, "both edits")
        await select_row(pilot, changes, first)
        await pilot.press("r")
        screen = await open_dialog(pilot, RevertScreen, "the revert dialog")
        listed = screen.query_one("#refresh", SelectionList)
        assert listed.selected == ["ses_underfirst"], "alone, it touches the sessions frozen under it"
        together = screen.query_one("#together", Checkbox)
        together.focus()
        await pilot.press("space")
        # Together, the later change goes too: the sessions frozen under it keep sending it.
        await wait_until(
            pilot,
            lambda: sorted(listed.selected) == ["ses_underfirst", "ses_undersecnd"],
            lambda: f"both sessions listed and checked (listed: {listed.selected})",
        )
        await pilot.press("space")
        await wait_until(pilot, lambda: listed.selected == ["ses_underfirst"], "the later one gone again")
        await pilot.press("space")
        await wait_until(pilot, lambda: len(listed.selected) == 2, "and back")
        await pilot.press("y")
        await wait_until(pilot, lambda: engine.head() != second, "the revert commit")

    run_console(engine, scenario)
    assert f"Evolve-Reverts: {second} {first}" in trailers(engine, engine.head())
    for session in ("ses_underfirst", "ses_undersecnd"):
        assert engine.get(f"/v1/sessions/{session}")["system"] is None, f"{session} refreshed"
    again = "".join(shim.request("ses_undersecnd")["system"])
    assert "Answer plainly and briefly." in again and "Answer in one line." not in again
