"""The engine itself: its hooks, its configuration, its opencode connections, its warnings and its
status."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import JSONDict, Record, known_fields
from .heartbeat import HeartbeatStatus


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
    protocol: str = "opencode-evolve"  # the protocol it is treated as: opencode-evolve or hcp
    protocol_reason: str = ""  # why (docs/hooks.md, "Two protocols")
    protocol_settle: str | None = None  # when the evidence was ambiguous: the config line that settles it
    stage_warnings: list[str] = field(default_factory=list)  # problems of its declared stages


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
    command: str | None = None  # opencode's subcommand: run, serve, or None (the TUI)
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
    # Requests the API answered since the engine started, by "METHOD /route/{param}".
    requests: dict[str, int] = field(default_factory=dict)
    # Why the journal cannot write now (a full disk, an I/O error): the engine refuses the work it
    # would journal until it can (503); None when it writes.
    journal_failing: str | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> EngineStatus:
        known = known_fields(cls, data)
        known["hooks"] = [HookInfo.from_dict(h) for h in known.get("hooks") or []]
        known["skipped"] = [SkippedHook.from_dict(s) for s in known.get("skipped") or []]
        known["opencode"] = [ConnectionInfo.from_dict(c) for c in known.get("opencode") or []]
        known["heartbeat"] = HeartbeatStatus.from_dict(known.get("heartbeat") or {})
        return cls(**known)


@dataclass
class Health(Record):
    """`GET /v1/health`: that the engine answers, what it is, and its newest event's number."""

    ok: bool
    version: str
    api: int
    workspace: str
    pid: int
    seq: int = 0  # subscribe to /v1/events?since=<this> to miss nothing


@dataclass
class Ok(Record):
    """An answer that only says the request was taken."""

    ok: bool = True


@dataclass
class LoadRequest(Record):
    """`POST /v1/debug/load`: synthetic hook runs, for load tests."""

    count: int = 1
    stdout_bytes: int = 0


@dataclass
class LoadRecorded(Record):
    recorded: int
