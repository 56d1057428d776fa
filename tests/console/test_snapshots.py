"""Snapshots of the console's six views, the turn screen, the help, an alert, an attempt, who runs a
change and a change's behaviour checks, against a real engine serving fixed data.

Everything the screen shows is fixed before the engine starts: the journal (hook runs, stage
dispatches, sessions, tool calls, an attempt) is written with `engine.journal.Journal` from records
with fixed ids, times and durations; the git history is made with fixed content, author and dates
(and a fixed review note and provenance note); the heartbeat's last tick, a pending change and the
latest behaviour checks of the agent's edit are fixed files in state/. The workspace has no hooks, so the engine records nothing of its own. The console's clock is
frozen.

What still varies from run to run is normalised:
- the connection bar's engine URL (port), pid and workspace path: replaced before rendering by
  `SnapshotConsole.render_connection` (so the layout is computed on the replaced text);
- the `terminal-<number>` prefix of the SVG's CSS classes, a checksum Rich derives from the content:
  replaced by `terminal` so that a diff shows only the lines that really differ.

Expected SVGs live in tests/console/snapshots/. A missing one fails; create or update them with
`EVOLVE_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/console/test_snapshots.py`, then look at them.
"""

from __future__ import annotations

import asyncio
import calendar
import dataclasses
import difflib
import hashlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import textual.constants
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

import evolve_console.app
from engine.changes.provenance import PROVENANCE_REF, encode
from engine.journal.store import Journal
from engine.protocol.records import (
    Attempt,
    EvalRun,
    Evidence,
    HookRun,
    PendingChange,
    Provenance,
    ScenarioComparison,
    StageResult,
    ToolCall,
)
from evolve_console.agent import Agent
from evolve_console.alertscreen import AlertScreen
from evolve_console.app import EvolveConsole
from evolve_console.client import Target
from evolve_console.detail import DetailPane
from evolve_console.diffview import DiffView
from evolve_console.help import HelpScreen
from evolve_console.model import Part
from evolve_console.nextstep import Evolve
from evolve_console.reach import ReachScreen
from evolve_console.table import KeyedTable
from evolve_console.turn import TurnScreen
from tests.console.conftest import connected, make_isolated_env, row_keys, select_row, settle, wait_until
from tests.support.engine_process import EngineProcess
from tests.support.environment import run_git
from tests.support.screens import text_lines

# One worker starts the engine every snapshot reads (module-scoped) and draws them all.
pytestmark = pytest.mark.xdist_group("snapshots")

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("EVOLVE_UPDATE_SNAPSHOTS") == "1"
SIZE = (140, 40)
BASE = calendar.timegm((2025, 3, 1, 9, 0, 0))  # 2025-03-01 09:00:00 UTC
FROZEN_NOW = BASE + 3 * 3600


def at(minutes: float) -> float:
    return BASE + minutes * 60


# ---- the fixed workspace -------------------------------------------------------------------------------

CONFIG = """// The console snapshots' workspace: fixed settings.
{
  "heartbeat_cleanup": "new",
  "heartbeat_cleanup_count": 10,
  "model": "anthropic/claude-sonnet-4",
}
"""
PROMPTS = {
    "preamble.md": "You are a note-keeping assistant that improves itself over time.\n",
    "chat.md": "You are talking with the person you work for.\nAnswer plainly and briefly.\n",
    "heartbeat.md": "Heartbeat. Read your notes and tidy them.\n",
    "compaction.md": "Summarise this conversation in short bullet points.\n",
    "recover.md": "One of your hooks failed; find the cause and fix it.\n",
}
SYSTEM = [
    PROMPTS["preamble.md"] + "\n" + PROMPTS["chat.md"],
    "<notes>\n- [pin] the person prefers short answers\n- [high] release on Friday\n</notes>",
]


