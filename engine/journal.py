"""The journal: a durable SQLite record of hook runs, stage dispatches, tool calls and sessions.

Writes of runs, dispatches and tool calls are cheap for the (async) caller: the record is
snapshotted with `to_dict()` and handed to a background writer thread, which JSON-encodes it
and commits in batches (up to `BATCH_MAX_ROWS` rows, or whatever arrived within
`BATCH_INTERVAL_S` of the first row, in one transaction). `flush()` waits until everything
enqueued before it is committed. Reads use their own connection, guarded by a lock, and return
the records of the wire contract (`engine.protocol.records`).

Every table keeps the full record as JSON in `data`; the other columns are copies of a few
fields, there for filtering, ordering and counting. Records are upserted by id, since a run is
recorded when it starts and again when it ends. Retention is bounded: runs, dispatches and tool
calls are each trimmed to the newest `max_runs` rows (ordered by `started_at`, then `id`).

Sessions (rare writes) are written synchronously.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Self, TypeVar

from .protocol.records import HookRun, JSONDict, StageResult, ToolCall, new_id

log = logging.getLogger("evolve.journal")

SCHEMA_VERSION: Final = 2
BATCH_MAX_ROWS: Final = 500
BATCH_INTERVAL_S: Final = 0.05
BUSY_TIMEOUT_MS: Final = 5000
WAL_SIZE_LIMIT: Final = 64 * 1024 * 1024

_SCHEMA_V1: Final = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    stage TEXT,
    hook TEXT,
    session TEXT,
    dispatch_id TEXT,
    ok INTEGER NOT NULL,
    error TEXT,
    exit_code INTEGER,
    signal TEXT,
    duration_ms REAL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at, id);
CREATE INDEX IF NOT EXISTS runs_stage ON runs (stage, started_at);
CREATE INDEX IF NOT EXISTS runs_hook ON runs (hook, started_at);
CREATE INDEX IF NOT EXISTS runs_session ON runs (session, started_at);
CREATE INDEX IF NOT EXISTS runs_dispatch ON runs (dispatch_id, started_at);
CREATE INDEX IF NOT EXISTS runs_ok ON runs (ok, started_at);

CREATE TABLE IF NOT EXISTS dispatches (
    id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    stage TEXT,
    session TEXT,
    recovered INTEGER NOT NULL,
    failed_count INTEGER NOT NULL,
    duration_ms REAL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS dispatches_started ON dispatches (started_at, id);
CREATE INDEX IF NOT EXISTS dispatches_stage ON dispatches (stage, started_at);
CREATE INDEX IF NOT EXISTS dispatches_session ON dispatches (session, started_at);

CREATE TABLE IF NOT EXISTS tool_calls (
    id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    tool TEXT,
    session TEXT,
    call_id TEXT,
    ok INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tool_calls_started ON tool_calls (started_at, id);
CREATE INDEX IF NOT EXISTS tool_calls_tool ON tool_calls (tool, started_at);
CREATE INDEX IF NOT EXISTS tool_calls_session ON tool_calls (session, started_at);

CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    system TEXT,
    frozen_at REAL,
    agent TEXT,
    model TEXT,
    updated_at REAL NOT NULL,
    data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS sessions_updated ON sessions (updated_at, id);
"""

# Version 2: engine events worth keeping beyond the live stream (heartbeat ticks, skips, cleanups).
_SCHEMA_V2: Final = """
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_started ON events (started_at, id);
CREATE INDEX IF NOT EXISTS events_kind ON events (kind, started_at);
"""

# Schema migrations: `_MIGRATIONS[v]` takes a database at user_version v to v + 1.
_MIGRATIONS: Final[dict[int, str]] = {0: _SCHEMA_V1, 1: _SCHEMA_V2}

_RUN_COLUMNS: Final = (
    "id, started_at, stage, hook, session, dispatch_id, ok, error, exit_code, signal, duration_ms, data"
)
_DISPATCH_COLUMNS: Final = "id, started_at, stage, session, recovered, failed_count, duration_ms, data"
_TOOL_COLUMNS: Final = "id, started_at, tool, session, call_id, ok, data"

