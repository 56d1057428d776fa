"""The journal: a durable SQLite record of hook runs, stage dispatches, tool calls and sessions.

Writes of runs, dispatches and tool calls are cheap for the (async) caller: the record is
snapshotted and handed to a background writer thread, which JSON-encodes it and commits in batches
(up to `BATCH_MAX_ROWS` rows, or whatever arrived within `BATCH_INTERVAL_S` of the first row, in one
transaction). `flush()` waits until everything enqueued before it is committed. The queue is
bounded (`MAX_PENDING_ROWS` records, `MAX_PENDING_BYTES` of output): a caller that finds it full
waits for the writer, so the engine slows down to what the disk takes instead of holding an
ever-growing backlog that a crash would lose. Reads use their own connection, guarded by a lock,
and return the records of the wire contract (`engine.protocol.records`).

Every table keeps the full record as JSON in `data`; the other columns are copies of a few
fields, there for filtering, ordering and counting. Records are upserted by id, since a run is
recorded when it starts and again when it ends. Large values (a session's history and the prompts
in a hook's input, a tool's arguments, a stage's merged result: `_BLOB_FIELDS`) are stored once in
`blobs`, by content hash, and referenced from the rows (`"$blobs"`), so the ten runs of a stage that
all received the same history store it once.

Retention is bounded twice: runs, dispatches, tool calls and events are each trimmed to the newest
`max_runs` rows (ordered by `started_at`, then `id`), and the oldest rows of all four go when the
database grows past `max_bytes`; the file then shrinks (`auto_vacuum = INCREMENTAL`). A blob goes
with the last row that used it.

A tool call is recorded when it starts, synchronously (`tool_call_started`), with what it is about
to change: a restart finds the calls that never finished (`interrupted_tool_calls`).

Sessions (rare writes) are written synchronously. The database, its `-wal` and `-shm` files are
created readable by their owner only: they hold conversations.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final, Self, TypeVar

from engine.core import strictjson
from engine.protocol.records import HookRun, JSONDict, Record, StageResult, ToolCall, new_id

log = logging.getLogger("evolve.journal")

SCHEMA_VERSION: Final = 3
BATCH_MAX_ROWS: Final = 500
BATCH_INTERVAL_S: Final = 0.02
BUSY_TIMEOUT_MS: Final = 5000
WAL_SIZE_LIMIT: Final = 16 * 1024 * 1024
MAX_PENDING_ROWS: Final = 1000
"""Records waiting for the writer before a caller that adds one waits for room."""
MAX_PENDING_BYTES: Final = 32 * 1024 * 1024
"""The same, counted in bytes of output (stdout, stderr, tool output) the waiting records hold."""
BLOB_MIN_BYTES: Final = 2048
"""A value of a `_BLOB_FIELDS` position at least this large (as JSON) is stored once, by hash."""
TRIM_AT: Final = 0.95
SIZE_READ_EVERY_S: Final = 1.0
"""The writer reads the database's size (PRAGMA page_count) at most this often, unless what it wrote
since could have taken it near `TRIM_AT` (see `Journal._size_bound`)."""
TRIM_TO: Final = 0.85
"""Past `TRIM_AT` of `max_bytes`, the oldest rows go until the database is at `TRIM_TO` of it."""
DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
_FLAT_KEYS: Final = 64  # a dict of at most this many strings is recognised by its items (_BlobSplitter)
_SPLIT_PAGES: Final = 16  # pages one insert can add at most: 4 B-trees (a table, its indexes) x 4 levels

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

# Version 3: large values stored once (blobs), tool calls recorded when they start (`running`).
_SCHEMA_V3: Final = """
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,
    last_used REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_used ON blobs (last_used);
