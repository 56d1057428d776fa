"""opencode sessions as the engine knows them, and what reaches them (notifications, actions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import JSONDict, Record, known_fields


@dataclass
class NotificationSent(Record):
    source: str | None
    message: str
    recipients: list[str]


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
    tools: list[JSONDict] | None = None  # the tools offered to the model: {name, description, parameters}

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionInfo:
        known = known_fields(cls, data)
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
class SessionList(Record):
    """`GET /v1/sessions`: every session the engine knows (without histories)."""

    sessions: list[SessionInfo] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionList:
        return cls([SessionInfo.from_dict(s) for s in data.get("sessions") or []])
