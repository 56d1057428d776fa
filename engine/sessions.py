"""What the engine knows about each opencode session: its title, agent, model, busy state, frozen
system prompt, history and the notifications it received."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .journal import Journal
from .protocol.records import SessionInfo


@dataclass
class Session:
    id: str
    system: list[str] | None = None  # frozen system prompt, exactly as sent
    frozen_at: float | None = None
    agent: str | None = None
    model: dict[str, str] | None = None
    title: str | None = None
    busy: bool = False
    history: list[Any] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    seen_at: float = field(default_factory=time.time)

    def info(self, with_history: bool = False) -> SessionInfo:
        return SessionInfo(
            id=self.id,
            title=self.title,
            system=self.system,
            frozen_at=self.frozen_at,
            agent=self.agent,
            model=self.model,
            notifications=list(self.notifications),
            busy=self.busy,
            history_length=len(self.history),
            history=list(self.history) if with_history else None,
        )


class SessionStore:
    """In memory, with frozen prompts (and agent, model) persisted in the journal, so a restarted
    engine keeps serving each session the prompt it was frozen with."""

    def __init__(self, journal: Journal | None) -> None:
        self._journal = journal
        self._sessions: dict[str, Session] = {}
        if journal is not None:
            for row in journal.sessions(limit=10_000):
                if row.get("deleted"):
                    continue
                s = Session(id=row["id"], system=row.get("system"), frozen_at=row.get("frozen_at"))
                s.agent = row.get("agent")
                s.model = row.get("model")
                self._sessions[s.id] = s

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(session_id)
        session.seen_at = time.time()
        return session

    def find(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def known(self) -> list[Session]:
        return list(self._sessions.values())

    def frozen(self, session_id: str) -> list[str] | None:
        session = self._sessions.get(session_id)
        return session.system if session else None

    def freeze(self, session_id: str, system: list[str]) -> None:
        session = self.get(session_id)
        session.system = list(system)
        session.frozen_at = time.time()
        if self._journal is not None:
            self._journal.save_session(session_id, system=session.system, frozen_at=session.frozen_at)

    def forget(self, session_id: str | None) -> None:
        """A session opencode deleted: it receives no more notifications."""
        if session_id:
            self._sessions.pop(session_id, None)
            if self._journal is not None:
                self._journal.save_session(session_id, deleted=True)

    def history(self, session_id: str) -> list[Any]:
        session = self._sessions.get(session_id)
        return session.history if session else []

    def set_history(self, session_id: str, history: list[Any]) -> None:
        self.get(session_id).history = history

    def note(self, session_id: str, *, agent: str | None = None, model: dict[str, str] | None = None) -> None:
        session = self.get(session_id)
        changed = False
        if agent and agent != session.agent:
            session.agent, changed = agent, True
        if model and model != session.model:
            session.model, changed = model, True
        if changed and self._journal is not None:
            self._journal.save_session(session_id, agent=session.agent, model=session.model)
