"""Hook runs and stage dispatches: what the journal keeps of each and the event stream shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import JSONDict, Record, known_fields


@dataclass
class HookRun(Record):
    """One execution of one hook script for one stage."""

    id: str
    stage: str
    hook: str  # the hook's file name relative to hooks/, e.g. "notes.py"
    started_at: float  # epoch seconds
    input: JSONDict  # exactly what was written to stdin
    session: str | None = None
    dispatch_id: str | None = None  # the stage dispatch this run belongs to, if any
    stdout_lines: list[str] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)
    stderr: str = ""
    stderr_truncated: bool = False
    result: JSONDict | None = None  # parsed and merged JSONL output, None on failure
    exit_code: int | None = None
    signal: str | None = None  # e.g. "SIGKILL" when the process died by a signal
    duration_ms: float = 0.0
    error: str | None = None  # set when the run failed; a precise, human-readable reason

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class RunStarted(Record):
    """A hook run that has begun (its record follows when it ends)."""

    id: str
    stage: str
    hook: str
    session: str | None = None


@dataclass
class StageResult(Record):
    """The merged outcome of dispatching one stage to every hook."""

    id: str
    stage: str
    started_at: float
    context: JSONDict
    session: str | None = None
    hooks: list[str] = field(default_factory=list)  # hook files that ran, in order
    runs: list[str] = field(default_factory=list)  # HookRun ids, recover runs included
    merged: JSONDict = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # hook files whose run failed
    recovered: bool = False  # whether the recover stage stepped in
    duration_ms: float = 0.0
    turn: str | None = None  # the user message whose turn this dispatch belongs to, when known
    defaults: list[str] = field(default_factory=list)  # keys the recover defaults filled from prompts/


# ---- what the API takes and answers about them ---------------------------------------------------


@dataclass
class StageRequest(Record):
    """`POST /v1/stages/{stage}`: a stage dispatched by hand."""

    context: JSONDict = field(default_factory=dict)
    session: str | None = None
    with_runs: bool = False  # answer with the record of every run (`run_records`)


@dataclass
class StageRun(StageResult):
    """A stage dispatched by hand; with `with_runs`, the records of its runs in their order."""

    run_records: list[HookRun] | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> StageRun:
        known = known_fields(cls, data)
        runs = known.get("run_records")
        known["run_records"] = (
            [HookRun.from_dict(r) for r in runs if isinstance(r, dict)] if isinstance(runs, list) else None
        )
        return cls(**known)


@dataclass
class RunList(Record):
    """`GET /v1/runs`: hook runs, newest first, and the journal's counts."""

    runs: list[HookRun] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: JSONDict) -> RunList:
        return cls([HookRun.from_dict(r) for r in data.get("runs") or []], dict(data.get("counts") or {}))


@dataclass
class DispatchList(Record):
    """`GET /v1/dispatches`: stage dispatches, newest first."""

    dispatches: list[StageResult] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> DispatchList:
        return cls([StageResult.from_dict(d) for d in data.get("dispatches") or []])