ALTER TABLE tool_calls ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS tool_calls_running ON tool_calls (running) WHERE running = 1;
"""

# Schema migrations: `_MIGRATIONS[v]` takes a database at user_version v to v + 1.
_MIGRATIONS: Final[dict[int, str]] = {0: _SCHEMA_V1, 1: _SCHEMA_V2, 2: _SCHEMA_V3}

_RUN_COLUMNS: Final = (
    "id, started_at, stage, hook, session, dispatch_id, ok, error, exit_code, signal, duration_ms, data"
)
_DISPATCH_COLUMNS: Final = "id, started_at, stage, session, recovered, failed_count, duration_ms, data"
_TOOL_COLUMNS: Final = "id, started_at, tool, session, call_id, ok, running, data"

# The three bounded, batch-written tables: name -> INSERT statement.
_INSERTS: Final[dict[str, str]] = {
    "runs": f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * 12)})",
    "dispatches": (f"INSERT OR REPLACE INTO dispatches ({_DISPATCH_COLUMNS}) VALUES ({', '.join('?' * 8)})"),
    "tool_calls": (f"INSERT OR REPLACE INTO tool_calls ({_TOOL_COLUMNS}) VALUES ({', '.join('?' * 8)})"),
    "events": "INSERT OR REPLACE INTO events (id, started_at, kind, data) VALUES (?, ?, ?, ?)",
}

Row = tuple[Any, ...]
_T = TypeVar("_T")
_R = TypeVar("_R", bound=Record)


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

# Where large values sit in each table's records: a top-level field (the whole value), or
# `field.*` (each value of that object field, e.g. each part of a hook's input).
_BLOB_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "runs": ("input.*", "result", "stdout_lines"),
    "dispatches": ("context.*", "merged"),
    "tool_calls": ("args", "output", "context", "model_args", "tool_output"),
    "events": (),
}
_BLOBS_KEY: Final = "$blobs"  # in a row's data: [[*path, hash], ...] of the values stored as blobs
_INTENT_KEY: Final = "$intent"  # in a running tool call's data: what it is about to change
_BLOB_UPSERT: Final = (
    "INSERT INTO blobs (hash, last_used, data) VALUES (?, ?, ?)"
    " ON CONFLICT (hash) DO UPDATE SET last_used = max(last_used, excluded.last_used)"
)
_OVERHEAD_BYTES: Final = 256  # what a queued record costs beyond the output it holds


# --- encoding -------------------------------------------------------------------------------


def encode_json(value: Any) -> str:
    """JSON text that is guaranteed to encode to UTF-8 and holds no NaN (strictjson.dumps)."""
    return strictjson.dumps(value)


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
        1 if _INTENT_KEY in d else 0,
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


def snapshot(record: Record) -> JSONDict:
    """A record's fields as a dict, for the writer: each field's own list or dict is copied (so
    that the caller may go on changing the record), what they hold is shared (a history is never
    changed in place, only replaced, and copying it for every run would cost more than the run)."""
    out: JSONDict = {}
    for f in dataclasses.fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if isinstance(value, list):
            value = list(value)
        elif isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, Record):
            value = value.to_dict()
        out[f.name] = value
    return out


def _queued_bytes(table: str, d: JSONDict) -> int:
    """What a queued record holds beyond what its caller holds anyway: its own output."""
    size = _OVERHEAD_BYTES
    if table == "runs":
        size += len(d.get("stderr") or "") + sum(len(line) for line in d.get("stdout_lines") or ())
    elif table == "tool_calls":
        output = d.get("output")
        size += len(output) if isinstance(output, str) else 0
    return size


class _PendingBlob:
    __slots__ = ("last_used", "text", "value")

    def __init__(self, value: Any, text: str | None, last_used: float) -> None:
        self.value = value
        self.text = text  # None: known to be stored already (update its last_used only)
        self.last_used = last_used


def _surely_small(value: dict[Any, Any] | list[Any]) -> bool:
    """Whether `value` encodes to less than BLOB_MIN_BYTES of JSON for sure, told without encoding
    it (most values of a record are a few bytes): an upper bound, which counts every character of a
    string as its longest escape."""
    left = BLOB_MIN_BYTES
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            left -= 6 * len(item) + 3
        elif kind is dict:
            left -= 2
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                left -= 6 * len(key) + 4
                stack.append(inner)
        elif kind is list or kind is tuple:
            left -= 2 + len(item)
            stack.extend(item)
        elif item is None or kind is bool or kind is float or (kind is int and -(10**20) < item < 10**20):
            left -= 32
        else:
            return False
        if left <= 0:
            return False
    return True


class _BlobSplitter:
    """Takes the large values out of a record for the `blobs` table.

    It remembers the last values it saw by identity (holding them, so that an id is never reused
    while remembered): the history that every run of a stage and every stage of a session share
    until the session's next message is encoded and hashed once, not once per run.
    """

    CACHE_SIZE: Final = 32

    def __init__(self) -> None:
        # id(value), or a dict of strings' items -> (value, hash or None when the value is small)
        self._seen: collections.OrderedDict[Hashable, tuple[Any, str | None]] = collections.OrderedDict()

    def forget(self) -> None:
        self._seen.clear()

    def _hash(self, value: Any, batch: dict[str, _PendingBlob], at: float) -> str | None:
        if isinstance(value, str):
            if len(value) < BLOB_MIN_BYTES:
                return None
        elif not isinstance(value, (dict, list)) or _surely_small(value):
            return None
        key: Hashable = id(value)
        if (
            type(value) is dict
            and 0 < len(value) <= _FLAT_KEYS
            and all(type(v) is str for v in value.values())
        ):
            # A new dict with the same strings (the prompts, read for every stage, come as one):
            # the same items in the same order encode the same, so it is encoded and hashed once.
            key = tuple(value.items())
        seen = self._seen.get(key)
        if seen is not None and (seen[0] is value or type(key) is tuple):
            self._seen.move_to_end(key)
            digest = seen[1]
            if digest is not None:
                pending = batch.get(digest)
                if pending is None:
                    batch[digest] = _PendingBlob(value, None, at)
                else:
                    pending.last_used = max(pending.last_used, at)
            return digest
        text = encode_json(value)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest() if len(text) >= BLOB_MIN_BYTES else None
        self._seen[key] = (value, digest)
        if len(self._seen) > self.CACHE_SIZE:
            self._seen.popitem(last=False)
        if digest is not None:
            pending = batch.get(digest)
            if pending is None or pending.text is None:
                batch[digest] = _PendingBlob(value, text, max(at, pending.last_used if pending else at))
            else:
                pending.last_used = max(pending.last_used, at)
        return digest

    def split(self, table: str, d: JSONDict, batch: dict[str, _PendingBlob]) -> JSONDict:
        """The row to store for `d`: large values replaced by None and listed under `$blobs`
        (their text added to `batch`)."""
        at = float(d["started_at"])
        stored: JSONDict | None = None
        refs: list[list[str]] = []
        for spec in _BLOB_FIELDS[table]:
            name, _, each = spec.partition(".")
            value = d.get(name)
            if each:
                if not isinstance(value, dict):
                    continue
                inner: JSONDict | None = None
                for key, item in value.items():
                    digest = self._hash(item, batch, at)
                    if digest is not None:
                        if inner is None:
                            inner = dict(value)
                        inner[key] = None
                        refs.append([name, key, digest])
                if inner is not None:
                    stored = stored if stored is not None else dict(d)
                    stored[name] = inner
            else:
                digest = self._hash(value, batch, at)
                if digest is not None:
                    stored = stored if stored is not None else dict(d)
                    stored[name] = None
                    refs.append([name, digest])
        if stored is None:
            return d
        stored[_BLOBS_KEY] = refs
        return stored


def _inflate(rows: list[JSONDict], blobs: dict[str, Any]) -> None:
    """Put the stored blobs back where `_BlobSplitter.split` took them from."""
    for d in rows:
        for ref in d.pop(_BLOBS_KEY, None) or ():
            *path, digest = ref
            target: Any = d
            for key in path[:-1]:
                target = target.get(key) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target[path[-1]] = blobs.get(digest)


# --- connections and schema -----------------------------------------------------------------


def _private(path: Path) -> None:
    """Create `path` (an empty file is a new database to SQLite) readable by its owner only, and
    take read access from others on an existing journal and its `-wal`/`-shm` files (SQLite gives
    those the database file's mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            if candidate.stat().st_mode & 0o077:
                candidate.chmod(0o600)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path),
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,  # autocommit; transactions are explicit
        check_same_thread=False,  # each connection is used by one thread at a time
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Takes effect on a new database only, and only before it is in WAL mode (an older journal is
    # rebuilt once by _migrate): lets the file shrink after trims.
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
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
    if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) != 2:
        # A journal of an older engine: once, rebuild it so that it can shrink from now on.
        log.warning("rebuilding the journal once, so that it can shrink after trims")
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")


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

    Thread-safe. `record_*` never raise and return at once unless the writer is `MAX_PENDING_ROWS`
    (or `MAX_PENDING_BYTES`) behind: then they wait for room. `flush()` waits for the writer;
    `close()` flushes and stops it. Writer errors are logged to `evolve.journal` and kept in
    `last_error` (with `error_count`); the writer keeps going.
    """

    def __init__(self, path: Path, max_runs: int = 20000, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.path = Path(path)
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self.last_error: str | None = None
        self.error_count = 0
        self.trimmed_rows = 0  # rows removed to stay under max_bytes, since the journal was opened

        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _private(self.path)
        self._read_lock = threading.Lock()
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
        self._page_size = int(self._writer.execute("PRAGMA page_size").fetchone()[0])
        # The database's size as last read, when, and how much the batches written since could
        # have added at most (upper bounds: see _grew).
        self._size_read = 0
        self._size_read_at = -math.inf
        self._size_growth = 0
        # Rows per bounded table, as far as the writer knows; it may over-count (upserts of an
        # existing id count again) but never under-counts rows written by this journal, so
        # comparing it with max_runs is a cheap trigger for an exact count and a trim.
        self._approx: dict[str, int] = {
            table: int(self._writer.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in _INSERTS
        }
        self._blobs = _BlobSplitter()
        # The queue: records and markers in order, what they weigh, and a condition for both sides.
        self._items: collections.deque[_QueueItem] = collections.deque()
        self._pending_rows = 0
        self._pending_bytes = 0
        self._markers = 0
        self._cond = threading.Condition()
        self.waits = 0  # how often a caller waited for room (back-pressure), since opened
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
        self._enqueue("runs", lambda: snapshot(run))

    def record_dispatch(self, d: StageResult) -> None:
        self._enqueue("dispatches", lambda: snapshot(d))

    def record_tool_call(self, c: ToolCall) -> None:
        """The call as it ended (or as it is now): replaces what `tool_call_started` recorded."""
        self._enqueue("tool_calls", lambda: snapshot(c))

    def tool_call_started(self, c: ToolCall, intent: JSONDict | None = None) -> None:
        """Record a call that starts, with `intent` (what it is about to change), until
        `record_tool_call` records it as ended: a restart finds it in `interrupted_tool_calls`.
        `flush()` after it to know it is on disk."""
        self._enqueue("tool_calls", lambda: {**snapshot(c), _INTENT_KEY: dict(intent or {})})

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

    def _enqueue(self, table: str, take: Callable[[], JSONDict]) -> None:
        # Snapshot now so later mutation of the record by the caller can't race the writer; JSON
        # encoding happens on the writer thread.
        try:
            data = take()
        except Exception as exc:  # never raise
            self._note_error(f"cannot snapshot record for {table}: {exc!r}")
            return
        size = _queued_bytes(table, data)
        with self._cond:
            if self._closed:
                warn = not self._warned_closed
                self._warned_closed = True
            else:
                warn = False
                if self._pending_rows >= MAX_PENDING_ROWS or self._pending_bytes >= MAX_PENDING_BYTES:
                    self.waits += 1
                    while (
                        self._pending_rows >= MAX_PENDING_ROWS or self._pending_bytes >= MAX_PENDING_BYTES
                    ) and not self._closed:
                        self._cond.wait()
                self._items.append((table, data))
                self._pending_rows += 1
                self._pending_bytes += size
                # The writer waits for a first record, then gathers for BATCH_INTERVAL_S: it needs
                # waking for the first one and for a full batch only (each wake-up costs both threads).
                if len(self._items) == 1 or len(self._items) >= BATCH_MAX_ROWS:
                    self._cond.notify_all()
                return
        if warn:
            log.warning("journal %s is closed; dropping records written after close", self.path)

    @property
    def pending(self) -> int:
        """Records handed to the journal and not yet committed (or failed)."""
        with self._cond:
            return self._pending_rows

    def flush(self, timeout: float = 10.0) -> None:
        """Block until everything enqueued before this call is committed (or failed, see
        `last_error`). Raises TimeoutError if the writer doesn't get there in `timeout` s."""
        marker = _Flush()
        with self._cond:
            closed = self._closed
            if not closed:
                self._items.append(marker)
                self._markers += 1
                self._cond.notify_all()
        if closed:  # close() writes everything it accepted before stopping the writer
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"journal flush did not complete within {timeout} s")
            return
        if not marker.done.wait(timeout):
            raise TimeoutError(f"journal flush did not complete within {timeout} s")

    def close(self) -> None:
        """Flush, stop the writer and close the connections. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._items.append(_STOP)
            self._markers += 1
            self._cond.notify_all()
        self._thread.join()
        with self._read_lock:
            self._reader_closed = True
            self._reader.close()

    # --- the writer thread ---

    def _writer_main(self) -> None:
        try:
            self._trim()  # a smaller limit than the last engine's applies at once
            while True:
                stop = self._writer_cycle()
                if stop:
                    break
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._writer.execute("PRAGMA optimize")
            self._writer.close()

    def _take(self) -> tuple[list[tuple[str, JSONDict]], list[_Flush], bool]:
        """The next batch: up to BATCH_MAX_ROWS records, or what arrived within BATCH_INTERVAL_S
        of the first, cut short by a flush or a stop."""
        batch: list[tuple[str, JSONDict]] = []
        waiters: list[_Flush] = []
        stop = False
        with self._cond:
            while not self._items:
                self._cond.wait()
            deadline = time.monotonic() + BATCH_INTERVAL_S
            while not self._markers and len(self._items) < BATCH_MAX_ROWS:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            while self._items and len(batch) < BATCH_MAX_ROWS:
                item = self._items.popleft()
                if isinstance(item, _Stop):
                    self._markers -= 1
                    stop = True
                    break
                if isinstance(item, _Flush):
                    self._markers -= 1
                    waiters.append(item)
                    break  # what comes after it does not hold its waiter up
                batch.append(item)
        return batch, waiters, stop

    def _done(self, batch: list[tuple[str, JSONDict]]) -> None:
        """The records of `batch` are written (or failed): room for the callers waiting."""
        size = sum(_queued_bytes(table, data) for table, data in batch)
        with self._cond:
            self._pending_rows -= len(batch)
            self._pending_bytes -= size
            self._cond.notify_all()

    def _writer_cycle(self) -> bool:
        """Collect one batch, write it, release flush waiters. Returns True on stop."""
        batch, waiters, stop = self._take()
        try:
            if batch:
                self._write_batch(batch)
        except Exception as exc:  # never let the writer die
            self._rollback()
            self._note_error(f"journal writer failed: {exc!r}", exc_info=True)
        finally:
            self._done(batch)
            for waiter in waiters:
                waiter.done.set()
        return stop

    def _write_batch(self, batch: list[tuple[str, JSONDict]]) -> None:
        rows: dict[str, list[Row]] = {table: [] for table in _INSERTS}
        blobs: dict[str, _PendingBlob] = {}
        for table, data in batch:
            try:
                rows[table].append(_ROW_BUILDERS[table](self._blobs.split(table, data, blobs)))
            except Exception as exc:  # drop only the bad row
                self._note_error(f"cannot encode {table} record {data.get('id')!r}: {exc!r}")
        # Make room first when this batch would take the database past the limit.
        incoming = sum(len(row[-1]) for table_rows in rows.values() for row in table_rows)
        incoming += sum(len(blob.text or "") for blob in blobs.values())
        if self._size_bound() + incoming > TRIM_AT * self.max_bytes:
            self._trim(room=incoming)
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._write_blobs(blobs)
            for table, table_rows in rows.items():
                if table_rows:
                    conn.executemany(_INSERTS[table], table_rows)
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            # The database as a whole is unusable right now (locked past busy_timeout, disk
            # full, I/O error, read-only): row by row would fail the same way, slowly.
            self._rollback()
            self._blobs.forget()  # what it remembers as stored may not be
            dropped = sum(len(table_rows) for table_rows in rows.values())
            self._note_error(f"journal batch write failed, dropped {dropped} row(s): {exc!r}")
            return
        except Exception as exc:  # a bad row (constraint, too big...): retry row by row
            self._rollback()
            self._note_error(f"journal batch write failed, retrying row by row: {exc!r}")
            self._write_rows_one_by_one(rows, blobs)
        for table, table_rows in rows.items():
            self._approx[table] += len(table_rows)
        self._grew(incoming, sum(len(table_rows) for table_rows in rows.values()) + len(blobs))
        self._trim()

    def _write_blobs(self, blobs: dict[str, _PendingBlob]) -> None:
        conn = self._writer
        for digest, blob in blobs.items():
            if blob.text is None:
                updated = conn.execute(
                    "UPDATE blobs SET last_used = max(last_used, ?) WHERE hash = ?", (blob.last_used, digest)
                ).rowcount
                if updated:
                    continue
                blob.text = encode_json(blob.value)  # trimmed since it was last stored
            conn.execute(_BLOB_UPSERT, (digest, blob.last_used, blob.text))

    def _write_rows_one_by_one(self, rows: dict[str, list[Row]], blobs: dict[str, _PendingBlob]) -> None:
        conn = self._writer
        dropped = 0
        last: Exception | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._write_blobs(blobs)
            conn.execute("COMMIT")
        except Exception as exc:
            self._rollback()
            self._blobs.forget()
            last = exc
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

    # --- retention ---

    def _trim(self, room: int = 0) -> None:
        """Keep each bounded table to the newest `max_runs` rows and the database under
        `max_bytes` (with `room` bytes to spare, for a batch about to be written); drop the blobs
        no row uses any more."""
        try:
            trimmed = self._trim_rows()
            if self._size_bound() + room > TRIM_AT * self.max_bytes:
                self._trim_bytes(room)
                trimmed = True
            if trimmed:
                self._collect_blobs()
                self._shrink()
                self._size_read_at = -math.inf  # read it again: the file shrank
        except Exception as exc:  # retry on the next batch
            self._rollback()
            self._note_error(f"journal retention trim failed: {exc!r}")

    def _pragma(self, name: str) -> int:
        return int(self._writer.execute(f"PRAGMA {name}").fetchone()[0])

    def _file_bytes(self) -> int:
        return self._pragma("page_count") * self._page_size

    def _size_bound(self) -> int:
        """At least the database's size: its size as read, plus at most what was written since.
        Read again (exactly) once a second, or when the bound comes near `TRIM_AT`: reading it for
        every batch cost as much as a third of writing a stage's two rows."""
        bound = self._size_read + self._size_growth
        now = time.monotonic()
        if now - self._size_read_at >= SIZE_READ_EVERY_S or bound > TRIM_AT * self.max_bytes * 0.9:
            self._size_read, self._size_read_at, self._size_growth = self._file_bytes(), now, 0
            bound = self._size_read
        return bound

    def _grew(self, written: int, rows: int) -> None:
        """Count a batch of `rows` rows and blobs holding `written` bytes into the size bound: twice
        the bytes (B-tree pages are at least half full) plus, per row and per batch, a page for
        each level of each table and index an insert can split."""
        self._size_growth += 2 * written + (rows + 1) * _SPLIT_PAGES * self._page_size

    def _used_bytes(self) -> int:
        return (self._pragma("page_count") - self._pragma("freelist_count")) * self._page_size

    def _trim_rows(self) -> bool:
        conn = self._writer
        trimmed = False
        for table in _INSERTS:
            if self._approx[table] <= self.max_runs:
                continue
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
                trimmed = True
            conn.execute("COMMIT")
            self._approx[table] = count
        return trimmed

    def _trim_bytes(self, room: int = 0) -> None:
        """The oldest rows of all bounded tables, in proportion to how far over the database is,
        until it is at TRIM_TO of max_bytes less `room` (or nothing is left to take)."""
        conn = self._writer
        target = max(TRIM_TO * self.max_bytes - room, 0)
        union = " UNION ALL ".join(f"SELECT started_at, id FROM {table}" for table in _INSERTS)
        for _ in range(16):
            used = self._used_bytes()
            if used <= target:
                return
            conn.execute("BEGIN IMMEDIATE")
            total = int(conn.execute(f"SELECT COUNT(*) FROM ({union})").fetchone()[0])
            if total == 0:
                conn.execute("COMMIT")
                return
            take = max(1, min(total, int(total * (used - target) / max(used, 1)) + 1))
            at, last_id = conn.execute(
                f"SELECT started_at, id FROM ({union}) ORDER BY started_at, id LIMIT 1 OFFSET ?", (take - 1,)
            ).fetchone()
            removed = 0
            for table in _INSERTS:
                removed += conn.execute(
                    f"DELETE FROM {table} WHERE started_at < ? OR (started_at = ? AND id <= ?)",
                    (at, at, last_id),
                ).rowcount
                self._approx[table] = int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            self._collect_blobs(in_transaction=True)
            conn.execute("COMMIT")
            self.trimmed_rows += removed

    def _collect_blobs(self, in_transaction: bool = False) -> None:
        """Delete the blobs no remaining row can use: those last used before the oldest row."""
        conn = self._writer
        if not in_transaction:
            conn.execute("BEGIN IMMEDIATE")
        oldest = [
            conn.execute(f"SELECT MIN(started_at) FROM {table}").fetchone()[0]
            for table in _INSERTS
            if _BLOB_FIELDS[table]
        ]
        present = [at for at in oldest if at is not None]
        if present:
            conn.execute("DELETE FROM blobs WHERE last_used < ?", (min(present),))
        else:
            conn.execute("DELETE FROM blobs")
        if not in_transaction:
            conn.execute("COMMIT")
        self._blobs.forget()  # some of what it remembers as stored may be gone

    def _shrink(self) -> None:
        """Give the pages freed by a trim back to the file system, and keep the WAL small."""
        conn = self._writer
        if self._pragma("freelist_count") * self._page_size >= (1 - TRIM_TO) * self.max_bytes / 4:
            # executescript steps the pragma to the end (execute() would free a single page).
            conn.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")

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
        """The `data` of the rows the query selects, with their blobs put back. A row that cannot
        be read (damaged by hand, written by a broken engine) is left out and noted, so that one
        stored value can never make a listing fail."""

        def read(conn: sqlite3.Connection) -> tuple[list[JSONDict], dict[str, Any]]:
            conn.execute("BEGIN")  # rows and their blobs from one snapshot
            try:
                found: list[JSONDict] = []
                for (text,) in conn.execute(sql, params).fetchall():
                    try:
                        d = json.loads(text)
                    except (ValueError, RecursionError) as exc:
                        self._note_error(f"journal row cannot be read, left out: {exc!r}")
                        continue
                    if isinstance(d, dict):
                        found.append(d)
                wanted = {ref[-1] for d in found for ref in d.get(_BLOBS_KEY) or () if ref}
                return found, self._read_blobs(conn, wanted)
            finally:
                conn.execute("COMMIT")

        rows, blobs = self._on_reader(read)
        _inflate(rows, blobs)
        return rows

    def _read_blobs(self, conn: sqlite3.Connection, hashes: Iterable[str]) -> dict[str, Any]:
        wanted = sorted(hashes)
        out: dict[str, Any] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for digest, text in conn.execute(f"SELECT hash, data FROM blobs WHERE hash IN ({marks})", chunk):
                try:
                    out[digest] = json.loads(text)
                except (ValueError, RecursionError) as exc:
                    self._note_error(f"journal blob {digest} cannot be read: {exc!r}")
        return out

    def _records(self, cls: type[_R], rows: list[JSONDict]) -> list[_R]:
        out: list[_R] = []
        for d in rows:
            try:
                out.append(cls.from_dict(d))
            except Exception as exc:  # a row of another shape: left out, never a failed listing
                self._note_error(f"journal row {d.get('id')!r} is not a {cls.__name__}, left out: {exc!r}")
        return out

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
        return self._records(HookRun, self._select_data(sql, [*params, limit]))

    def run(self, id: str) -> HookRun | None:
        found = self._records(HookRun, self._select_data("SELECT data FROM runs WHERE id = ?", [_col(id)]))
        return found[0] if found else None

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
        return self._records(StageResult, self._select_data(sql, [*params, limit]))

    def dispatch(self, id: str) -> StageResult | None:
        found = self._records(
            StageResult, self._select_data("SELECT data FROM dispatches WHERE id = ?", [_col(id)])
        )
        return found[0] if found else None

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
        return self._records(ToolCall, self._select_data(sql, [*params, limit]))

    def tool_call(self, id: str) -> ToolCall | None:
        found = self._records(
            ToolCall, self._select_data("SELECT data FROM tool_calls WHERE id = ?", [_col(id)])
        )
        return found[0] if found else None

    def interrupted_tool_calls(self) -> list[tuple[ToolCall, JSONDict]]:
        """Calls recorded as started (`tool_call_started`) and never recorded as ended, oldest
        first, with the intent they were started with. Only meaningful before this engine starts
        calls of its own."""
        rows = self._select_data("SELECT data FROM tool_calls WHERE running = 1 ORDER BY started_at, id", [])
        out: list[tuple[ToolCall, JSONDict]] = []
        for d in rows:
            intent = d.pop(_INTENT_KEY, None)
            for call in self._records(ToolCall, [d]):
                out.append((call, intent if isinstance(intent, dict) else {}))
        return out

    def size(self) -> dict[str, int]:
        """Bytes of the database file and of its WAL, as the file system has them now."""
        out: dict[str, int] = {}
        for key, candidate in (("file", self.path), ("wal", self.path.with_name(self.path.name + "-wal"))):
            try:
                out[key] = candidate.stat().st_size
            except FileNotFoundError:
                out[key] = 0
        return out

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
