"""The turn that made a change, on a screen of its own: what the agent said and thought before the call,
the call with its validation, the hook runs of that turn, and the session up to that point.

Enter on a hook run goes to it in view 1; `o` opens the session in view 3; escape goes back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen

from engine.protocol import HookRun, SessionInfo, StageResult, ToolCall, calls
from engine.protocol.records import Provenance
from engine.protocol.stages import ROWS

from .client import EngineClient, EngineError
from .describe import evidence_text, message_lines
from .detail import DetailPane, Part
from .format import as_json, clock_time, date_time, duration
from .help import HELP_KEY
from .keybar import KeyBar
from .model import ChangeEntry
from .table import KeyedTable

TURN_ENDS = tuple(row.stage.value for row in ROWS if row.ends_turn)  # the stages that close a turn


@dataclass
class Turn:
    change: ChangeEntry
    call: ToolCall | None
    runs: list[HookRun]  # the session's hook runs in the turn, oldest first
    session: SessionInfo | None


async def load_turn(client: EngineClient, change: ChangeEntry) -> Turn | None:
    """The turn that made `change`, from the engine: the session's tool calls, hook runs and stage
    dispatches, and the session itself (None when the engine no longer has it). None when the
    change was not made by the agent in a session."""
    session = change.session
    if not session:
        return None
    made = (await client.send(calls.tool_calls(session=session, limit=500))).tool_calls
    runs = list(reversed((await client.send(calls.runs(session=session, limit=1000))).runs))
    dispatches = (await client.send(calls.dispatches(session=session, limit=1000))).dispatches
    try:
        info: SessionInfo | None = await client.send(calls.session(session))
    except EngineError:
        info = None
    return assemble_turn(change, made, runs, dispatches, info)


def assemble_turn(
    change: ChangeEntry,
    calls: list[ToolCall],
    runs: list[HookRun],
    dispatches: list[StageResult],
    session: SessionInfo | None,
) -> Turn:
    """The turn of `change` from its session's records (`runs` oldest first): the call that made it
    (`making_call`), and the hook runs of that call's turn; without a call, of the turn around the
    time the change records."""
    call = making_call(change, calls)
    at = call.started_at if call else (change.provenance.at if change.provenance else change.time or 0.0)
    return Turn(change, call, turn_runs(runs, dispatches, call.turn if call else None, at), session)


def making_call(change: ChangeEntry, calls: list[ToolCall]) -> ToolCall | None:
    """The tool call that made `change`: the one that recorded its commit, or the one with the call
    id its provenance (else its `call` trailer) names."""
    call_id = (change.provenance.call_id if change.provenance else None) or change.trailers.get("call")
    return next(
        (c for c in calls if (change.sha and c.commit == change.sha) or (call_id and c.call_id == call_id)),
        None,
    )


def turn_runs(
    runs: list[HookRun], dispatches: list[StageResult], turn: str | None, at: float
) -> list[HookRun]:
    """The hook runs of one turn (`runs` oldest first, all of one session): those of the stage
    dispatches the engine marked with the turn's user message; for records made before turns were
    marked, those between the runs that closed the turn before `at` and after it."""
    if turn is not None:
        ids = {run for d in dispatches if d.turn == turn for run in d.runs}
        if ids:
            return [r for r in runs if r.id in ids]
    return turn_window(runs, at)


def turn_window(runs: list[HookRun], at: float) -> list[HookRun]:
    """The runs after the last run that closed a turn before `at`, up to and with the first run that
    closed one after it."""
    start = max((r.started_at for r in runs if r.stage in TURN_ENDS and r.started_at < at), default=0.0)
    end = min(
        (r.started_at for r in runs if r.stage in TURN_ENDS and r.started_at >= at), default=float("inf")
    )
    return [r for r in runs if start < r.started_at <= end]


def history_until(history: list[Any], call_id: str | None) -> list[Any]:
    """The session's messages up to (and with) the one that made the tool call `call_id`."""
    if not call_id:
        return history
    for index, entry in enumerate(history):
        for part in entry.get("parts") or []:
            if isinstance(part, dict) and part.get("callID") == call_id:
                return history[: index + 1]
    return history


