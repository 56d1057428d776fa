"""The journal's sessions: what the engine knows of each opencode session (`sessions`, merged field
by field) and each session's history (`session_histories`, a table of its own: read when asked for,
never when the sessions are listed), written synchronously (rare writes).

Sessions and their histories count toward `journal_max_bytes` with a share of their own,
`SESSIONS_SHARE` of it, so that they never push out the runs: past it, the histories of the least
recently active sessions are dropped from the journal, oldest first, until the sessions are at
`SESSIONS_TRIM_TO` of their share (their other facts stay); when the facts alone are past it, the
least recently active sessions go. The history just written is never the one dropped; a single
history larger than the whole share is not kept (its session's facts are).
"""

from __future__ import annotations

import enum
import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from typing import Any, Final

from engine.core import jsontext
from engine.journal.queries import ReadConnection
from engine.journal.rows import col, encode_json
from engine.journal.schema import text_bytes

log = logging.getLogger("evolve.journal")

SESSIONS_SHARE: Final = 0.5
"""The part of `journal_max_bytes` sessions and their histories may take (the rest is the runs',
dispatches', tool calls' and events')."""
SESSIONS_TRIM_TO: Final = 0.9
"""Past their share, histories go until the sessions take this much of it."""


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET: Final = _Unset.UNSET
"""Sentinel for `save_session` arguments that were not given (as opposed to given as None)."""


