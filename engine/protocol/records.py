"""Records that cross the API: each has one definition here and turns into a plain JSON-able dict
(`to_dict`) and back (`from_dict`, which ignores fields it does not know, so that an older client
can read a newer engine's records)."""

from __future__ import annotations

import copy
import marshal
import time
import uuid
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

JSONDict = dict[str, Any]
_R = TypeVar("_R")


def new_id(prefix: str) -> str:
    """A sortable, unique id: `<prefix>_<ms since epoch, hex>_<random>`."""
    return f"{prefix}_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:8]}"


def _known(cls: type[_R], data: JSONDict) -> JSONDict:
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return {k: v for k, v in data.items() if k in names}


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """What dataclasses.asdict makes of a field's value (a deep copy, dataclasses turned into
    dicts), many times faster for plain data: a record's input can hold a whole session."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict or kind is list:
        try:  # a deep copy in C for what marshal takes: dict, list, tuple, str, numbers, None
            return marshal.loads(marshal.dumps(value))
        except (ValueError, RecursionError):
            pass  # something else inside (a dataclass, ...): one level at a time
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is list:
        return [_plain(v) for v in value]
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return copy.deepcopy(value)


class Record:
    """A dataclass that converts to and from a JSON-able dict."""

    def to_dict(self) -> JSONDict:
        """A snapshot: the record's fields as plain data, deep-copied (as dataclasses.asdict)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[_R], data: JSONDict) -> _R:
        return cls(**_known(cls, data))


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


@dataclass
class ToolCall(Record):
    """One call of a tool (builtin or hook tool), as the agent or an operator made it."""

    id: str
    tool: str
    args: JSONDict
    started_at: float
    session: str | None = None
    call_id: str | None = None
    output: str | None = None
    error: str | None = None  # set when the call was refused or failed; the first line of the output
    commit: str | None = None  # sha of the commit the call produced, if any
    duration_ms: float = 0.0


@dataclass
class CommitInfo(Record):
    """A commit the engine just made."""

    sha: str
    message: str
    files: list[str] = field(default_factory=list)


@dataclass
class Change(Record):
    """A commit of the workspace's history as the operator sees it: who made it and its review."""

    sha: str
    time: int
    message: str
    subject: str
    trailers: dict[str, str]  # Evolve-* trailers, keys lower-cased without the prefix
    files: list[str]
    origin: str  # agent, operator, heartbeat, hook, external, initial, or manual
    review: str | None = None  # the review note, when the change was approved


@dataclass
class PendingChange(Record):
    """An agent's change held for review (`"review": "gate"`)."""

    id: str
    file: str  # workspace-relative, e.g. "hooks/notes.py"
    base_sha256: str  # the file's content when the change was made; approval refuses if it moved
    message: str
    tool: str | None
    session: str | None
    call_id: str | None
    hook: str | None
    created_at: float
    content: str | None = None  # the proposed content (left out of listings)
    status: str = "pending"  # pending | approved | rejected | stale
    decided_at: float | None = None
    commit: str | None = None
    note: str | None = None

    def summary(self) -> PendingChange:
        """The same change without its content (for listings and events)."""
        return PendingChange(**{**self.to_dict(), "content": None})


@dataclass
class ReviewRecorded(Record):
    sha: str
    review: str


@dataclass
class Notice(Record):
    """A warning or an error the operator should see, and where it comes from."""

    source: str
    message: str


@dataclass
class HookInfo(Record):
    """A hook as discovery registered it."""

    file: str
    name: str
    test: str | None = None
    tools: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stages: list[str] | None = None  # the stages it declared it handles; None: every stage


@dataclass
class SkippedHook(Record):
    file: str
    reason: str


@dataclass
class HooksDiscovered(Record):
    hooks: list[HookInfo]
    skipped: list[SkippedHook]

    @classmethod
    def from_dict(cls, data: JSONDict) -> HooksDiscovered:
        return cls(
            [HookInfo.from_dict(h) for h in data.get("hooks") or []],
            [SkippedHook.from_dict(s) for s in data.get("skipped") or []],
        )


@dataclass
class ConfigChanged(Record):
    config: JSONDict
    errors: list[str] = field(default_factory=list)


@dataclass
class ConnectionInfo(Record):
    """One opencode process connected through the shim."""

    id: str
    url: str
    directory: str
    mode: str = "unknown"  # in-process | server
    shim_version: str | None = None
    connected_at: float = 0.0
    last_ok: float | None = None
    last_error: str | None = None


@dataclass
class OpencodeChanged(Record):
    """An opencode process connected or went away."""

    event: str  # connected | disconnected
    connection: ConnectionInfo
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> OpencodeChanged:
        return cls(
            str(data.get("event")),
            ConnectionInfo.from_dict(data.get("connection") or {}),
            data.get("reason"),
        )


