"""What the engine knows about each opencode session: its title, agent, model, busy state, token count,
frozen system prompt, history, the notifications it received and the connection it came through.

All of it is kept in the journal, so a restarted engine knows what the old one knew. Each change is
published (`session` events) at once; the journal is written shortly after, coalesced, because a
history is replaced on every LLM request and can be large. For the same reason only the histories of
the most recently active sessions (HISTORIES_KEPT) stay in memory; the others are read back from the
journal when asked for, and a starting engine reads none (its memory after a restart is what it was
before). A history leaves memory only once it is written: what is written is taken from the
sessions on the event loop, then written on a thread, and a session being written keeps its history
until the journal has it; a write the journal refuses (a full disk) is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.core import jsontext
from engine.core.strictjson import escaped
from engine.journal.store import Journal
from engine.protocol.records import Delivered, SessionChanged, SessionInfo

log = logging.getLogger("evolve.sessions")
FLUSH_DELAY_S = 0.5  # how long changes gather before they are written to the journal
RETRY_DELAY_S = 2.0  # after the journal refused a write (a full disk), before it is tried again
HISTORIES_KEPT = 64  # sessions whose history stays in memory (the most recently active)


@dataclass
class Session:
    id: str
    system: list[str] | None = None  # frozen system prompt, exactly as sent
    frozen_at: float | None = None
    agent: str | None = None
    model: dict[str, str] | None = None
    title: str | None = None
    busy: bool = False
    tokens: int | None = None
    connection: str | None = None
    # None: not in memory (it is in the journal: SessionStore.history reads it back)
    history: list[Any] | None = field(default_factory=list)
    history_length: int = 0
    history_written: bool = True  # the journal has this history (False: it must be written first)
    notifications: list[Delivered] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)

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
            tokens=self.tokens,
            connection=self.connection,
            created_at=self.created_at,
            updated_at=self.updated_at,
            history_length=self.history_length,
            history=list(self.history or []) if with_history else None,
        )

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Session:
        """A session as the journal lists it: its history is read when asked for (unless the row
        holds it)."""
        info = SessionInfo.from_dict(row)
        history = row.get("history")
        return cls(
            id=info.id,
            system=info.system,
            frozen_at=info.frozen_at,
            agent=info.agent,
            model=info.model,
            title=info.title,
            busy=info.busy,
            tokens=info.tokens,
            connection=info.connection,
            history=list(history) if isinstance(history, list) else None,
            history_length=len(history) if isinstance(history, list) else int(row.get("history_length") or 0),
            notifications=info.notifications,
            created_at=info.created_at or row.get("updated_at") or time.time(),
            updated_at=row.get("updated_at") or time.time(),
        )


class SessionStore:
    """The sessions the engine knows, by id. An id with a lone surrogate (a client's broken text) is
    kept with it written as its `\\uXXXX` escape (strictjson.escaped), so that it names the session
    in a URL, in git and in the journal alike."""

    def __init__(self, journal: Journal | None, publish: Callable[[SessionChanged], object]) -> None:
        self._journal = journal
        self._publish = publish
        self._sessions: dict[str, Session] = {}
        self._dirty: set[str] = set()
        self._writing: set[str] = set()  # taken for a write that has not finished
        self._flushing: asyncio.Task[None] | None = None
        if journal is not None:
            # Their facts, then the histories of the HISTORIES_KEPT most recently active, one at a
            # time: what the engine held before it restarted, and no more (the others are read back
            # when someone asks for them).
            for row in reversed(journal.sessions(limit=10_000)):
                if not row.get("deleted"):
                    session = Session.from_row(row)
                    self._sessions[session.id] = session
            newest = sorted(self._sessions.values(), key=lambda s: s.updated_at, reverse=True)
            for session in newest[:HISTORIES_KEPT]:
                if session.history is None and session.history_length:
                    self.history(session.id)

    # ---- reading ----------------------------------------------------------------------------

    def find(self, session_id: str) -> Session | None:
        session_id = escaped(session_id)
        return self._sessions.get(session_id)

    def known(self) -> list[Session]:
        return list(self._sessions.values())

    def frozen(self, session_id: str) -> list[str] | None:
        session_id = escaped(session_id)
        session = self._sessions.get(session_id)
        return session.system if session else None

    def history(self, session_id: str) -> list[Any]:
        session_id = escaped(session_id)
        session = self._sessions.get(session_id)
        if session is None:
            return []
        if session.history is None:  # read back from the journal, and kept while it is active
            row = self._journal.session(session_id) if self._journal is not None else None
            session.history = list((row or {}).get("history") or [])
            jsontext.keep(session.history)
            session.history_length = len(session.history)
            session.history_written = True
            self._trim_histories(keep=session_id)
        return session.history

    def info(self, session_id: str, with_history: bool = False) -> SessionInfo | None:
        session_id = escaped(session_id)
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if with_history:
            self.history(session_id)
        return session.info(with_history)

    # ---- changing ---------------------------------------------------------------------------

    def get(self, session_id: str) -> Session:
        """The session, created (and announced) if the engine did not know it."""
        session_id = escaped(session_id)
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(session_id)
            self._changed(session, "created")
        return session

    def update(self, session_id: str, **fields: Any) -> Session:
        """Set the given fields (title, busy, agent, model, tokens, connection); announced and
        persisted only when one of them really changed."""
        session_id = escaped(session_id)
        session = self.get(session_id)
        changed = False
        for name, value in fields.items():
            if getattr(session, name) != value:
                setattr(session, name, value)
                changed = True
        if changed:
            self._changed(session, "updated")
        return session

    def freeze(self, session_id: str, system: list[str]) -> None:
        session_id = escaped(session_id)
        session = self.get(session_id)
        session.system = list(system)
        session.frozen_at = time.time()
        self._changed(session, "frozen")

    def unfreeze(self, session_id: str) -> bool:
        """Drop the session's frozen prompt: its next request composes one anew. False when it had none."""
        session_id = escaped(session_id)
        session = self._sessions.get(session_id)
        if session is None or session.system is None:
            return False
        session.system, session.frozen_at = None, None
        self._changed(session, "unfrozen")
        return True

    def notified(self, session_id: str, delivered: Delivered) -> None:
        session_id = escaped(session_id)
        session = self.get(session_id)
        session.notifications.append(delivered)
        self._changed(session, "notified")

    def set_history(self, session_id: str, history: list[Any]) -> None:
        session_id = escaped(session_id)
        session = self.get(session_id)
        old = session.history
        if old is not None:
            # The messages it had keep their objects (opencode sends the whole history every time),
            # whose JSON text is kept: only the new ones are encoded (jsontext).
            history = [o if i < len(old) and (o := old[i]) == h else h for i, h in enumerate(history)]
            if len(history) == len(old) and all(a is b for a, b in zip(history, old, strict=True)):
                return  # unchanged: every message equal to the one it had
        session.history = history
        jsontext.keep(history)  # replaced, never changed in place: its text is encoded once
        session.history_length = len(history)
        session.history_written = False
        session.updated_at = time.time()
        self._mark(session)  # persisted, not announced: the history is fetched when looked at
        self._trim_histories(keep=session_id)

    def _trim_histories(self, keep: str | None = None) -> None:
        """Drop from memory the histories of all but the HISTORIES_KEPT most recently active sessions
        (they are in the journal). A history not written yet, or being written, stays."""
        if self._journal is None:
            return
        held = [s for s in self._sessions.values() if s.history is not None]
        if len(held) <= HISTORIES_KEPT:
            return
        held.sort(key=lambda s: s.updated_at, reverse=True)
        for session in held[HISTORIES_KEPT:]:
            if session.id != keep and session.history_written and session.id not in self._writing:
                session.history = None

    def forget(self, session_id: str | None) -> None:
        """A session opencode deleted: it receives no more notifications."""
        if not session_id:
            return
        session_id = escaped(session_id)
        session = self._sessions.pop(session_id, None)
        self._dirty.discard(session_id)
        if self._journal is not None:
            try:
                self._journal.save_session(session_id, deleted=True)
            except Exception:  # the journal refuses writes (a full disk): it is forgotten here
                log.exception("cannot record that session %s was deleted", session_id)
        if session is not None:
            self._publish(SessionChanged("forgotten", session.info()))

    # ---- persistence ------------------------------------------------------------------------

    def _changed(self, session: Session, change: str) -> None:
        session.updated_at = time.time()
        self._mark(session)
        self._publish(SessionChanged(change, session.info()))

    def _mark(self, session: Session) -> None:
        if self._journal is None:
            return
        self._dirty.add(session.id)
        self._schedule(FLUSH_DELAY_S)

    def _schedule(self, delay: float) -> None:
        if self._flushing is None or self._flushing.done():
            with contextlib.suppress(RuntimeError):  # no event loop: flushed by close()
                self._flushing = asyncio.get_running_loop().create_task(self._flush_later(delay))

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        taken = self._take()
        failed = {session.id for session, _ in taken}  # until the write says otherwise
        try:
            failed = await asyncio.to_thread(self._write, taken)
        finally:
            self._written(taken, failed)  # cancelled (the engine closing): close() writes them
        if failed:
            self._flushing = None
            self._schedule(RETRY_DELAY_S)

    def _take(self) -> list[tuple[Session, dict[str, Any]]]:
        """What the changed sessions are now, on the event loop (a session is changed only there),
        for a write on another thread: each session's fields, and its history when the journal
        does not have it yet."""
        dirty, self._dirty = self._dirty, set()
        taken: list[tuple[Session, dict[str, Any]]] = []
        for session_id in dirty:
            session = self._sessions.get(session_id)
            if session is None:
                continue
            self._writing.add(session_id)
            fields: dict[str, Any] = {
                "system": session.system,
                "frozen_at": session.frozen_at,
                "agent": session.agent,
                "model": session.model,
                "title": session.title,
                "busy": session.busy,
                "tokens": session.tokens,
                "connection": session.connection,
                "created_at": session.created_at,
                "notifications": [n.to_dict() for n in session.notifications],
            }
            if session.history is not None and not session.history_written:
                fields["history"] = session.history  # never changed in place (set_history replaces it)
                session.history_written = True  # unless the write fails (_written)
            taken.append((session, fields))
        return taken

    def _write(self, taken: list[tuple[Session, dict[str, Any]]]) -> set[str]:
        """Write what `_take` took; the ids of the sessions the journal refused."""
        failed: set[str] = set()
        assert self._journal is not None
        for session, fields in taken:
            try:
                self._journal.save_session(session.id, **fields)
            except Exception:  # the journal must not take the engine down; tried again
                if not failed:
                    log.exception("cannot save session %s (tried again in %g s)", session.id, RETRY_DELAY_S)
                failed.add(session.id)
        return failed

    def _written(self, taken: list[tuple[Session, dict[str, Any]]], failed: set[str]) -> None:
        """After a write: the sessions refused are changed still (their history not written); the
        others' histories may leave memory now."""
        for session, fields in taken:
            self._writing.discard(session.id)
            if session.id in failed:
                self._dirty.add(session.id)
                if "history" in fields and session.history is not None:
                    session.history_written = False
        if taken and not failed:
            self._trim_histories()

    def flush(self) -> None:
        """Write every changed session to the journal now (on the event loop's thread, or with no
        loop running)."""
        if self._journal is None:
            return
        taken = self._take()
        self._written(taken, self._write(taken))

    async def close(self) -> None:
        if self._flushing is not None:
            self._flushing.cancel()
            await asyncio.gather(self._flushing, return_exceptions=True)
        self.flush()