class SessionTable:
    """Sessions and their histories, read and written on the readers' connection, kept within
    `budget` bytes (see the module's docstring)."""

    def __init__(self, reader: ReadConnection, budget: int) -> None:
        self._reader = reader
        self.budget = budget
        self.dropped_histories = 0  # histories dropped from the journal to keep the share, since opened
        self._facts, self._histories = self._reader.use(self._totals)
        if self._facts + self._histories > budget:
            self._reader.use(lambda conn: self._keep_share(conn, keep=None))

    @property
    def stored_bytes(self) -> int:
        """What the sessions and their histories take now, as the table counts it."""
        return self._facts + self._histories

    @staticmethod
    def _totals(conn: sqlite3.Connection) -> tuple[int, int]:
        facts = conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM sessions").fetchone()[0]
        histories = conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM session_histories").fetchone()[0]
        return int(facts), int(histories)

    def save(
        self,
        id: str,
        system: list[str] | _Unset | None,
        agent: str | _Unset | None,
        model: Any,
        frozen_at: float | _Unset | None,
        extra: dict[str, Any],
    ) -> None:
        """See `Journal.save_session`. A `history` in `extra` goes to its own table."""
        reserved = {"updated_at", "history_length"} & extra.keys()
        if reserved:
            raise ValueError(f"reserved session field(s): {sorted(reserved)}")
        extra = dict(extra)
        has_history = "history" in extra
        history = extra.pop("history", None)
        sid = col(id)
        history_text = (
            (jsontext.kept_text(history) or encode_json(list(history))) if has_history and history else None
        )
        too_large = history_text is not None and text_bytes(history_text) > self.budget
        if too_large:
            log.error(
                "journal: the history of session %s (%d bytes) is larger than the sessions' share of "
                "journal_max_bytes (%d bytes): not kept",
                id,
                text_bytes(history_text),
                self.budget,
            )
            history_text = None

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT system, frozen_at, agent, model, data, history_length, bytes"
                    " FROM sessions WHERE id = ?",
                    (sid,),
                ).fetchone()
                if row is None:
                    cur: list[Any] = [None, None, None, None, {}, 0, 0]
                else:
                    cur = [row[0], row[1], row[2], row[3], json.loads(row[4] or "{}"), row[5], row[6]]
                if not isinstance(system, _Unset):
                    cur[0] = None if system is None else encode_json(list(system))
                if not isinstance(frozen_at, _Unset):
                    cur[1] = frozen_at
                if not isinstance(agent, _Unset):
                    cur[2] = col(agent)
                if not isinstance(model, _Unset):
                    cur[3] = None if model is None else encode_json(model)
                cur[4].update(extra)
                cur[4].pop("history", None)  # an older engine's, moved out at migration
                data = encode_json(cur[4])
                facts = text_bytes(data, cur[0], cur[3])
                history_delta = 0
                if has_history:
                    old = conn.execute("SELECT bytes FROM session_histories WHERE id = ?", (sid,)).fetchone()
                    history_delta -= int(old[0]) if old else 0
                    if history_text is None:
                        conn.execute("DELETE FROM session_histories WHERE id = ?", (sid,))
                        cur[5] = 0
                    else:
                        size = text_bytes(history_text)
                        conn.execute(
                            "INSERT OR REPLACE INTO session_histories (id, bytes, length, history)"
                            " VALUES (?, ?, ?, ?)",
                            (sid, size, len(history or []), history_text),
                        )
                        history_delta += size
                        cur[5] = len(history or [])
                conn.execute(
                    "INSERT OR REPLACE INTO sessions"
                    " (id, system, frozen_at, agent, model, updated_at, data, history_length, bytes)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (sid, cur[0], cur[1], cur[2], cur[3], time.time(), data, cur[5], facts),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            self._facts += facts - int(cur[6])
            self._histories += history_delta
            if self._facts + self._histories > self.budget:
                self._keep_share(conn, keep=sid)

        self._reader.use(write)

    def _keep_share(self, conn: sqlite3.Connection, keep: str | None) -> None:
        """Drop the histories (then the sessions) of the least recently active sessions, but `keep`'s,
        until the sessions are at SESSIONS_TRIM_TO of their share."""
        self._facts, self._histories = self._totals(conn)  # exact, before deciding what goes
        target = int(self.budget * SESSIONS_TRIM_TO)
        if self._facts + self._histories <= target:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            oldest = conn.execute(
                "SELECT h.id, h.bytes FROM session_histories h JOIN sessions s ON s.id = h.id"
                " ORDER BY s.updated_at, s.id"
            ).fetchall()
            for sid, size in oldest:
                if self._facts + self._histories <= target:
                    break
                if sid == keep:
                    continue
                conn.execute("DELETE FROM session_histories WHERE id = ?", (sid,))
                conn.execute("UPDATE sessions SET history_length = 0 WHERE id = ?", (sid,))
                self._histories -= int(size)
                self.dropped_histories += 1
            if self._facts + self._histories > target:
                for sid, size in conn.execute(
                    "SELECT id, bytes FROM sessions ORDER BY updated_at, id"
                ).fetchall():
                    if self._facts + self._histories <= target:
                        break
                    if sid == keep:
                        continue
                    conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
                    conn.execute("DELETE FROM session_histories WHERE id = ?", (sid,))
                    self._facts -= int(size)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._facts, self._histories = self._totals(conn)

    def one(self, id: str) -> dict[str, Any] | None:
        """A session with its history (`[]` when none is kept)."""
        found = self._select("WHERE id = ?", [col(id)])
        if not found:
            return None
        session = found[0]
        row = self._reader.use(
            lambda conn: conn.execute(
                "SELECT history FROM session_histories WHERE id = ?", (col(id),)
            ).fetchone()
        )
        history: Any = []
        if row is not None:
            try:
                history = json.loads(row[0])
            except ValueError:
                history = []
        session["history"] = history if isinstance(history, list) else []
        return session

    def newest(self, limit: int) -> list[dict[str, Any]]:
        """Sessions, most recently updated first, without their histories (`history_length` says
        how long each is)."""
        if limit <= 0:
            return []
        return self._select("ORDER BY updated_at DESC, id DESC LIMIT ?", [limit])

    def _select(self, tail: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        sql = (
            "SELECT id, system, frozen_at, agent, model, updated_at, data, history_length"
            f" FROM sessions {tail}"
        )
        rows = self._reader.use(lambda conn: conn.execute(sql, params).fetchall())
        out: list[dict[str, Any]] = []
        for sid, system, frozen_at, agent, model, updated_at, data, history_length in rows:
            try:
                session: dict[str, Any] = json.loads(data or "{}")
                session.update(
                    id=sid,
                    system=None if system is None else json.loads(system),
                    frozen_at=frozen_at,
                    agent=agent,
                    model=None if model is None else json.loads(model),
                    updated_at=updated_at,
                    history_length=history_length,
                )
            except (ValueError, TypeError, AttributeError):
                log.error("journal: session %r cannot be read (damaged?); left out", sid)
                continue
            session.pop("history", None)
            out.append(session)
        return out