def commit(ws: Path, env: dict[str, str], minutes: float, message: str, trailers: dict[str, str]) -> str:
    date = f"@{int(at(minutes))} +0000"
    dated = {**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    body = message + "\n\n" + "\n".join(f"Evolve-{k}: {v}" for k, v in trailers.items())
    run_git(ws, "add", "-A", env=dated)
    run_git(ws, "commit", "-q", "--no-verify", "-m", body, env=dated)
    return run_git(ws, "rev-parse", "HEAD", env=dated).strip()


# The turn in which the agent of "Weekly plan" edited its chat prompt.
SAID = "You asked for shorter answers: I will change my chat prompt so that I answer tersely."
THOUGHT = "The prompt says 'plainly and briefly'; 'tersely' is closer to what they asked for."
EDIT_ARGS = {"prompt": "chat.md", "oldString": "plainly and briefly", "newString": "tersely"}
HISTORY = [
    {"role": "user", "parts": [{"type": "text", "text": "Keep your answers shorter from now on."}]},
    {
        "role": "assistant",
        "agent": "build",
        "parts": [
            {"type": "reasoning", "text": THOUGHT},
            {"type": "text", "text": SAID},
            {
                "type": "tool",
                "tool": "evolve_prompt_edit",
                "callID": "call_0001",
                "state": {"status": "completed", "input": EDIT_ARGS, "output": "successfully edited chat.md"},
            },
        ],
    },
    {
        "role": "assistant",
        "agent": "build",
        "parts": [{"type": "text", "text": "Done: I answer tersely now."}],
    },
    {"role": "user", "parts": [{"type": "text", "text": "(a later message, after the call)"}]},
]


def build_git_history(ws: Path, env: dict[str, str]) -> str:
    """The workspace's history; returns the sha of the agent's edit."""
    env = {
        **env,
        "GIT_AUTHOR_NAME": "evolve",
        "GIT_AUTHOR_EMAIL": "evolve@localhost",
        "GIT_COMMITTER_NAME": "evolve",
        "GIT_COMMITTER_EMAIL": "evolve@localhost",
    }
    (ws / "config").mkdir(parents=True)
    (ws / "config" / "evolve.jsonc").write_text(CONFIG, encoding="utf-8")
    (ws / "prompts").mkdir()
    for name, text in PROMPTS.items():
        (ws / "prompts" / name).write_text(text, encoding="utf-8")
    run_git(ws, "init", "-q", "-b", "main", env=env)
    (ws / ".git" / "info").mkdir(exist_ok=True)
    (ws / ".git" / "info" / "exclude").write_text("# evolve runtime state\n/state/\n", encoding="utf-8")
    commit(ws, env, 0, "initial", {"Origin": "initial"})

    chat = ws / "prompts" / "chat.md"
    chat.write_text(PROMPTS["chat.md"].replace("plainly and briefly", "tersely"), encoding="utf-8")
    edit = commit(
        ws,
        env,
        30,
        "edit prompt chat.md",
        {
            "Origin": "tool",
            "Tool": "evolve_prompt_edit",
            "Session": "ses_chat_0001",
            "Call": "call_0001",
            "File": "prompts/chat.md",
        },
    )
    (ws / "notes").mkdir()
    (ws / "notes" / "notes.json").write_text('{"notes": ["release on Friday"]}\n', encoding="utf-8")
    commit(
        ws, env, 60, "heartbeat", {"Origin": "heartbeat", "Session": "ses_heartbeat", "Stage": "heartbeat"}
    )
    heartbeat = ws / "prompts" / "heartbeat.md"
    heartbeat.write_text(PROMPTS["heartbeat.md"] + "Then stop.\n", encoding="utf-8")
    commit(ws, env, 90, "external change: prompts/heartbeat.md", {"Origin": "external"})
    chat.write_text(PROMPTS["chat.md"], encoding="utf-8")
    commit(
        ws, env, 120, "revert: edit prompt chat.md", {"Origin": "operator", "Reverts": edit, "By": "operator"}
    )
    date = f"@{int(at(45))} +0000"
    run_git(
        ws,
        "notes",
        "--ref=refs/notes/evolve-review",
        "add",
        "-m",
        "approved by operator at 2025-03-01T09:45:00Z",
        edit,
        env={**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )
    provenance = Provenance(
        tool="evolve_prompt_edit",
        args=EDIT_ARGS,
        session="ses_chat_0001",
        session_title="Weekly plan",
        call_id="call_0001",
        agent_text=SAID,
        reasoning=THOUGHT,
        at=at(11.5),
    )
    run_git(
        ws,
        "notes",
        f"--ref={PROVENANCE_REF}",
        "add",
        "-m",
        encode(provenance),
        edit,
        env={**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )
    return edit


def run(n: int, minutes: float, stage: str, hook: str, dispatch: str, **fields: Any) -> HookRun:
    fields.setdefault("exit_code", 0)
    return HookRun(
        id=f"run_{n:04d}",
        stage=stage,
        hook=hook,
        started_at=at(minutes),
        input=fields.pop("input", {"hook": stage, "session": {"id": fields.get("session")}}),
        dispatch_id=dispatch,
        **fields,
    )


def tool_calls(edit: str) -> list[ToolCall]:
    """The tool calls: one per result a call can have (ok, denied, held, failed)."""
    chat, later = "ses_chat_0001", "ses_chat_0002"
    return [
        ToolCall(
            id="tc_0001",
            tool="evolve_prompt_edit",
            args=EDIT_ARGS,
            started_at=at(11.5),
            session=chat,
            call_id="call_0001",
            output="successfully edited chat.md",
            commit=edit,
            duration_ms=212.0,
            permission="allowed by opencode",
            context={"text": SAID, "reasoning": THOUGHT},
            turn="msg_0001",
        ),
        ToolCall(
            id="tc_0002",
            tool="notes_add",
            args={"text": "call the bank", "priority": "high"},
            started_at=at(11.75),
            session=chat,
            call_id="call_0003",
            output="permission denied: The user rejected permission to use this specific tool call.",
            error="permission denied: The user rejected permission to use this specific tool call.",
            duration_ms=3.0,
            permission="denied by opencode",
            turn="msg_0001",
        ),
        ToolCall(
            id="tc_0003",
            tool="notes_list",
            args={},
            started_at=at(151.2),
            session=later,
            call_id="call_0004",
            output="1. [pin] the person prefers short answers\n2. [high] release on Friday",
            duration_ms=96.0,
            permission="not asked",
        ),
        ToolCall(
            id="tc_0004",
            tool="evolve_prompt_edit",
            args={"prompt": "preamble.md", "oldString": "over time.", "newString": "over time.\nKeep..."},
            started_at=at(152),
            session=later,
            call_id="call_0002",
            output=(
                "prompts/preamble.md: the change passed validation and awaits review by the operator "
                "(pending change chg_0001); it takes effect only once approved"
            ),
            pending="chg_0001",
            duration_ms=35.0,
            permission="allowed by opencode",
        ),
        ToolCall(
            id="tc_0005",
            tool="evolve_hook_edit",
            args={"hook": "notes.py", "oldString": '"optional": True}', "newString": '"optional": "yes"}'},
            started_at=at(153),
            session=later,
            call_id="call_0005",
            output=(
                "validation failed:\nFAIL discover: tool list parameter tag: optional must be true or false\n"
                "notes_test: 4 checks, 1 failed"
            ),
            error="validation failed:",
            duration_ms=2630.0,
            permission="allowed by opencode",
            context={"text": "The tag filter should say it is optional in words.", "reasoning": ""},
            validation=Evidence(
                test="notes_test.py",
                command="tests/notes_test.py",
                ok=False,
                exit_code=1,
                duration_ms=2512.0,
                output_tail=(
                    "FAIL discover: tool list parameter tag: optional must be true or false\n"
                    "notes_test: 4 checks, 1 failed"
                ),
                passed=3,
                failed=1,
                total=4,
            ),
        ),
    ]


def build_journal(ws: Path, edit: str) -> None:
    chat, beat = "ses_chat_0001", "ses_heartbeat"
    runs = [
        run(
            1,
            10,
            "mutate_request",
            "notes.py",
            "dsp_0001",
            session=chat,
            duration_ms=84.0,
            stdout_lines=[json.dumps({"system": SYSTEM})],
            result={"system": SYSTEM},
        ),
        run(
            2,
            10,
            "mutate_request",
            "guard.sh",
            "dsp_0001",
            session=chat,
            duration_ms=12.0,
            stdout_lines=["{}"],
            result={},
        ),
        run(
            3,
            11,
            "observe_message",
            "notes.py",
            "dsp_0002",
            session=chat,
            duration_ms=95.0,
            stdout_lines=['{"log": "3 notes, 1 pinned"}', "{}"],
            logs=["3 notes, 1 pinned"],
            result={},
        ),
        run(
            4,
            11,
            "observe_message",
            "guard.sh",
            "dsp_0002",
            session=chat,
            duration_ms=15.0,
            exit_code=2,
            stderr="guard: no rule for observe_message\n",
            error="exit 2",
        ),
        run(
            5,
            12,
            "idle",
            "notes.py",
            "dsp_0003",
            session=chat,
            duration_ms=61.0,
            stdout_lines=['{"notify": ["notes: 3 notes kept"]}'],
            result={"notify": ["notes: 3 notes kept"]},
        ),
        run(
            6,
            60,
            "heartbeat",
            "notes.py",
            "dsp_0004",
            session=beat,
            duration_ms=110.0,
            stdout_lines=['{"user": "Tidy the notes."}'],
            result={"user": "Tidy the notes."},
        ),
        run(
            7,
            60,
            "heartbeat",
            "guard.sh",
            "dsp_0004",
            session=beat,
            duration_ms=30000.0,
            exit_code=None,
            signal="SIGKILL",
            error="timed out after 30000 ms (killed)",
        ),
        run(
            8,
            150,
            "mutate_request",
            "notes.py",
            "dsp_0005",
            session="ses_chat_0002",
            duration_ms=70.0,
            exit_code=1,
            stdout_lines=["Traceback (most recent call last):"],
            stderr='Traceback (most recent call last):\n  File "notes.py", line 12\nSyntaxError\n',
            error="exit 1",
        ),
        run(
            9,
            150,
            "recover",
            "notes.py",
            "dsp_0005",
            duration_ms=40.0,
            input={"hook": "recover", "error": "exit 1", "failed_hook": "mutate_request"},
            stdout_lines=['{"user": "Fix hooks/notes.py"}'],
            result={"user": "Fix hooks/notes.py"},
        ),
        run(
            10,
            151,
            "tool_before",
            "notes.py",
            "dsp_0006",
            session="ses_chat_0002",
            duration_ms=22.0,
            stdout_lines=['{"log": {"tool": "read", "allowed": true}}', "{}"],
            logs=[{"tool": "read", "allowed": True}],
            result={},
        ),
    ]
    dispatches = [
        StageResult(
            "dsp_0001",
            "mutate_request",
            at(10),
            {"session": {"id": chat}, "system": ["opencode"]},
            chat,
            ["notes.py", "guard.sh"],
            ["run_0001", "run_0002"],
            {"system": SYSTEM},
            [],
            False,
            101.0,
            turn="msg_0001",
        ),
        StageResult(
            "dsp_0002",
            "observe_message",
            at(11),
            {"session": {"id": chat}, "answer": "Noted."},
            chat,
            ["notes.py", "guard.sh"],
            ["run_0003", "run_0004"],
            {},
            ["guard.sh"],
            False,
            113.0,
            turn="msg_0001",
        ),
        StageResult(
            "dsp_0003",
            "idle",
            at(12),
            {"session": {"id": chat}, "answer": "done"},
            chat,
            ["notes.py"],
            ["run_0005"],
            {"notify": ["notes: 3 notes kept"]},
            [],
            False,
            64.0,
            turn="msg_0001",
        ),
        StageResult(
            "dsp_0004",
            "heartbeat",
            at(60),
            {"sessions": []},
            beat,
            ["notes.py", "guard.sh"],
            ["run_0006", "run_0007"],
            {"user": "Tidy the notes."},
            ["guard.sh"],
            False,
            30120.0,
        ),
        StageResult(
            "dsp_0005",
            "mutate_request",
            at(150),
            {"session": {"id": "ses_chat_0002"}, "system": ["x"]},
            "ses_chat_0002",
            ["notes.py"],
            ["run_0008", "run_0009"],
            {"user": "Fix hooks/notes.py", "system": [PROMPTS["preamble.md"], PROMPTS["recover.md"]]},
            ["notes.py"],
            True,
            118.0,
        ),
        StageResult(
            "dsp_0006",
            "tool_before",
            at(151),
            {"session": {"id": "ses_chat_0002"}, "tool": "read"},
            "ses_chat_0002",
            ["notes.py"],
            ["run_0010"],
            {},
            [],
            False,
            25.0,
        ),
        # The heartbeat session's answer: its prompt froze while the agent's edit was installed.
        StageResult(
            "dsp_0007",
            "observe_message",
            at(61),
            {
                "session": {"id": beat},
                "answer": "Tidied the notes: 3 kept, nothing stale.",
                "calls": [{"tool": "notes_list"}],
            },
            beat,
            [],
            [],
            {},
            [],
            False,
            4.0,
        ),
    ]
    with Journal(ws / "state" / "journal.sqlite3") as journal:
        for r in runs:
            journal.record_run(r)
        for d in dispatches:
            journal.record_dispatch(d)
        for c in tool_calls(edit):
            journal.record_tool_call(c)
        journal.record_event("attempt", attempt().to_dict(), at=at(151.5))
        # The heartbeat's history: a tick skipped while the chat was busy, then the last one (state/).
        skipped = {
            "trigger": "timer",
            "started_at": at(30),
            "outcome": "skipped",
            "reason": f"other sessions active: {chat}",
        }
        journal.record_event("heartbeat", skipped, at=at(30))
        journal.record_event("heartbeat", last_tick(), at=at(60))
        journal.flush()
        model = {"providerID": "anthropic", "modelID": "claude-sonnet-4"}
        journal.save_session(
            chat,
            system=SYSTEM,
            frozen_at=at(10),
            agent="build",
            model=model,
            created_at=at(9),
            title="Weekly plan",
            history=HISTORY,
        )
        journal.save_session(
            beat,
            system=[SYSTEM[0]],
            frozen_at=at(60),
            agent="evolve",
            model=model,
            created_at=at(59),
            tokens=1240,
        )
        journal.save_session("ses_chat_0002", agent="build", model=model, created_at=at(150))


def attempt() -> Attempt:
    """The agent's hook edit its test rejected (the tool call tc_0005's)."""
    call = tool_calls("")[4]
    return Attempt(
        id="att_0001",
        file="hooks/notes.py",
        created_at=at(151.5),
        message="edit hook notes.py",
        tool="evolve_hook_edit",
        session="ses_chat_0002",
        call_id="call_0005",
        hook="notes.py",
        provenance=Provenance(
            tool="evolve_hook_edit",
            args=call.args,
            session="ses_chat_0002",
            call_id="call_0005",
            agent_text="The tag filter should say it is optional in words.",
            validation=call.validation,
            at=at(151.5),
        ),
        diff=(
            "--- a/hooks/notes.py\n+++ b/hooks/notes.py\n@@ -52,1 +52,1 @@\n"
            '-                "tag": {"type": "string", "optional": True},\n'
            '+                "tag": {"type": "string", "optional": "yes"},\n'
        ),
        output=call.validation.output_tail if call.validation else "",
    )


def checks(edit: str) -> EvalRun:
    """The agent's edit, checked: one scenario regressed."""
    forget = ScenarioComparison(
        "forget a note",
        file="evals/forget-a-note.jsonc",
        passed_before=1,
        passed_after=0,
        status="regressed",
        failed_after=[
            'calls notes_forget: no call of notes_forget (its calls: notes_add {"text": "book the dentist"})'
        ],
        answer_before="Well done: I dropped it.",
        answer_after="Well done! I keep notes permanently, though.",
        answer_diff=[
            ["=", "Well done"],
            ["-", ": I dropped it."],
            ["+", "! I keep notes permanently, though."],
        ],
        tools_before=['notes_add {"text": "book the dentist"}', 'notes_forget {"id": 1}'],
        tools_after=['notes_add {"text": "book the dentist"}'],
    )
    count = ScenarioComparison("count the notes", passed_before=1, passed_after=1, status="passing")
    return EvalRun(
        id="ev_0001",
        target=edit,
        kind="commit",
        title="edit prompt chat.md",
        files=["prompts/chat.md"],
        before="the workspace before it",
        after="the workspace at it",
        model="anthropic/claude-sonnet-4",
        state="done",
        summary='evals 2/2 → 1/2: "forget a note" fails after',
        regressed=["forget a note"],
        scenarios=[count, forget],
        started_at=at(170),
        finished_at=at(171),
        duration_ms=61000.0,
        done=4,
        total=4,
    )


def last_tick() -> dict[str, Any]:
    return {
        "trigger": "timer",
        "started_at": at(60),
        "outcome": "ok",
        "reason": None,
        "session": "ses_heartbeat",
        "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4"},
        "cleanup": None,
        "user": "Tidy the notes.",
        "count": 3,
        "tokens": None,
        "duration_ms": 8421.0,
        "dispatch_id": "dsp_0004",
    }


def build_state(ws: Path, edit: str) -> None:
    state = {
        "heartbeat_last": last_tick(),
        "heartbeat_count": 3,
        "heartbeat_session": "ses_heartbeat",
        "heartbeat_time": "2025-03-01T10:00:08.000+00:00",
        "heartbeat_paused": False,
    }
    (ws / "state" / "evolve.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    preamble = (ws / "prompts" / "preamble.md").read_bytes()
    pending = PendingChange(
        id="chg_0001",
        file="prompts/preamble.md",
        content=PROMPTS["preamble.md"] + "Keep every answer under five lines.\n",
        base_sha256=hashlib.sha256(preamble).hexdigest(),
        message="edit prompt preamble.md",
        tool="evolve_prompt_edit",
        session="ses_chat_0002",
        call_id="call_0002",
        hook=None,
        created_at=at(152),
    )
    (ws / "state" / "pending").mkdir(parents=True)
    (ws / "state" / "pending" / "chg_0001.json").write_text(json.dumps(pending.to_dict()), encoding="utf-8")
    (ws / "state" / "evals").mkdir()
    (ws / "state" / "evals" / f"{edit}.json").write_text(json.dumps(checks(edit).to_dict()), encoding="utf-8")


@pytest.fixture(scope="module")
def fixed_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineProcess]:
    """One engine for every snapshot: the views only read."""
    base = tmp_path_factory.mktemp("snapshots")
    env = make_isolated_env(base / "home")
    ws = base / "ws"
    ws.mkdir()
    edit = build_git_history(ws, env)
    (ws / "state").mkdir()
    build_journal(ws, edit)
    build_state(ws, edit)
    engine = EngineProcess(ws, env, base / "engine.log")
    engine.start()
    yield engine
    engine.stop()


# ---- the console, made deterministic --------------------------------------------------------------------

URL = re.compile(r"http://127\.0\.0\.1:\d+")
WORKSPACE = "/srv/evolve/workspace"
PID = re.compile(r"pid \d+")


class SnapshotConsole(EvolveConsole):
    """The console with a frozen clock, no animations, a fixed theme, and the connection bar's
    engine address, pid and workspace path replaced by fixed ones."""

    # Textual resolves a relative CSS_PATH beside the module of the class that sets it.
    CSS_PATH = str(Path(evolve_console.app.__file__).with_name("console.tcss"))

    def __init__(self, target: Target) -> None:
        # evolve as on a PATH (the commands the console suggests name it).
        super().__init__(target, clock=lambda: FROZEN_NOW, evolve=Evolve())
        self.animation_level = "none"
        self.theme = "textual-dark"

    async def reload(self, part: Part, draw: bool = True, agent: Agent | None = None) -> None:
        # The workspace as every view names it (the way to connect opencode names it too).
        await super().reload(part, draw, agent)
        model = (agent or self.agent).model
        if part is Part.STATUS and model.status is not None:
            model.status = dataclasses.replace(model.status, workspace=WORKSPACE)

    def render_connection(self, agent: Agent | None = None) -> None:
        model = (agent or self.agent).model
        detail, status = model.detail, model.status
        model.detail = PID.sub("pid 4242", URL.sub("http://127.0.0.1:8765", detail))
        if status is not None:
            model.status = dataclasses.replace(status, workspace=WORKSPACE)
        try:
            super().render_connection(agent)
        finally:
            model.detail, model.status = detail, status


def normalise(svg: str) -> str:
    return re.sub(r"terminal-\d+", "terminal", svg)


def detail_loaded(app: EvolveConsole, pane: str, placeholder: str) -> bool:
    widget = app.query_one(f"#{pane}")
    assert isinstance(widget, DetailPane | DiffView)
    return widget.head.plain != placeholder


Then = Callable[[EvolveConsole, Pilot[Any]], Awaitable[None]]


async def screenshot(engine: EngineProcess, key: str, then: Then | None = None) -> str:
    """Start the console, wait for every view's detail pane, show the view `key` (and do `then`
    there), and return the screenshot once two consecutive ones (a few event batches apart) are
    identical."""
    app = SnapshotConsole(engine.target)
    async with app.run_test(size=SIZE) as pilot:
        await connected(pilot)
        for head, placeholder in (
            ("run-detail", "select a run"),
            ("stage-detail", "select a stage result"),
            ("session-detail", "select a session"),
            ("change-detail", "select a change"),
        ):
            await wait_until(pilot, lambda h=head, p=placeholder: detail_loaded(app, h, p), f"#{head}")
        for widget in app.query("Input, TextArea").results():
            assert isinstance(widget, Input | TextArea)
            widget.cursor_blink = False
        # Redraw everything as a terminal resize does: a table drawn between getting its rows and
        # measuring them keeps label-wide columns (see test_table_columns_fit_rows_drawn_early).
        runs = app.query_one("#runs-table", KeyedTable)
        wide = runs.size.width
        await pilot.resize_terminal(SIZE[0] - 40, SIZE[1])
        await wait_until(pilot, lambda: runs.size.width < wide, "the runs table to narrow")
        await pilot.resize_terminal(*SIZE)
        await wait_until(pilot, lambda: runs.size.width == wide, "the runs table to widen again")
        await pilot.press(key)
        if then is not None:
            await then(app, pilot)
        return await stable_screenshot(app, pilot)


async def stable_screenshot(app: EvolveConsole, pilot: Pilot[Any], tries: int = 20) -> str:
    previous = ""
    for _ in range(tries):
        await settle(pilot)
        await pilot.pause(0.3)  # more than one 0.25 s batch of engine events
        current = normalise(app.export_screenshot())
        if current == previous:
            return current
        previous = current
    raise AssertionError("the screen never came to rest")


def assert_snapshot(name: str, svg: str, tmp_path: Path) -> None:
    expected_path = SNAPSHOTS / f"{name}.svg"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        expected_path.write_text(svg, encoding="utf-8")
        return
    if not expected_path.exists():
        pytest.fail(
            f"no snapshot {os.path.relpath(expected_path)}; create it with: EVOLVE_UPDATE_SNAPSHOTS=1 "
            ".venv/bin/pytest tests/console/test_snapshots.py (then look at the SVG before committing it)"
        )
    expected = expected_path.read_text(encoding="utf-8")
    if svg == expected:
        return
    actual_path = tmp_path / f"{name}.actual.svg"
    actual_path.write_text(svg, encoding="utf-8")
    diff = list(
        difflib.unified_diff(text_lines(expected), text_lines(svg), "expected", "actual", lineterm="", n=1)
    )
    shown = "\n".join(diff[:60]) or "(the visible text is the same: colours or layout differ)"
    pytest.fail(
        f"the {name} view differs from {expected_path.name} (actual screenshot: {actual_path}); "
        f"if the change is intended, update with EVOLVE_UPDATE_SNAPSHOTS=1.\n{shown}"
    )


@pytest.fixture(autouse=True, scope="module")
def textual_defaults() -> None:
    """Snapshots assume Textual's defaults; conftest drops TEXTUAL_* before Textual is imported,
    unless something imported it earlier."""
    changed = {
        "TEXTUAL_COLOR_SYSTEM": textual.constants.COLOR_SYSTEM != "auto",
        "TEXTUAL_DIM_FACTOR": textual.constants.DIM_FACTOR != 0.66,
        "TEXTUAL_THEME": textual.constants.DEFAULT_THEME != "textual-dark",
    }
    if any(changed.values()):
        pytest.fail(
            f"Textual settings from the environment change the snapshots: {[k for k, v in changed.items() if v]}"
        )


VIEWS = {"runs": "1", "stages": "2", "sessions": "3", "heartbeat": "4", "changes": "5", "tools": "6"}


@pytest.mark.parametrize("view", list(VIEWS))
def test_view_snapshot(view: str, fixed_engine: EngineProcess, tmp_path: Path) -> None:
    svg = asyncio.run(screenshot(fixed_engine, VIEWS[view]))
    assert "http://127.0.0.1:8765 · pid 4242" in svg.replace("&#160;", " ")
    assert_snapshot(view, svg, tmp_path)


def test_turn_screen_snapshot(fixed_engine: EngineProcess, tmp_path: Path) -> None:
    """Enter on the agent's edit of its chat prompt: the turn that made it."""

    async def open_turn(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        changes = app.query_one("#changes-table", KeyedTable)
        (edit,) = [
            k for k in row_keys(changes) if str(changes.get_cell(k, "change")) == "edit prompt chat.md"
        ]
        await select_row(pilot, changes, edit)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, TurnScreen), "the turn screen")

    svg = asyncio.run(screenshot(fixed_engine, "5", open_turn))
    text = " ".join(text_lines(svg))
    assert "the turn that made “edit prompt chat.md”" in text and "5 hook runs in that turn" in text, text
    assert_snapshot("turn", svg, tmp_path)


def test_help_screen_snapshot(fixed_engine: EngineProcess, tmp_path: Path) -> None:
    """`?` in the self-modifications view, on the held change: its keys with what each does."""

    async def open_help(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        changes = app.query_one("#changes-table", KeyedTable)
        await select_row(pilot, changes, "chg_0001")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen), "the list of keys")

    svg = asyncio.run(screenshot(fixed_engine, "5", open_help))
    text = " ".join(text_lines(svg))
    assert "Keys in view 5, Self-modifications" in text and "Approve the selected change" in text, text
    assert_snapshot("help", svg, tmp_path)


