"""The journal's sessions table: what the engine knows of each opencode session, written
synchronously (rare writes) and merged field by field."""

from __future__ import annotations

import enum
import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any, Final

from engine.journal.queries import ReadConnection
from engine.journal.rows import col, encode_json


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET: Final = _Unset.UNSET
"""Sentinel for `save_session` arguments that were not given (as opposed to given as None)."""


class SessionTable:
    """Sessions, read and written on the readers' connection."""

    def __init__(self, reader: ReadConnection) -> None:
        self._reader = reader

    def save(
        self,
        id: str,
        system: list[str] | _Unset | None,
        agent: str | _Unset | None,
        model: Any,
        frozen_at: float | _Unset | None,
        extra: dict[str, Any],
    ) -> None:
        """See `Journal.save_session`."""
        reserved = {"updated_at"} & extra.keys()
        if reserved:
            raise ValueError(f"reserved session field(s): {sorted(reserved)}")
        sid = col(id)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT system, frozen_at, agent, model, data FROM sessions WHERE id = ?",
                    (sid,),
                ).fetchone()
                if row is None:
                    cur: list[Any] = [None, None, None, None, {}]
                else:
                    cur = [row[0], row[1], row[2], row[3], json.loads(row[4] or "{}")]
                if not isinstance(system, _Unset):
                    cur[0] = None if system is None else encode_json(list(system))
                if not isinstance(frozen_at, _Unset):
                    cur[1] = frozen_at
                if not isinstance(agent, _Unset):
                    cur[2] = col(agent)
                if not isinstance(model, _Unset):
                    cur[3] = None if model is None else encode_json(model)
                cur[4].update(extra)
                conn.execute(
                    "INSERT OR REPLACE INTO sessions"
                    " (id, system, frozen_at, agent, model, updated_at, data)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        sid,
                        cur[0],
                        cur[1],
                        cur[2],
                        cur[3],
                        time.time(),
                        encode_json(cur[4]),
                    ),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        self._reader.use(write)

    def one(self, id: str) -> dict[str, Any] | None:
        found = self._select("WHERE id = ?", [col(id)])
        return found[0] if found else None

    def newest(self, limit: int) -> list[dict[str, Any]]:
        if limit <= 0:
            return []
        return self._select("ORDER BY updated_at DESC, id DESC LIMIT ?", [limit])

    def _select(self, tail: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        sql = f"SELECT id, system, frozen_at, agent, model, updated_at, data FROM sessions {tail}"
        rows = self._reader.use(lambda conn: conn.execute(sql, params).fetchall())
        out: list[dict[str, Any]] = []
        for sid, system, frozen_at, agent, model, updated_at, data in rows:
            session: dict[str, Any] = json.loads(data or "{}")
            session.update(
                id=sid,
                system=None if system is None else json.loads(system),
                frozen_at=frozen_at,
                agent=agent,
                model=None if model is None else json.loads(model),
                updated_at=updated_at,
            )
            out.append(session)
        return out
