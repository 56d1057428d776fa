"""The journal: a durable SQLite record of hook runs, stage dispatches, tool calls, engine events
and sessions.

`Journal` is what the engine holds; it puts together the parts that each do one job:

- `writer`: the writer thread and its bounded queue (back-pressure), batches, flush and close;
- `blobs`: large values stored once, by content hash;
- `retention`: the bounds by rows and by bytes, kept after each batch;
- `queries`: every read (with the readers' connection), `sessions`: the sessions table;
- `schema`: the tables, their migrations, how a connection is opened; `rows`: a record as a row.

A tool call is recorded when it starts, synchronously (`tool_call_started`), with what it is about
to change: a restart finds the calls that never finished (`interrupted_tool_calls`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from engine.journal.blobs import BlobSplitter
from engine.journal.errors import ErrorLog
from engine.journal.queries import Queries, ReadConnection
from engine.journal.retention import DEFAULT_MAX_BYTES, Retention
from engine.journal.rows import INTENT_KEY, encode_json, snapshot
from engine.journal.schema import SCHEMA_V1 as _SCHEMA_V1
from engine.journal.schema import SCHEMA_V2 as _SCHEMA_V2
from engine.journal.schema import SCHEMA_VERSION, connect, migrate, private
from engine.journal.sessions import SESSIONS_SHARE, UNSET, SessionTable, _Unset
from engine.journal.writer import MAX_PENDING_BYTES, MAX_PENDING_ROWS, BatchWriter, JournalFailing
from engine.protocol.records import HookRun, JSONDict, StageResult, ToolCall, new_id

# Names this module had before it was split, for the code and tests that import them from here.
__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_PENDING_BYTES",
    "MAX_PENDING_ROWS",
    "SCHEMA_VERSION",
    "UNSET",
    "_SCHEMA_V1",
    "_SCHEMA_V2",
    "Journal",
    "JournalFailing",
    "encode_json",
    "snapshot",
]


class Journal:
    """A SQLite journal of hook runs, stage dispatches, tool calls, engine events and sessions.

    Thread-safe. `record_*` never raise and return at once unless the writer is `MAX_PENDING_ROWS`
    (or `MAX_PENDING_BYTES`) behind: then they wait for room. `flush()` waits for the writer;
    `close()` flushes and stops it. Writer errors are logged to `evolve.journal` and kept in
    `last_error` (with `error_count`); the writer keeps going. While the database cannot be written
    (`failing` says why) nothing is dropped that a caller could have been answered for: the writer
    keeps it and tries again, `flush()` and `save_session` raise `JournalFailing`.

    Over 30 methods: on purpose, this is the one face of the journal that the engine, the
    replays and the tests hold, and almost every method is a line or two that hands over to the part
    doing that job (the module's docstring lists them); the work itself lives in those parts.
    """

    def __init__(
        self,
        path: Path,
        max_runs: int = 20000,
        max_bytes: int = DEFAULT_MAX_BYTES,
        on_failing: Callable[[str | None], None] | None = None,
    ) -> None:
        """`on_failing(reason)`: called (on another thread) when the journal stops taking writes,
        with why, and when it takes them again (None)."""
        if max_runs < 1:
            raise ValueError("max_runs must be at least 1")
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.path = Path(path)
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self._errors = ErrorLog()
        self._on_failing = on_failing
        self._sessions_failing: str | None = None

        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        private(self.path)
        reader = connect(self.path)
        try:
            migrate(reader)
            # The writer thread's connection (tests cap its size to play a full disk).
            self._writer = connect(self.path)
        except BaseException:
            reader.close()
            raise
        self._reader = ReadConnection(reader)
        self._queries = Queries(self._reader, self._errors)
        # Before the writer's first trim: an older journal's sessions past their share go first, so
        # that the runs are not trimmed to make room for them.
        self._sessions = SessionTable(self._reader, int(SESSIONS_SHARE * max_bytes))
        splitter = BlobSplitter()
        self._retention = Retention(self._writer, max_runs, max_bytes, self._errors, splitter.forget)
        self._batches = BatchWriter(
            self._writer, self.path, splitter, self._retention, self._errors, self._writer_state
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what went on, since the journal was opened ---

    @property
    def last_error(self) -> str | None:
        return self._errors.last

    @property
    def error_count(self) -> int:
        return self._errors.count

    @property
    def trimmed_rows(self) -> int:
        """Rows removed to stay under max_bytes."""
        return self._retention.trimmed_rows

    @property
    def failing(self) -> str | None:
        """Why the journal cannot write now (a full disk, an I/O error, a lock), None when it can."""
        return self._batches.failing or self._sessions_failing

    @property
    def dropped(self) -> int:
        """Records given up since opened: handed over while the journal could not write, beyond what
        it keeps for when it can, or left when it closed unable to write them."""
        return self._batches.dropped

    @property
    def sessions_bytes(self) -> int:
        """What sessions and their histories take (their share is half of `max_bytes`)."""
        return self._sessions.stored_bytes

    def _writer_state(self, reason: str | None) -> None:
        if self._sessions_failing is None and self._on_failing is not None:
            self._on_failing(reason)

    def _sessions_state(self, reason: str | None) -> None:
        was, self._sessions_failing = self._sessions_failing, reason
        if (
            (was is None) != (reason is None)
            and self._batches.failing is None
            and self._on_failing is not None
        ):
            with contextlib.suppress(Exception):  # a listener must not break a write
                self._on_failing(reason)

    @property
    def waits(self) -> int:
        """How often a caller waited for room (back-pressure)."""
        return self._batches.waits

    @property
    def pending(self) -> int:
        """Records handed to the journal and not yet committed (or failed)."""
        return self._batches.pending

    # --- writes (asynchronous) ---

    def record_run(self, run: HookRun) -> None:
        self._batches.enqueue("runs", lambda: snapshot(run))

    def record_dispatch(self, d: StageResult) -> None:
        self._batches.enqueue("dispatches", lambda: snapshot(d))

    def record_tool_call(self, c: ToolCall) -> None:
        """The call as it ended (or as it is now): replaces what `tool_call_started` recorded."""
        self._batches.enqueue("tool_calls", lambda: snapshot(c))

    def tool_call_started(self, c: ToolCall, intent: JSONDict | None = None) -> None:
        """Record a call that starts, with `intent` (what it is about to change), until
        `record_tool_call` records it as ended: a restart finds it in `interrupted_tool_calls`.
        `flush()` after it to know it is on disk."""
        self._batches.enqueue("tool_calls", lambda: {**snapshot(c), INTENT_KEY: dict(intent or {})})

    def record_event(self, kind: str, data: JSONDict, at: float | None = None) -> str:
        """Keep an engine event (e.g. a heartbeat tick or skip with its reason and figures)."""
        event_id = new_id("evt")
        record = {"id": event_id, "started_at": time.time() if at is None else at, "kind": kind, "data": data}
        self._batches.enqueue("events", lambda: dict(record))
        return event_id

    def flush(self, timeout: float = 10.0) -> None:
        """Block until everything enqueued before this call is committed (or failed, see
        `last_error`). Raises TimeoutError if the writer doesn't get there in `timeout` s."""
        self._batches.flush(timeout)

    def close(self) -> None:
        """Flush, stop the writer and close the connections. Idempotent."""
        if self._batches.close():
            self._reader.close()

    # --- reads ---

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
        return self._queries.runs(stage, hook, session, failed, dispatch_id, before, limit)

    def run(self, id: str) -> HookRun | None:
        return self._queries.run(id)

    def dispatches(
        self,
        stage: str | None = None,
        session: str | None = None,
        limit: int = 200,
        before: float | None = None,
    ) -> list[StageResult]:
        """Stage dispatches matching every given filter, newest first."""
        return self._queries.dispatches(stage, session, limit, before)

    def dispatch(self, id: str) -> StageResult | None:
        return self._queries.dispatch(id)

    def tool_calls(
        self,
        tool: str | None = None,
        session: str | None = None,
        limit: int = 200,
        before: float | None = None,
    ) -> list[ToolCall]:
        """Tool calls matching every given filter, newest first."""
        return self._queries.tool_calls(tool, session, limit, before)

    def tool_call(self, id: str) -> ToolCall | None:
        return self._queries.tool_call(id)

    def interrupted_tool_calls(self) -> list[tuple[ToolCall, JSONDict]]:
        """Calls recorded as started (`tool_call_started`) and never recorded as ended, oldest
        first, with the intent they were started with. Only meaningful before this engine starts
        calls of its own."""
        return self._queries.interrupted_tool_calls()

    def events(
        self, kind: str | None = None, before: float | None = None, limit: int = 200
    ) -> list[JSONDict]:
        """Recorded engine events, newest first: `{id, started_at, kind, data}`."""
        return self._queries.events(kind, before, limit)

    def failing_hooks(self) -> list[JSONDict]:
        """The hooks failing at a stage since they last ran fine there (Queries.failing)."""
        return self._queries.failing()

    def streak(self, hook: str, stage: str, at: float) -> JSONDict:
        """The failed runs around one (Queries.streak)."""
        return self._queries.streak(hook, stage, at)

    def counts(self) -> dict[str, int]:
        """Exact totals currently stored (committed): runs, failed_runs, dispatches, tool_calls."""
        return self._queries.counts()

    def size(self) -> dict[str, int]:
        """Bytes of the database file and of its WAL, as the file system has them now."""
        out: dict[str, int] = {}
        for key, candidate in (("file", self.path), ("wal", self.path.with_name(self.path.name + "-wal"))):
            try:
                out[key] = candidate.stat().st_size
            except FileNotFoundError:
                out[key] = 0
        return out

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

        `extra` keys are merged into the session's extra data (other keys are kept); `history`
        replaces the session's history. `updated_at` is set to now. Raises JournalFailing when the
        database cannot be written (the caller keeps the session to write it again).
        """
        try:
            self._sessions.save(id, system, agent, model, frozen_at, extra)
        except sqlite3.OperationalError as exc:
            reason = str(exc) or type(exc).__name__
            self._errors.note(f"cannot save session {id}: {reason}")
            self._sessions_state(reason)
            raise JournalFailing(reason) from exc
        if self._sessions_failing is not None:
            self._sessions_state(None)

    def session(self, id: str) -> dict[str, Any] | None:
        """A session with its history."""
        return self._sessions.one(id)

    def sessions(self, limit: int = 200) -> list[dict[str, Any]]:
        """Sessions, most recently updated first, without their histories (`history_length`)."""
        return self._sessions.newest(limit)
