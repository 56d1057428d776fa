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

    def failing(self) -> list[JSONDict]:
        """The hooks whose runs at a stage have failed since they last ran fine there (or ever):
        `{hook, stage, runs, first, first_at, last, last_at, last_ok_at}` each, newest failure first."""

        def query(conn: sqlite3.Connection) -> list[JSONDict]:
            conn.execute("BEGIN")
            try:
                rows = conn.execute(
                    "WITH last_ok AS (SELECT hook, stage, MAX(started_at) AS at FROM runs WHERE ok = 1"
                    " GROUP BY hook, stage)"
                    " SELECT r.hook, r.stage, COUNT(*), MIN(r.started_at), MAX(r.started_at), l.at"
                    " FROM runs r LEFT JOIN last_ok l ON l.hook IS r.hook AND l.stage IS r.stage"
                    " WHERE r.ok = 0 AND r.started_at > COALESCE(l.at, 0) GROUP BY r.hook, r.stage"
                    " ORDER BY MAX(r.started_at) DESC"
                ).fetchall()
                found = []
                for hook, stage, count, first_at, last_at, ok_at in rows:
                    first = self._edge(conn, hook, stage, first_at, "ASC")
                    last = self._edge(conn, hook, stage, last_at, "DESC")
                    found.append(
                        {
                            "hook": hook,
                            "stage": stage,
                            "runs": int(count),
                            "first": first,
                            "first_at": float(first_at),
                            "last": last,
                            "last_at": float(last_at),
                            "last_ok_at": ok_at,
                        }
                    )
                return found
            finally:
                conn.execute("COMMIT")

        return self._reader.use(query)

    @staticmethod
    def _edge(conn: sqlite3.Connection, hook: str, stage: str, at: float, order: str) -> str | None:
        row = conn.execute(
            "SELECT id FROM runs WHERE hook IS ? AND stage IS ? AND ok = 0 AND started_at = ?"
            f" ORDER BY id {order} LIMIT 1",
            [hook, stage, at],
        ).fetchone()
        return str(row[0]) if row else None

    def streak(self, hook: str, stage: str, at: float) -> JSONDict:
        """Around a failed run of `hook` at `stage` started `at`: when it last ran fine there before
        (`last_ok_at`), the first failed run since then (`first`, `first_at`), how many failed runs
        up to `at` (`runs`), and the first run that ran fine after it (`next_ok`, `next_ok_at`)."""
        params = [col(hook), col(stage)]

        def query(conn: sqlite3.Connection) -> JSONDict:
            conn.execute("BEGIN")
            try:
                (ok_at,) = conn.execute(
                    "SELECT MAX(started_at) FROM runs WHERE hook = ? AND stage = ? AND ok = 1 AND started_at < ?",
                    [*params, at],
                ).fetchone()
                since = ok_at if ok_at is not None else 0.0
                first = conn.execute(
                    "SELECT id, started_at FROM runs WHERE hook = ? AND stage = ? AND ok = 0"
                    " AND started_at > ? AND started_at <= ? ORDER BY started_at, id LIMIT 1",
                    [*params, since, at],
                ).fetchone()
                (count,) = conn.execute(
                    "SELECT COUNT(*) FROM runs WHERE hook = ? AND stage = ? AND ok = 0"
                    " AND started_at > ? AND started_at <= ?",
                    [*params, since, at],
                ).fetchone()
                after = conn.execute(
                    "SELECT id, started_at FROM runs WHERE hook = ? AND stage = ? AND ok = 1"
                    " AND started_at > ? ORDER BY started_at, id LIMIT 1",
                    [*params, at],
                ).fetchone()
            finally:
                conn.execute("COMMIT")
            return {
                "last_ok_at": ok_at,
                "first": first[0] if first else None,
                "first_at": first[1] if first else None,
                "runs": int(count),
                "next_ok": after[0] if after else None,
                "next_ok_at": after[1] if after else None,
            }

        return self._reader.use(query)

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
