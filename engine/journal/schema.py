"""The journal's database: its tables, their migrations, and how a connection to it is opened.

Every table keeps the full record as JSON in `data`; the other columns are copies of a few fields,
there for filtering, ordering and counting. Records are upserted by id, since a run is recorded when
it starts and again when it ends. The database, its `-wal` and `-shm` files are created readable by
their owner only: they hold conversations.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Final

from engine.core import strictjson

log = logging.getLogger("evolve.journal")

SCHEMA_VERSION: Final = 4
BUSY_TIMEOUT_MS: Final = 5000
WAL_SIZE_LIMIT: Final = 16 * 1024 * 1024

SCHEMA_V1: Final = """
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
SCHEMA_V2: Final = """
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
SCHEMA_V3: Final = """
CREATE TABLE IF NOT EXISTS blobs (
    hash TEXT PRIMARY KEY,
    last_used REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_used ON blobs (last_used);
ALTER TABLE tool_calls ADD COLUMN running INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS tool_calls_running ON tool_calls (running) WHERE running = 1;
"""

# Version 4: a session's history in a table of its own (read when asked for, never when the sessions
# are listed), and what each session and history takes (the sessions' share of journal_max_bytes).
SCHEMA_V4: Final = """
CREATE TABLE IF NOT EXISTS session_histories (
    id TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL,
    length INTEGER NOT NULL,
    history TEXT NOT NULL
);
ALTER TABLE sessions ADD COLUMN history_length INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS sessions_size ON sessions (updated_at, id, bytes);
"""


def text_bytes(*values: str | None) -> int:
    """What text values take stored (UTF-8; a lone surrogate was escaped before it got here)."""
    return sum(len(v.encode("utf-8", "surrogatepass")) for v in values if v is not None)


def _move_histories(conn: sqlite3.Connection) -> None:
    """Version 4's data: each session's history out of its `data` into `session_histories`, one
    session at a time (a journal of many long sessions is not read into memory at once)."""
    ids = [row[0] for row in conn.execute("SELECT id FROM sessions").fetchall()]
    for sid in ids:
        system, model, data = conn.execute(
            "SELECT system, model, data FROM sessions WHERE id = ?", (sid,)
        ).fetchone()
        try:
            facts = json.loads(data or "{}")
        except ValueError:
            continue  # damaged by hand: left as it is (its history, if any, is not listed)
        if not isinstance(facts, dict):
            continue
        history = facts.pop("history", None)
        text = strictjson.dumps(facts)
        length = 0
        if isinstance(history, list) and history:
            stored = strictjson.dumps(history)
            length = len(history)
            conn.execute(
                "INSERT OR REPLACE INTO session_histories (id, bytes, length, history) VALUES (?, ?, ?, ?)",
                (sid, text_bytes(stored), length, stored),
            )
        conn.execute(
            "UPDATE sessions SET data = ?, history_length = ?, bytes = ? WHERE id = ?",
            (text, length, text_bytes(text, system, model), sid),
        )


# Schema migrations: `MIGRATIONS[v]` takes a database at user_version v to v + 1 (its statements,
# then `DATA_MIGRATIONS[v]`, if any, in the same transaction).
MIGRATIONS: Final[dict[int, str]] = {0: SCHEMA_V1, 1: SCHEMA_V2, 2: SCHEMA_V3, 3: SCHEMA_V4}
DATA_MIGRATIONS: Final[dict[int, Callable[[sqlite3.Connection], None]]] = {3: _move_histories}

_RUN_COLUMNS: Final = (
    "id, started_at, stage, hook, session, dispatch_id, ok, error, exit_code, signal, duration_ms, data"
)
_DISPATCH_COLUMNS: Final = "id, started_at, stage, session, recovered, failed_count, duration_ms, data"
_TOOL_COLUMNS: Final = "id, started_at, tool, session, call_id, ok, running, data"

# The bounded, batch-written tables (trimmed by retention): name -> INSERT statement.
INSERTS: Final[dict[str, str]] = {
    "runs": f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('?' * 12)})",
    "dispatches": (f"INSERT OR REPLACE INTO dispatches ({_DISPATCH_COLUMNS}) VALUES ({', '.join('?' * 8)})"),
    "tool_calls": (f"INSERT OR REPLACE INTO tool_calls ({_TOOL_COLUMNS}) VALUES ({', '.join('?' * 8)})"),
    "events": "INSERT OR REPLACE INTO events (id, started_at, kind, data) VALUES (?, ?, ?, ?)",
}


def private(path: Path) -> None:
    """Create `path` (an empty file is a new database to SQLite) readable by its owner only, and
    take read access from others on an existing journal and its `-wal`/`-shm` files (SQLite gives
    those the database file's mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            if candidate.stat().st_mode & 0o077:
                candidate.chmod(0o600)


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        str(path),
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,  # autocommit; transactions are explicit
        check_same_thread=False,  # each connection is used by one thread at a time
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    # Takes effect on a new database only, and only before it is in WAL mode (an older journal is
    # rebuilt once by migrate): lets the file shrink after trims.
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
    return conn


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the database to SCHEMA_VERSION; refuse one of a newer engine."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"journal schema version {version} is newer than this engine's ({SCHEMA_VERSION})"
            )
        while version < SCHEMA_VERSION:
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    conn.execute(statement)
            if version in DATA_MIGRATIONS:
                DATA_MIGRATIONS[version](conn)
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


def rollback(conn: sqlite3.Connection) -> None:
    """End the transaction a failed write left open, if any."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
