"""The parts of the console's state: what is drawn, and fetched from the engine, as one (`Part`),
the call that fetches each (`query`) and what the engine answers (`Reloaded`), and what applying a
batch of events changed (`Update`). Plain data, no Textual, no Rich (`model.py` applies them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from engine.protocol import (
    BRIEF_RUN_FIELDS,
    EngineStatus,
    HeartbeatStatus,
    HookRun,
    StageResult,
    ToolCall,
    calls,
)
from engine.protocol.calls import Call
from engine.protocol.records import (
    ChangeList,
    DispatchList,
    EvalProgress,
    EvalRun,
    FailureList,
    JSONDict,
    Notice,
    ReplayProgress,
    ReplayResult,
    RunList,
    SessionList,
    TickList,
    ToolCallList,
)

from .alerts import Alert
from .entries import RunFilter

HISTORY_LIMIT: Final = 500  # records each table is filled with from the journal (or git)
MAX_ROWS: Final = 1000  # rows a live table keeps (the journal keeps everything)
TICKS_KEPT: Final = 20  # the heartbeat's last ticks, as its history shows them


class Part(StrEnum):
    """A piece of the console's state that is drawn, and fetched from the engine, as one."""

    RUNS = "runs"  # the hook runs shown and the journal's counts
    STAGES = "stages"  # the stage dispatches shown
    SESSIONS = "sessions"
    HEARTBEAT = "heartbeat"
    CHANGES = "changes"  # the git history and the pending changes
    STATUS = "status"  # the engine's status: opencode connections, config errors, workspace
    COUNTS = "counts"  # the journal's counts alone
    TOOLS = "tools"  # the tool calls shown
    FAILURES = "failures"  # the hooks failing now, each with the change most likely behind it
    TICKS = "ticks"  # the heartbeat's last ticks


# Each part as the operator is told of it ("could not load the hook runs").
PART_NAMES: Final = {
    Part.RUNS: "the hook runs",
    Part.STAGES: "the stage results",
    Part.SESSIONS: "the sessions",
    Part.HEARTBEAT: "the heartbeat's state",
    Part.CHANGES: "the changes",
    Part.STATUS: "the engine's status",
    Part.COUNTS: "the journal's counts",
    Part.TOOLS: "the tool calls",
    Part.FAILURES: "the hooks failing now",
    Part.TICKS: "the heartbeat's last ticks",
}

# What the engine answers for a part (`ConsoleModel.query`): the records of the routes that fetch them.
Reloaded = (
    RunList
    | DispatchList
    | SessionList
    | HeartbeatStatus
    | ChangeList
    | EngineStatus
    | ToolCallList
    | FailureList
    | TickList
)


def brief_run(data: JSONDict) -> HookRun:
    """A hook run as a list shows it: the brief fields only (details are fetched when selected)."""
    return HookRun.from_dict({"input": {}, **{k: data[k] for k in BRIEF_RUN_FIELDS if k in data}})


def brief(run: HookRun) -> HookRun:
    """A listed run cut to the brief fields, as a table keeps it (its details are fetched when
    selected: 500 runs with their inputs and outputs would hold whole sessions)."""
    return HookRun(**{k: getattr(run, k) for k in BRIEF_RUN_FIELDS}, input={})


@dataclass
class Update:
    """What applying a batch of events changed, for the app to draw or fetch."""

    runs: list[HookRun] = field(default_factory=list)  # rows to add or update, oldest first
    stages: list[StageResult] = field(default_factory=list)  # likewise
    redraw: set[Part] = field(default_factory=set)  # parts changed in the model
    reload: set[Part] = field(default_factory=set)  # parts the events only announce: fetch them
    notices: list[tuple[str, Notice]] = field(default_factory=list)  # ("warning" | "error", notice)
    alerts: list[Alert] = field(default_factory=list)  # what should catch the operator's eye now
    tools: list[ToolCall] = field(default_factory=list)  # tool calls to add or update, oldest first
    replays: list[ReplayProgress | ReplayResult] = field(default_factory=list)  # progress, then ends
    evals: list[EvalProgress | EvalRun] = field(default_factory=list)  # behaviour checks: likewise
    decided: set[str] = field(default_factory=set)  # held changes decided or gone stale


def query(part: Part, run_filter: RunFilter) -> Call[Any]:
    """The call that fetches `part` (the runs the filter lets through); its answer goes to
    `ConsoleModel.apply_reload`."""
    if part is Part.RUNS:
        return calls.runs(**run_filter.params(), limit=HISTORY_LIMIT)
    if part is Part.COUNTS:
        return calls.runs(limit=0)
    if part is Part.STAGES:
        return calls.dispatches(limit=HISTORY_LIMIT)
    if part is Part.CHANGES:
        return calls.changes(limit=HISTORY_LIMIT)
    if part is Part.TOOLS:
        return calls.tool_calls(limit=HISTORY_LIMIT)
    if part is Part.SESSIONS:
        return calls.sessions()
    if part is Part.HEARTBEAT:
        return calls.heartbeat()
    if part is Part.FAILURES:
        return calls.failures()
    if part is Part.TICKS:
        return calls.heartbeat_ticks(limit=TICKS_KEPT)
    return calls.status()


def trim(rows: dict[str, Any]) -> None:
    """Drop the oldest rows beyond MAX_ROWS (as the tables do)."""
    for key in list(rows)[: max(len(rows) - MAX_ROWS, 0)]:
        del rows[key]