@dataclass
class NotificationSent(Record):
    source: str | None
    message: str
    recipients: list[str]


@dataclass
class ValidationRun(Record):
    hook: str
    ok: bool
    output: str


@dataclass
class ActionDone(Record):
    type: str
    session: str | None = None
    title: str | None = None


@dataclass
class Delivered(Record):
    """A notification a session received: its text, when, from which session, about which change."""

    text: str
    at: float
    source: str | None = None  # the session whose hooks asked for it
    change: str | None = None  # the commit or pending change it is about, if any


@dataclass
class SessionInfo(Record):
    """What the engine knows about one opencode session."""

    id: str
    title: str | None = None
    system: list[str] | None = None  # the frozen system prompt, exactly as sent
    frozen_at: float | None = None
    agent: str | None = None  # the agent that last answered in it
    model: dict[str, str] | None = None
    notifications: list[Delivered] = field(default_factory=list)
    busy: bool = False
    tokens: int | None = None  # input + output tokens since the last compaction, as opencode counted
    connection: str | None = None  # the opencode connection it was last seen through
    created_at: float | None = None
    updated_at: float | None = None
    history_length: int = 0
    history: list[Any] | None = None  # only in the answer about one session

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionInfo:
        known = _known(cls, data)
        known["notifications"] = [
            Delivered.from_dict(n) if isinstance(n, dict) else Delivered(str(n), 0.0)
            for n in known.get("notifications") or []
        ]
        return cls(**known)


@dataclass
class SessionChanged(Record):
    """A session appeared or changed: `change` is created, updated, frozen, notified or forgotten."""

    change: str
    session: SessionInfo

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionChanged:
        return cls(str(data.get("change")), SessionInfo.from_dict(data.get("session") or {}))


@dataclass
class TickResult(Record):
    """One heartbeat tick: what triggered it, what it did, or why it was skipped."""

    trigger: str  # timer | manual
    started_at: float
    outcome: str = "ok"  # ok | skipped | failed | cancelled
    reason: str | None = None
    session: str | None = None
    model: dict[str, str] | None = None
    cleanup: JSONDict | None = None  # {"mode", "due_to", "count", "tokens", "ok", "error", ...}
    user: str | None = None
    count: int | None = None
    tokens: int | None = None
    duration_ms: float = 0.0
    dispatch_id: str | None = None


@dataclass
class HeartbeatStatus(Record):
    """The heartbeat as it is now: its timer, its session and its cleanup thresholds."""

    enabled: bool
    interval_ms: int
    connected: bool
    paused: bool
    running: bool
    next_at: float | None
    next_in_s: float | None
    count: int
    count_threshold: int | None
    tokens: int | None
    tokens_threshold: int | None
    cleanup: str
    session: str | None
    time: str | None
    model: dict[str, str] | None
    last: TickResult | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> HeartbeatStatus:
        known = _known(cls, data)
        last = known.get("last")
        known["last"] = TickResult.from_dict(last) if isinstance(last, dict) else None
        return cls(**known)


@dataclass
class HeartbeatChanged(Record):
    """Something happened to the heartbeat: `event` is tick_started, tick, cleanup, paused or
    resumed; the status is always the one after it."""

    event: str
    status: HeartbeatStatus
    tick: TickResult | None = None
    cleanup: JSONDict | None = None
    trigger: str | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> HeartbeatChanged:
        tick = data.get("tick")
        return cls(
            str(data.get("event")),
            HeartbeatStatus.from_dict(data.get("status") or {}),
            TickResult.from_dict(tick) if isinstance(tick, dict) else None,
            data.get("cleanup"),
            data.get("trigger"),
        )


@dataclass
class EngineStatus(Record):
    """`GET /v1/status`: the engine's configuration, hooks, connections and heartbeat."""

    workspace: str
    pid: int
    config: JSONDict
    config_errors: list[str]
    config_warnings: list[str]
    hooks: list[HookInfo]
    skipped: list[SkippedHook]
    opencode: list[ConnectionInfo]
    sessions: int
    journal: dict[str, int] | None
    model: dict[str, str] | None
    busy: bool
    heartbeat: HeartbeatStatus

    @classmethod
    def from_dict(cls, data: JSONDict) -> EngineStatus:
        known = _known(cls, data)
        known["hooks"] = [HookInfo.from_dict(h) for h in known.get("hooks") or []]
        known["skipped"] = [SkippedHook.from_dict(s) for s in known.get("skipped") or []]
        known["opencode"] = [ConnectionInfo.from_dict(c) for c in known.get("opencode") or []]
        known["heartbeat"] = HeartbeatStatus.from_dict(known.get("heartbeat") or {})
        return cls(**known)
