"""The event stream (`GET /v1/events`, Server-Sent Events): every kind of event and its payload.

Each SSE message is one `Event` as JSON: `{"kind", "data", "seq", "at"}`. `seq` numbers the events of
one engine process from 1; a client that reconnects asks for `?since=<last seq>` and gets what it
missed (as far as the engine still holds it). `data` is the `to_dict()` of the kind's payload type
(`PAYLOADS`); `Event.payload()` turns it back into that type.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Final

from .records import (
    ActionDone,
    Attempt,
    CommitInfo,
    ConfigChanged,
    EvalProgress,
    EvalRun,
    Failure,
    HeartbeatChanged,
    HookRun,
    HooksDiscovered,
    JSONDict,
    Notice,
    NotificationSent,
    OpencodeChanged,
    PendingChange,
    Record,
    ReplayProgress,
    ReplayResult,
    ReviewRecorded,
    RunStarted,
    SessionChanged,
    StageResult,
    ToolCall,
    ValidationRun,
)


class EventKind(StrEnum):
    HOOK_RUN_STARTED = "hook_run_started"
    HOOK_RUN = "hook_run"  # with ?brief=1, only api.BRIEF_RUN_FIELDS of the run
    STAGE = "stage"
    TOOL_CALL = "tool_call"  # a call began
    TOOL_RESULT = "tool_result"  # it ended
    COMMIT = "commit"
    REVIEW = "review"
    PENDING = "pending"  # a change held for review was created or decided
    VALIDATION = "validation"  # a hook edit failed its test
    ATTEMPT = "attempt"  # a change the agent tried was not installed (its test rejected it)
    HOOKS_DISCOVERED = "hooks_discovered"
    CONFIG = "config"
    SESSION = "session"  # a session appeared or changed (title, busy, tokens, frozen prompt, ...)
    NOTIFICATION = "notification"
    OPENCODE = "opencode"
    ACTION = "action"
    HEARTBEAT = "heartbeat"
    REPLAY_PROGRESS = "replay_progress"  # a replay started or went on
    REPLAY = "replay"  # a replay ended (done, cancelled or failed); its summary, without comparisons
    FAILURE = "failure"  # a hook started failing at a stage (with its cause), failed again, or cleared
    EVAL_PROGRESS = "eval_progress"  # behaviour checks started or went on
    EVAL = "eval"  # behaviour checks ended (done, cancelled or failed); without each scenario's runs
    WARNING = "warning"
    ERROR = "error"


PAYLOADS: Final[dict[EventKind, type[Record]]] = {
    EventKind.HOOK_RUN_STARTED: RunStarted,
    EventKind.HOOK_RUN: HookRun,
    EventKind.STAGE: StageResult,
    EventKind.TOOL_CALL: ToolCall,
    EventKind.TOOL_RESULT: ToolCall,
    EventKind.COMMIT: CommitInfo,
    EventKind.REVIEW: ReviewRecorded,
    EventKind.PENDING: PendingChange,
    EventKind.VALIDATION: ValidationRun,
    EventKind.ATTEMPT: Attempt,
    EventKind.HOOKS_DISCOVERED: HooksDiscovered,
    EventKind.CONFIG: ConfigChanged,
    EventKind.SESSION: SessionChanged,
    EventKind.NOTIFICATION: NotificationSent,
    EventKind.OPENCODE: OpencodeChanged,
    EventKind.ACTION: ActionDone,
    EventKind.HEARTBEAT: HeartbeatChanged,
    EventKind.REPLAY_PROGRESS: ReplayProgress,
    EventKind.REPLAY: ReplayResult,
    EventKind.FAILURE: Failure,
    EventKind.EVAL_PROGRESS: EvalProgress,
    EventKind.EVAL: EvalRun,
    EventKind.WARNING: Notice,
    EventKind.ERROR: Notice,
}
"""The payload type of each kind of event."""


def _unique_kinds() -> dict[type[Record], EventKind]:
    kinds: dict[type[Record], list[EventKind]] = {}
    for kind, payload in PAYLOADS.items():
        kinds.setdefault(payload, []).append(kind)
    return {payload: found[0] for payload, found in kinds.items() if len(found) == 1}


_KIND_OF: Final = _unique_kinds()


def kind_of(record: Record) -> EventKind:
    """The event kind a payload is published as, where its type says it (records used by two kinds,
    such as ToolCall or Notice, need the kind given explicitly)."""
    kind = _KIND_OF.get(type(record))
    if kind is None:
        raise ValueError(f"{type(record).__name__} is not the payload of exactly one event kind; name it")
    return kind


@dataclass
class Event:
    """Something the engine did, as published on its bus and its event stream."""

    kind: str  # an EventKind value; a newer engine may send kinds this client does not know
    data: JSONDict
    seq: int = 0
    at: float = field(default_factory=time.time)

    def to_dict(self) -> JSONDict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JSONDict) -> Event:
        payload = data.get("data")
        return cls(
            str(data.get("kind") or ""),
            payload if isinstance(payload, dict) else {},
            int(data.get("seq") or 0),
            float(data.get("at") or 0.0),
        )

    @property
    def known_kind(self) -> EventKind | None:
        try:
            return EventKind(self.kind)
        except ValueError:
            return None

    def payload(self) -> Any:
        """`data` as its kind's payload type (a brief hook run fills the fields it has)."""
        kind = self.known_kind
        if kind is None:
            raise ValueError(f"unknown event kind {self.kind!r}")
        if kind is EventKind.HOOK_RUN:
            return HookRun.from_dict({"input": {}, **self.data})
        return PAYLOADS[kind].from_dict(self.data)