def test_changes_view_shows_the_review_column(fixed_engine: EngineProcess) -> None:
    """Approving is what the view is for: its review state must be visible at 140 columns."""
    text = " ".join(text_lines(asyncio.run(screenshot(fixed_engine, "5"))))
    # The review states are only in that column.
    assert "awaits review" in text and "no review" in text, text


async def select_edit(app: EvolveConsole, pilot: Pilot[Any]) -> str:
    """The agent's edit of its chat prompt, selected in view 5 (its detail loaded)."""
    changes = app.query_one("#changes-table", KeyedTable)
    (edit,) = [k for k in row_keys(changes) if str(changes.get_cell(k, "change")) == "edit prompt chat.md"]
    await select_row(pilot, changes, edit)
    detail = app.query_one("#change-detail", DiffView)
    await wait_until(pilot, lambda: "behaviour checks of" in detail.head.plain, "its checks in the detail")
    return edit


def test_alert_snapshot(fixed_engine: EngineProcess, tmp_path: Path) -> None:
    """N: the newest alert whole: a hook failing when the console started, with the change behind it
    and its keys."""

    async def read_alerts(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        await wait_until(pilot, lambda: app.agent.alerts.recent, "the alerts of the hooks failing")
        await pilot.press("N")
        await wait_until(pilot, lambda: isinstance(app.screen, AlertScreen), "the alerts dialog")

    svg = asyncio.run(screenshot(fixed_engine, "1", read_alerts))
    text = " ".join(" ".join(text_lines(svg)).split())  # one blank between styled pieces
    assert "a hook is failing · 12:00:00 UTC" in text and "started failing at" in text, text
    assert_snapshot("alert", svg, tmp_path)


def test_attempt_snapshot(fixed_engine: EngineProcess, tmp_path: Path) -> None:
    """An edit its test rejected: its own row, and its detail (the agent's words, the test, the diff)."""

    async def open_attempt(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        changes = app.query_one("#changes-table", KeyedTable)
        await wait_until(pilot, lambda: "att_0001" in changes.rows, "the attempt's row")
        await select_row(pilot, changes, "att_0001")
        detail = app.query_one("#change-detail", DiffView)
        await wait_until(pilot, lambda: detail.head.plain.startswith("attempt: "), "its detail")

    svg = asyncio.run(screenshot(fixed_engine, "5", open_attempt))
    text = " ".join(" ".join(text_lines(svg)).split())  # one blank between styled pieces
    assert "rejected by its test" in text and "attempt: edit hook notes.py" in text, text
    assert_snapshot("attempt", svg, tmp_path)


def test_reach_snapshot(fixed_engine: EngineProcess, tmp_path: Path) -> None:
    """u on the agent's edit: the sessions that ran it and the answers since."""

    async def open_reach(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        await select_edit(app, pilot)
        await pilot.press("u")
        await wait_until(pilot, lambda: isinstance(app.screen, ReachScreen), "who runs it")

    svg = asyncio.run(screenshot(fixed_engine, "5", open_reach))
    text = " ".join(" ".join(text_lines(svg)).split())  # one blank between styled pieces
    assert "frozen under it" in text and "Tidied the notes: 3 kept, nothing stale." in text, text
    assert_snapshot("reach", svg, tmp_path)


def test_eval_result_snapshot(fixed_engine: EngineProcess, tmp_path: Path) -> None:
    """The agent's edit at the full width: its latest behaviour checks, with the answers marked."""

    async def open_checks(app: EvolveConsole, pilot: Pilot[Any]) -> None:
        await select_edit(app, pilot)
        await pilot.press("w")

    svg = asyncio.run(screenshot(fixed_engine, "5", open_checks))
    text = " ".join(" ".join(text_lines(svg)).split())  # one blank between styled pieces
    assert "forget a note: before 1/1, after 0/1 REGRESSED" in text, text
    assert_snapshot("eval", svg, tmp_path)
