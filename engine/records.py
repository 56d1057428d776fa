"""Records that cross module and process boundaries: hook runs, stage dispatches, tool calls.

Each has one definition here and converts to and from plain JSON-able dicts, so the journal,
the event stream and (later) the HTTP API and the console all speak the same shapes.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

JSONDict = dict[str, Any]


def new_id(prefix: str) -> str:
    """A sortable, unique id: `<prefix>_<ms since epoch, hex>_<random>`."""
    return f"{prefix}_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:8]}"


@dataclass
class HookRun:
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

    def to_dict(self) -> JSONDict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> HookRun:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class StageResult:
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

    def to_dict(self) -> JSONDict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> StageResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class ToolCall:
    """One call of a tool (builtin or hook tool), as the agent or an operator made it."""

    id: str
    tool: str
    args: JSONDict
    started_at: float
    session: str | None = None
    call_id: str | None = None
    output: str | None = None
    error: str | None = None  # set when the call was refused or failed before producing output
    commit: str | None = None  # sha of the commit the call produced, if any
    duration_ms: float = 0.0

    def to_dict(self) -> JSONDict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> ToolCall:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class Event:
    """Something the engine did, published to in-process subscribers (and later over SSE).

    `kind` is one of: hook_run_started, hook_run, stage, tool_call, tool_result, commit,
    hooks_discovered, config, error, warning.
    """

    kind: str
    data: JSONDict
    seq: int = 0
    at: float = field(default_factory=time.time)

    def to_dict(self) -> JSONDict:
        return asdict(self)