class TurnScreen(ModalScreen[tuple[str, str] | None]):
    """Dismissed with ("run", run id), ("session", session id), or None (escape). Modal: the keys
    of the views behind it do not apply here."""

    TITLE = "the turn that made a change"
    HELP_NOTE = "The arrows move through the turn's hook runs; tab moves to the detail, which scrolls."
    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the change"),
        Binding("o", "open_session", "Session", tooltip="Open the session in view 3"),
        Binding("enter", "open_run", "Run", tooltip="Open the selected hook run in view 1"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)"),
        HELP_KEY,
    ]

    def __init__(self, turn: Turn, run: str | None = None) -> None:
        """`run`: the hook run selected when the screen opens (where it was left, coming back)."""
        super().__init__()
        self.turn = turn
        self.run = run
        self.left_at: str | None = None  # the hook run selected when it was left for another view

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            with Vertical(id="turn-left"):
                yield KeyedTable(
                    [
                        ("time", "time"),
                        ("stage", "stage"),
                        ("hook", "hook"),
                        ("duration", "duration"),
                        ("status", "status"),
                    ],
                    id="turn-runs",
                )
            yield DetailPane("", id="turn-detail", classes="detail")
        yield KeyBar(id="turn-keys")

    def on_mount(self) -> None:
        turn = self.turn
        self.query_one("#turn-runs", KeyedTable).replace_all(
            [
                (
                    r.id,
                    [
                        clock_time(r.started_at),
                        r.stage,
                        r.hook,
                        duration(r.duration_ms),
                        Text("failed", style="bold red") if r.error else Text("ok", style="green"),
                    ],
                )
                for r in turn.runs
            ]
        )
        self.query_one("#turn-detail", DetailPane).show(self._head(), self._parts())
        table = self.query_one("#turn-runs", KeyedTable)
        if self.run is not None and self.run in table.rows:
            table.move_cursor(row=table.get_row_index(self.run))
        table.focus()

    def _head(self) -> Text:
        change = self.turn.change
        prov: Provenance | None = change.provenance
        head = Text()
        head.append(f"the turn that made “{change.subject}”", style="bold")
        session = self.turn.session
        sid = change.session or "-"
        title = (session.title if session else None) or (prov.session_title if prov else None)
        head.append(f"\nsession {title or '(untitled)'} ({sid})")
        when = prov.at if prov and prov.at else change.time
        head.append(
            f"\nat {date_time(when)} · {len(self.turn.runs)} hook runs in that turn (left; enter opens one)"
        )
        return head

    def _parts(self) -> list[Part]:
        prov = self.turn.change.provenance
        call = self.turn.call
        parts = [
            Part(
                "said",
                "what the agent said before the call",
                prov.agent_text if prov else "",
                empty="(not recorded)",
            ),
        ]
        if prov and prov.reasoning:
            parts.append(Part("reasoning", "its reasoning", prov.reasoning))
        if call is not None:
            parts.append(Part("call", f"the call: {call.tool}", as_json(call.args)))
            parts.append(Part("result", "its result", call.output or "", empty="(none)"))
        elif prov is not None:
            parts.append(Part("call", f"the call: {prov.tool}", as_json(prov.args)))
        evidence = (call.validation if call else None) or (prov.validation if prov else None)
        if evidence is not None:
            parts.append(Part("validation", "validation", evidence_text(evidence)))
        session = self.turn.session
        if session is not None and session.history:
            shown = history_until(
                session.history, (call.call_id if call else None) or (prov.call_id if prov else None)
            )
            lines = []
            for entry in shown[-12:]:
                heading, text = message_lines(entry)
                lines.append(f"──── {heading} ────\n{text}")
            parts.append(
                Part("history", "the session up to that call (its last messages)", "\n\n".join(lines))
            )
        return parts

    def action_back(self) -> None:
        self.dismiss(None)

    def action_open_session(self) -> None:
        sid = self.turn.change.session
        if sid:
            self.left_at = self.query_one("#turn-runs", KeyedTable).selected_key()
            self.dismiss(("session", sid))
        else:
            self.notify("this change was not made in a session", severity="warning", timeout=4)

    def action_open_run(self) -> None:
        key = self.query_one("#turn-runs", KeyedTable).selected_key()
        if key:
            self.left_at = key
            self.dismiss(("run", key))

    @on(KeyedTable.RowHighlighted, "#turn-runs")
    def run_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        run = next((r for r in self.turn.runs if r.id == event.key), None)
        if run is not None:
            self.query_one("#turn-detail", DetailPane).show(
                self._head(),
                [
                    Part("run", f"hook run: {run.stage} hooks/{run.hook}", run.error or "ok"),
                    *self._parts(),
                ],
            )
