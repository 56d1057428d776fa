"""Every read of the journal: listings and single records of runs, dispatches, tool calls and
events, the calls a crash interrupted, and the totals.

Reads use their own connection (`ReadConnection`), guarded by a lock, and return the records of
the wire contract (`engine.protocol.records`), their blobs put back. A row that cannot be read is
left out and noted, so that one stored value can never make a listing fail.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from engine.journal import blobs
from engine.journal.errors import ErrorLog
from engine.journal.rows import INTENT_KEY, col
from engine.protocol.records import HookRun, JSONDict, Record, StageResult, ToolCall

_T = TypeVar("_T")
_R = TypeVar("_R", bound=Record)


class ReadConnection:
    """The readers' connection, one thread at a time; also the one sessions are written on
    (rare, synchronous writes)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._closed = False

    def use(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """`fn(connection)` under the lock; RuntimeError once the journal is closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("journal is closed")
            return fn(self._conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._conn.close()


def where(filters: Sequence[tuple[str, Any]], before: float | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) of the filters given (not None), and of `before`."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in filters:
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(col(value) if isinstance(value, str) else value)
    if before is not None:
        clauses.append("started_at < ?")
        params.append(float(before))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


class Queries:
    """The read side of the journal, on `reader`; problems are noted in `errors`."""

    def __init__(self, reader: ReadConnection, errors: ErrorLog) -> None:
        self._reader = reader
        self._errors = errors

    def _select_data(self, sql: str, params: Sequence[Any]) -> list[JSONDict]:
        """The `data` of the rows the query selects, with their blobs put back. A row that cannot
        be read (damaged by hand, written by a broken engine) is left out and noted."""

        def read(conn: sqlite3.Connection) -> tuple[list[JSONDict], dict[str, Any]]:
            conn.execute("BEGIN")  # rows and their blobs from one snapshot
            try:
                found: list[JSONDict] = []
                for (text,) in conn.execute(sql, params).fetchall():
                    try:
                        d = json.loads(text)
                    except (ValueError, RecursionError) as exc:
                        self._errors.note(f"journal row cannot be read, left out: {exc!r}")
                        continue
                    if isinstance(d, dict):
                        found.append(d)
                return found, blobs.read(conn, blobs.wanted(found), self._errors.note)
            finally:
                conn.execute("COMMIT")

        rows, stored = self._reader.use(read)
        blobs.inflate(rows, stored)
        return rows

    def _records(self, cls: type[_R], rows: list[JSONDict]) -> list[_R]:
        out: list[_R] = []
        for d in rows:
            try:
                out.append(cls.from_dict(d))
            except Exception as exc:  # a row of another shape: left out, never a failed listing
                self._errors.note(f"journal row {d.get('id')!r} is not a {cls.__name__}, left out: {exc!r}")
        return out

    def _one(self, cls: type[_R], table: str, id: str) -> _R | None:
        found = self._records(cls, self._select_data(f"SELECT data FROM {table} WHERE id = ?", [col(id)]))
        return found[0] if found else None

    def _newest(
        self, cls: type[_R], table: str, filters: Sequence[tuple[str, Any]], before: float | None, limit: int
    ) -> list[_R]:
        if limit <= 0:
            return []
        clause, params = where(filters, before)
        sql = f"SELECT data FROM {table}{clause} ORDER BY started_at DESC, id DESC LIMIT ?"
        return self._records(cls, self._select_data(sql, [*params, limit]))

    def runs(
        self,
        stage: str | None,
        hook: str | None,
        session: str | None,
        failed: bool | None,
        dispatch_id: str | None,
        before: float | None,
        limit: int,
    ) -> list[HookRun]:
        ok = None if failed is None else (0 if failed else 1)
        filters = [
            ("stage", stage),
            ("hook", hook),
            ("session", session),
            ("ok", ok),
            ("dispatch_id", dispatch_id),
        ]
        return self._newest(HookRun, "runs", filters, before, limit)

    def run(self, id: str) -> HookRun | None:
        return self._one(HookRun, "runs", id)

    def dispatches(
        self, stage: str | None, session: str | None, limit: int, before: float | None
    ) -> list[StageResult]:
        return self._newest(
            StageResult, "dispatches", [("stage", stage), ("session", session)], before, limit
        )

    def dispatch(self, id: str) -> StageResult | None:
        return self._one(StageResult, "dispatches", id)

    def tool_calls(
        self, tool: str | None, session: str | None, limit: int, before: float | None
    ) -> list[ToolCall]:
        return self._newest(ToolCall, "tool_calls", [("tool", tool), ("session", session)], before, limit)

    def tool_call(self, id: str) -> ToolCall | None:
        return self._one(ToolCall, "tool_calls", id)

    def interrupted_tool_calls(self) -> list[tuple[ToolCall, JSONDict]]:
        rows = self._select_data("SELECT data FROM tool_calls WHERE running = 1 ORDER BY started_at, id", [])
        out: list[tuple[ToolCall, JSONDict]] = []
        for d in rows:
            intent = d.pop(INTENT_KEY, None)
            for call in self._records(ToolCall, [d]):
                out.append((call, intent if isinstance(intent, dict) else {}))
        return out

    def events(self, kind: str | None, before: float | None, limit: int) -> list[JSONDict]:
        if limit <= 0:
            return []
        clause, params = where([("kind", kind)], before)
        return self._select_data(
            f"SELECT data FROM events{clause} ORDER BY started_at DESC, id DESC LIMIT ?", [*params, limit]
        )

    def counts(self) -> dict[str, int]:
        def query(conn: sqlite3.Connection) -> dict[str, int]:
            conn.execute("BEGIN")  # one snapshot for all four numbers
            try:
                row = conn.execute(
                    "SELECT (SELECT COUNT(*) FROM runs),"
                    " (SELECT COUNT(*) FROM runs WHERE ok = 0),"
                    " (SELECT COUNT(*) FROM dispatches),"
                    " (SELECT COUNT(*) FROM tool_calls)"
                ).fetchone()
            finally:
                conn.execute("COMMIT")
            return {
                "runs": int(row[0]),
                "failed_runs": int(row[1]),
                "dispatches": int(row[2]),
                "tool_calls": int(row[3]),
            }

        return self._reader.use(query)