# The three bounded, batch-written tables: name -> INSERT statement.
_INSERTS: Final[dict[str, str]] = {
    "runs": f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * 12)})",
    "dispatches": (f"INSERT OR REPLACE INTO dispatches ({_DISPATCH_COLUMNS}) VALUES ({', '.join('?' * 8)})"),
    "tool_calls": (f"INSERT OR REPLACE INTO tool_calls ({_TOOL_COLUMNS}) VALUES ({', '.join('?' * 7)})"),
    "events": "INSERT OR REPLACE INTO events (id, started_at, kind, data) VALUES (?, ?, ?, ?)",
}

Row = tuple[Any, ...]
_T = TypeVar("_T")


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET: Final = _Unset.UNSET
"""Sentinel for `save_session` arguments that were not given (as opposed to given as None)."""


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class _Stop:
    __slots__ = ()


_STOP: Final = _Stop()
_QueueItem = tuple[str, JSONDict] | _Flush | _Stop


# --- encoding -------------------------------------------------------------------------------


def _json_default(obj: object) -> Any:
    """Last resort for values json can't encode (sets, bytes, paths...): keep something useful."""
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    return str(obj)


def encode_json(value: Any) -> str:
    """JSON text that is guaranteed to encode to UTF-8.

    Non-ASCII is kept as is (compact for large text), except when the value holds lone
    surrogates (e.g. from decoding with surrogateescape): then everything is \\u-escaped, which
    json.loads turns back into the very same string.
    """
    text = json.dumps(value, ensure_ascii=False, default=_json_default)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, ensure_ascii=True, default=_json_default)
    return text


