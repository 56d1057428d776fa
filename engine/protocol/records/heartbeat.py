"""The heartbeat: its ticks and its status."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import JSONDict, Record, known_fields
from .failures import Failure


@dataclass
class TickResult(Record):
    """One heartbeat tick: what triggered it, what it did, or why it was skipped."""

    trigger: str  # timer | manual
    started_at: float
    # ok: every step ran as configured; degraded: it ran, but a hook failed at the heartbeat stage
    # (its prompt came from a fallback: `reason` says which, `failures` what failed and why);
    # skipped | failed | cancelled
    outcome: str = "ok"
    reason: str | None = None
    session: str | None = None
    model: dict[str, str] | None = None
    cleanup: JSONDict | None = None  # {"mode", "due_to", "count", "tokens", "ok", "error", ...}
    user: str | None = None
    count: int | None = None
    tokens: int | None = None
    duration_ms: float = 0.0
    dispatch_id: str | None = None
    # Where the message sent came from: hooks (the heartbeat stage's answer), recover (the recover
    # stage's hooks), prompts/recover.md (the recover defaults) or prompts/heartbeat.md (the fallback).
    prompt: str | None = None
    failures: list[Failure] = field(default_factory=list)  # the hooks that failed, each with its cause

    @classmethod
    def from_dict(cls, data: JSONDict) -> TickResult:
        known = known_fields(cls, data)
        known["failures"] = [Failure.from_dict(f) for f in known.get("failures") or [] if isinstance(f, dict)]
        return cls(**known)


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
    connected_at: float | None = None  # when the opencode it waits for connected
    # Where interval_ms comes from: config, agent (evolve_heartbeat_set), or config (disabled), which wins.
    interval_source: str = "config"
    degraded: str | None = None  # why, when the last tick was degraded (its `reason`)

    @classmethod
    def from_dict(cls, data: JSONDict) -> HeartbeatStatus:
        known = known_fields(cls, data)
        last = known.get("last")
        known["last"] = TickResult.from_dict(last) if isinstance(last, dict) else None
        return cls(**known)


@dataclass
class HeartbeatChanged(Record):
    """Something happened to the heartbeat: `event` is tick_started, tick, cleanup, paused,
    resumed, connected, disconnected, or chosen (the agent set its cadence); the status is always the
    one after it."""

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
class TickList(Record):
    """`GET /v1/heartbeat/ticks`: the last ticks, newest first, as the journal keeps them."""

    ticks: list[TickResult] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> TickList:
        return cls([TickResult.from_dict(t) for t in data.get("ticks") or [] if isinstance(t, dict)])


@dataclass
class HeartbeatFired(Record):
    """`POST /v1/heartbeat/fire`: the tick it ran, and the status after it."""

    result: TickResult
    status: HeartbeatStatus

    @classmethod
    def from_dict(cls, data: JSONDict) -> HeartbeatFired:
        return cls(
            TickResult.from_dict(data.get("result") or {}),
            HeartbeatStatus.from_dict(data.get("status") or {}),
        )