def _col(value: str | None) -> str | None:
    """A string fit for a TEXT column (lone surrogates backslash-escaped); used for filter
    columns and for filter parameters alike, so the two always compare equal."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return value


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def _run_row(d: JSONDict) -> Row:
    return (
        _col(d["id"]),
        float(d["started_at"]),
        _col(d.get("stage")),
        _col(d.get("hook")),
        _col(d.get("session")),
        _col(d.get("dispatch_id")),
        1 if d.get("error") is None else 0,
        _col(d.get("error")),
        _int(d.get("exit_code")),
        _col(d.get("signal")),
        _num(d.get("duration_ms")),
        encode_json(d),
    )


def _dispatch_row(d: JSONDict) -> Row:
    return (
        _col(d["id"]),
        float(d["started_at"]),
        _col(d.get("stage")),
        _col(d.get("session")),
        1 if d.get("recovered") else 0,
        len(d.get("failed") or ()),
        _num(d.get("duration_ms")),
        encode_json(d),
    )


def _tool_row(d: JSONDict) -> Row:
    return (
        _col(d["id"]),
        float(d["started_at"]),
        _col(d.get("tool")),
        _col(d.get("session")),
        _col(d.get("call_id")),
        1 if d.get("error") is None else 0,
        encode_json(d),
    )


def _event_row(d: JSONDict) -> Row:
    return (_col(d["id"]), float(d["started_at"]), _col(d["kind"]), encode_json(d))


_ROW_BUILDERS: Final[dict[str, Callable[[JSONDict], Row]]] = {
    "events": _event_row,
    "runs": _run_row,
    "dispatches": _dispatch_row,
    "tool_calls": _tool_row,
}


# --- connections and schema -----------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path),
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,  # autocommit; transactions are explicit
        check_same_thread=False,  # each connection is used by one thread at a time
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"journal schema version {version} is newer than this engine's ({SCHEMA_VERSION})"
            )
        while version < SCHEMA_VERSION:
            for statement in _MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _where(filters: Sequence[tuple[str, Any]], before: float | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in filters:
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(_col(value) if isinstance(value, str) else value)
    if before is not None:
        clauses.append("started_at < ?")
        params.append(float(before))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


# --- the journal ----------------------------------------------------------------------------


class Journal:
    """A SQLite journal of hook runs, stage dispatches, tool calls and sessions.

    Thread-safe. `record_*` never block on disk and never raise; `flush()` waits for the
    writer; `close()` flushes and stops it. Writer errors are logged to `evolve.journal` and
    kept in `last_error` (with `error_count`); the writer keeps going.
    """

    def __init__(self, path: Path, max_runs: int = 20000) -> None:
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        self.path = Path(path)
        self.max_runs = max_runs
        self.last_error: str | None = None
        self.error_count = 0

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._read_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._closed = False
        self._reader_closed = False
        self._warned_closed = False

        self._reader = _connect(self.path)
        try:
            _migrate(self._reader)
            self._writer = _connect(self.path)
        except BaseException:
            self._reader.close()
            raise
        # Rows per bounded table, as far as the writer knows; it may over-count (upserts of an
        # existing id count again) but never under-counts rows written by this journal, so
        # comparing it with max_runs is a cheap trigger for an exact count and a trim.
        self._approx: dict[str, int] = {
            table: int(self._writer.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in _INSERTS
        }
        self._queue: queue.SimpleQueue[_QueueItem] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._writer_main,
            name=f"journal-writer:{self.path.name}",
            daemon=True,
        )
        self._thread.start()

    # --- context manager ---

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes (asynchronous) ---

    def record_run(self, run: HookRun) -> None:
        self._enqueue("runs", run.to_dict)

    def record_dispatch(self, d: StageResult) -> None:
        self._enqueue("dispatches", d.to_dict)

    def record_tool_call(self, c: ToolCall) -> None:
        self._enqueue("tool_calls", c.to_dict)

    def record_event(self, kind: str, data: JSONDict, at: float | None = None) -> str:
        """Keep an engine event (e.g. a heartbeat tick or skip with its reason and figures)."""
        event_id = new_id("evt")
        record = {"id": event_id, "started_at": time.time() if at is None else at, "kind": kind, "data": data}
        self._enqueue("events", lambda: dict(record))
        return event_id

    def events(
        self, kind: str | None = None, before: float | None = None, limit: int = 200
    ) -> list[JSONDict]:
        """Recorded engine events, newest first: `{id, started_at, kind, data}`."""
        if limit <= 0:
            return []
        where, params = _where([("kind", kind)], before)
        return self._select_data(
            f"SELECT data FROM events{where} ORDER BY started_at DESC, id DESC LIMIT ?", [*params, limit]
        )

    def _enqueue(self, table: str, snapshot: Callable[[], JSONDict]) -> None:
        # Snapshot now (a deep copy, cheap: strings are shared) so later mutation of the record
        # by the caller can't race the writer; JSON encoding happens on the writer thread.
        try:
            data = snapshot()
        except Exception as exc:  # e.g. a cycle in `input`; never raise
            self._note_error(f"cannot snapshot record for {table}: {exc!r}")
            return
        with self._state_lock:
            if not self._closed:
                self._queue.put((table, data))
                return
            warn = not self._warned_closed
            self._warned_closed = True
        if warn:
            log.warning("journal %s is closed; dropping records written after close", self.path)

    def flush(self, timeout: float = 10.0) -> None:
        """Block until everything enqueued before this call is committed (or failed, see
        `last_error`). Raises TimeoutError if the writer doesn't get there in `timeout` s."""
        marker = _Flush()
        with self._state_lock:
            closed = self._closed
            if not closed:
                self._queue.put(marker)
        if closed:  # close() writes everything it accepted before stopping the writer
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"journal flush did not complete within {timeout} s")
            return
        if not marker.done.wait(timeout):
            raise TimeoutError(f"journal flush did not complete within {timeout} s")

    def close(self) -> None:
        """Flush, stop the writer and close the connections. Idempotent."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join()
        with self._read_lock:
            self._reader_closed = True
            self._reader.close()

    # --- the writer thread ---

    def _writer_main(self) -> None:
        try:
            while True:
                stop = self._writer_cycle()
                if stop:
                    break
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._writer.execute("PRAGMA optimize")
            self._writer.close()

    def _writer_cycle(self) -> bool:
        """Collect one batch, write it, release flush waiters. Returns True on stop."""
        batch: list[tuple[str, JSONDict]] = []
        waiters: list[_Flush] = []
        stop = False
        item = self._queue.get()
        deadline = time.monotonic() + BATCH_INTERVAL_S
        while True:
            if isinstance(item, _Stop):
                stop = True
            elif isinstance(item, _Flush):
                waiters.append(item)
            else:
                batch.append(item)
            if stop or waiters or len(batch) >= BATCH_MAX_ROWS:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                item = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
        try:
            if batch:
                self._write_batch(batch)
        except Exception as exc:  # never let the writer die
            self._rollback()
            self._note_error(f"journal writer failed: {exc!r}", exc_info=True)
        finally:
            for waiter in waiters:
                waiter.done.set()
        return stop

    def _write_batch(self, batch: list[tuple[str, JSONDict]]) -> None:
        rows: dict[str, list[Row]] = {table: [] for table in _INSERTS}
        for table, data in batch:
            try:
                rows[table].append(_ROW_BUILDERS[table](data))
            except Exception as exc:  # drop only the bad row
                self._note_error(f"cannot encode {table} record {data.get('id')!r}: {exc!r}")
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
            for table, table_rows in rows.items():
                if table_rows:
                    conn.executemany(_INSERTS[table], table_rows)
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            # The database as a whole is unusable right now (locked past busy_timeout, disk
            # full, I/O error, read-only): row by row would fail the same way, slowly.
            self._rollback()
            dropped = sum(len(table_rows) for table_rows in rows.values())
            self._note_error(f"journal batch write failed, dropped {dropped} row(s): {exc!r}")
            return
        except Exception as exc:  # a bad row (constraint, too big...): retry row by row
            self._rollback()
            self._note_error(f"journal batch write failed, retrying row by row: {exc!r}")
            self._write_rows_one_by_one(rows)
        for table, table_rows in rows.items():
            self._approx[table] += len(table_rows)
        self._trim()

    def _write_rows_one_by_one(self, rows: dict[str, list[Row]]) -> None:
        conn = self._writer
        dropped = 0
        last: Exception | None = None
        for table, table_rows in rows.items():
            for row in table_rows:
                try:
                    # autocommit: each row is its own transaction
                    conn.execute(_INSERTS[table], row)
                except Exception as exc:  # drop only the bad row
                    dropped += 1
                    last = exc
        if dropped:
            self._note_error(f"journal dropped {dropped} row(s); last error: {last!r}")

    def _trim(self) -> None:
        """Keep each bounded table to the newest `max_runs` rows."""
        conn = self._writer
        for table in _INSERTS:
            if self._approx[table] <= self.max_runs:
                continue
            try:
                conn.execute("BEGIN IMMEDIATE")
                count = int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
                excess = count - self.max_runs
                if excess > 0:
                    conn.execute(
                        f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} "
                        "ORDER BY started_at ASC, id ASC LIMIT ?)",
                        (excess,),
                    )
                    count = self.max_runs
                conn.execute("COMMIT")
                self._approx[table] = count
            except Exception as exc:  # retry on the next batch
                self._rollback()
                self._note_error(f"journal retention trim of {table} failed: {exc!r}")

    def _rollback(self) -> None:
        if self._writer.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._writer.execute("ROLLBACK")

    def _note_error(self, message: str, exc_info: bool = False) -> None:
        self.last_error = message
        self.error_count += 1
        log.error(message, exc_info=exc_info)

    # --- reads ---

    def _on_reader(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._read_lock:
            if self._reader_closed:
                raise RuntimeError("journal is closed")
            return fn(self._reader)

    def _select_data(self, sql: str, params: Sequence[Any]) -> list[JSONDict]:
        rows = self._on_reader(lambda conn: conn.execute(sql, params).fetchall())
        return [json.loads(row[0]) for row in rows]

    def runs(
        self,
        stage: str | None = None,
        hook: str | None = None,
        session: str | None = None,
        failed: bool | None = None,
        dispatch_id: str | None = None,
        before: float | None = None,
        limit: int = 200,
    ) -> list[HookRun]:
        """Hook runs matching every given filter, newest first. `before` pages by started_at."""
        if limit <= 0:
            return []
        ok = None if failed is None else (0 if failed else 1)
        where, params = _where(
            [
                ("stage", stage),
                ("hook", hook),
                ("session", session),
                ("ok", ok),
                ("dispatch_id", dispatch_id),
            ],
            before,
        )
        sql = f"SELECT data FROM runs{where} ORDER BY started_at DESC, id DESC LIMIT ?"
        return [HookRun.from_dict(d) for d in self._select_data(sql, [*params, limit])]

    def run(self, id: str) -> HookRun | None:
        found = self._select_data("SELECT data FROM runs WHERE id = ?", [_col(id)])
        return HookRun.from_dict(found[0]) if found else None

    def dispatches(
        self,
        stage: str | None = None,
        session: str | None = None,
        limit: int = 200,
        before: float | None = None,
    ) -> list[StageResult]:
        """Stage dispatches matching every given filter, newest first."""
        if limit <= 0:
            return []
        where, params = _where([("stage", stage), ("session", session)], before)
        sql = f"SELECT data FROM dispatches{where} ORDER BY started_at DESC, id DESC LIMIT ?"
        return [StageResult.from_dict(d) for d in self._select_data(sql, [*params, limit])]

    def dispatch(self, id: str) -> StageResult | None:
        found = self._select_data("SELECT data FROM dispatches WHERE id = ?", [_col(id)])
        return StageResult.from_dict(found[0]) if found else None

    def tool_calls(
        self,
        tool: str | None = None,
        session: str | None = None,
        limit: int = 200,
        before: float | None = None,
    ) -> list[ToolCall]:
        """Tool calls matching every given filter, newest first."""
        if limit <= 0:
            return []
        where, params = _where([("tool", tool), ("session", session)], before)
        sql = f"SELECT data FROM tool_calls{where} ORDER BY started_at DESC, id DESC LIMIT ?"
        return [ToolCall.from_dict(d) for d in self._select_data(sql, [*params, limit])]

    def tool_call(self, id: str) -> ToolCall | None:
        found = self._select_data("SELECT data FROM tool_calls WHERE id = ?", [_col(id)])
        return ToolCall.from_dict(found[0]) if found else None

    def counts(self) -> dict[str, int]:
        """Exact totals currently stored (committed): runs, failed_runs, dispatches, tool_calls."""

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

        return self._on_reader(query)

    # --- sessions (synchronous) ---

    def save_session(
        self,
        id: str,
        *,
        system: list[str] | _Unset | None = UNSET,
        agent: str | _Unset | None = UNSET,
        model: Any = UNSET,
        frozen_at: float | _Unset | None = UNSET,
        **extra: Any,
    ) -> None:
        """Create or update a session, changing only the fields given (None clears a field).

        `extra` keys are merged into the session's extra data (other keys are kept).
        `updated_at` is set to now.
        """
        reserved = {"updated_at"} & extra.keys()
        if reserved:
            raise ValueError(f"reserved session field(s): {sorted(reserved)}")
        sid = _col(id)

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
                    cur[2] = _col(agent)
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

        self._on_reader(write)

    def session(self, id: str) -> dict[str, Any] | None:
        found = self._select_sessions("WHERE id = ?", [_col(id)])
        return found[0] if found else None

    def sessions(self, limit: int = 200) -> list[dict[str, Any]]:
        """Sessions, most recently updated first."""
        if limit <= 0:
            return []
        return self._select_sessions("ORDER BY updated_at DESC, id DESC LIMIT ?", [limit])

    def _select_sessions(self, tail: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        sql = f"SELECT id, system, frozen_at, agent, model, updated_at, data FROM sessions {tail}"
        rows = self._on_reader(lambda conn: conn.execute(sql, params).fetchall())
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
