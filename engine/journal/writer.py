"""The journal's writer thread: records handed over by the (async) engine, written in batches.

Writes of runs, dispatches, tool calls and events are cheap for the caller: the record is
snapshotted and handed to a background writer thread, which JSON-encodes it and commits in batches
(up to `BATCH_MAX_ROWS` rows, or whatever arrived within `BATCH_INTERVAL_S` of the first row, in one
transaction; of several records of one id in a batch, only the last, the row that stays, is written). `flush()` waits until everything enqueued before it is committed. The queue is
bounded (`MAX_PENDING_ROWS` records, `MAX_PENDING_BYTES` of output): a caller that finds it full
waits for the writer, so the engine slows down to what the disk takes instead of holding an
ever-growing backlog that a crash would lose.

When the database cannot be written (a full disk, an I/O error, a lock another program holds past
the busy timeout), nothing is dropped: the batch goes back to the front of the queue and is tried
again (after 0.1 s, doubling to 2 s) until it can be written; meanwhile the writer is `failing`
(with the reason), `flush()` raises `JournalFailing` at once, and a caller is not made to wait for
room (the engine refuses new work instead, engine.api). Records handed over while failing beyond
`FAILING_MAX_ROWS` (or `FAILING_MAX_BYTES`), which nobody was answered for, are dropped and counted.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from engine.journal import blobs
from engine.journal.blobs import BlobSplitter, PendingBlob
from engine.journal.errors import ErrorLog
from engine.journal.retention import Retention
from engine.journal.rows import ROW_BUILDERS, Row
from engine.journal.schema import INSERTS, rollback
from engine.protocol.records import JSONDict

log = logging.getLogger("evolve.journal")

BATCH_MAX_ROWS: Final = 500
BATCH_INTERVAL_S: Final = 0.02
MAX_PENDING_ROWS: Final = 1000
"""Records waiting for the writer before a caller that adds one waits for room."""
MAX_PENDING_BYTES: Final = 32 * 1024 * 1024
"""The same, counted in bytes of output (stdout, stderr, tool output) the waiting records hold."""
_OVERHEAD_BYTES: Final = 256  # what a queued record costs beyond the output it holds
FAILING_MAX_ROWS: Final = 4 * MAX_PENDING_ROWS
FAILING_MAX_BYTES: Final = 2 * MAX_PENDING_BYTES
"""What the queue takes while the database cannot be written (the engine's own records: events, a
heartbeat; what a client is answered for is refused meanwhile)."""
RETRY_FIRST_S: Final = 0.1
RETRY_MAX_S: Final = 2.0


class JournalFailing(RuntimeError):
    """The journal cannot write (the reason is the message); it keeps what it was given and tries
    again by itself."""


class _Flush:
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: str | None = None  # set when what came before it could not be written


class _Stop:
    __slots__ = ()


_STOP: Final = _Stop()
_QueueItem = tuple[str, JSONDict] | _Flush | _Stop


def _queued_bytes(table: str, d: JSONDict) -> int:
    """What a queued record holds beyond what its caller holds anyway: its own output."""
    size = _OVERHEAD_BYTES
    if table == "runs":
        size += len(d.get("stderr") or "") + sum(len(line) for line in d.get("stdout_lines") or ())
    elif table == "tool_calls":
        output = d.get("output")
        size += len(output) if isinstance(output, str) else 0
    return size


class BatchWriter:
    """The bounded queue and the thread that empties it into the database, batch by batch.

    Owns `conn` (closed when the thread ends), and `splitter` is used on the thread only. Errors
    are noted in `errors`; the thread keeps going.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        splitter: BlobSplitter,
        retention: Retention,
        errors: ErrorLog,
        on_failing: Callable[[str | None], None] | None = None,
    ) -> None:
        """`on_failing(reason)`: called on the writer thread when the database stops taking writes
        (with why) and when it takes them again (None)."""
        self._conn = conn
        self._path = path
        self._blobs = splitter
        self._retention = retention
        self._errors = errors
        # The queue: records and markers in order, what they weigh, and a condition for both sides.
        self._items: collections.deque[_QueueItem] = collections.deque()
        self._pending_rows = 0
        self._pending_bytes = 0
        self._markers = 0
        self._cond = threading.Condition()
        self._closed = False
        self._warned_closed = False
        self.waits = 0  # how often a caller waited for room (back-pressure), since opened
        self.failing: str | None = None  # why the database cannot be written now, or None
        self.dropped = 0  # records given up: beyond the queue's room while failing, or at close
        self._on_failing = on_failing
        self._retry_s = RETRY_FIRST_S
        self._thread = threading.Thread(target=self._main, name=f"journal-writer:{path.name}", daemon=True)
        self._thread.start()

    # --- the callers' side ---

    def enqueue(self, table: str, take: Callable[[], JSONDict]) -> None:
        """Hand over a record: `take()` snapshots it now, so later mutation of the record by the
        caller can't race the writer; JSON encoding happens on the writer thread. Never raises."""
        try:
            data = take()
        except Exception as exc:  # never raise
            self._errors.note(f"cannot snapshot record for {table}: {exc!r}")
            return
        size = _queued_bytes(table, data)
        with self._cond:
            if self._closed:
                warn = not self._warned_closed
                self._warned_closed = True
            else:
                warn = False
                if self._full() and self.failing is None:
                    self.waits += 1
                    while self._full() and not self._closed and self.failing is None:
                        self._cond.wait()
                if self.failing is not None and (
                    self._pending_rows >= FAILING_MAX_ROWS or self._pending_bytes >= FAILING_MAX_BYTES
                ):
                    self.dropped += 1
                    if self.dropped == 1 or self.dropped % 1000 == 0:
                        self._errors.note(
                            f"the journal cannot write ({self.failing}) and holds {self._pending_rows} "
                            f"record(s) for when it can; {self.dropped} more dropped"
                        )
                    return
                self._items.append((table, data))
                self._pending_rows += 1
                self._pending_bytes += size
                # The writer waits for a first record, then gathers for BATCH_INTERVAL_S: it needs
                # waking for the first one and for a full batch only (each wake-up costs both threads).
                if len(self._items) == 1 or len(self._items) >= BATCH_MAX_ROWS:
                    self._cond.notify_all()
                return
        if warn:
            log.warning("journal %s is closed; dropping records written after close", self._path)

    def _full(self) -> bool:
        return self._pending_rows >= MAX_PENDING_ROWS or self._pending_bytes >= MAX_PENDING_BYTES

    @property
    def pending(self) -> int:
        """Records handed over and not yet committed (or failed)."""
        with self._cond:
            return self._pending_rows

    def flush(self, timeout: float) -> None:
        """Block until everything enqueued before this call is committed. Raises JournalFailing
        at once while the database cannot be written (and when it could not write what came before
        this call), TimeoutError if the writer doesn't get there in `timeout` s."""
        marker = _Flush()
        with self._cond:
            closed = self._closed
            if self.failing is not None and not closed:
                raise JournalFailing(self.failing)
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
        if marker.error is not None:
            raise JournalFailing(marker.error)

    def close(self) -> bool:
        """Write what was accepted, stop the thread and wait for it. False if it was closed already."""
        with self._cond:
            if self._closed:
                return False
            self._closed = True
            self._items.append(_STOP)
            self._markers += 1
            self._cond.notify_all()
        self._thread.join()
        return True

    # --- the thread ---

    def _main(self) -> None:
        try:
            self._retention.trim()  # a smaller limit than the last engine's applies at once
            while not self._cycle():
                pass
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()

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

    def _cycle(self) -> bool:
        """Collect one batch, write it, release flush waiters. Returns True on stop. A batch the
        database does not take goes back to the front of the queue, to be tried again."""
        batch, waiters, stop = self._take()
        refused: str | None = None
        try:
            if batch:
                refused = self._write_batch(batch)
        except Exception as exc:  # never let the writer die
            rollback(self._conn)
            self._errors.note(f"journal writer failed: {exc!r}", exc_info=True)
        if refused is None:
            self._done(batch)
            for waiter in waiters:
                waiter.done.set()
            if self.failing is not None and batch:
                self._failing(None)
            return stop
        for waiter in waiters:
            waiter.error = refused
            waiter.done.set()
        if stop:  # closing: nothing will try again
            with self._cond:
                left = len(batch) + sum(1 for item in self._items if isinstance(item, tuple))
                self._items.clear()
                self.dropped += left
            self._done(batch)
            self._errors.note(
                f"the journal closed while it could not write ({refused}): {left} record(s) lost"
            )
            return True
        with self._cond:
            self._items.extendleft(reversed(batch))  # first again, in their order
        self._failing(refused)
        with self._cond:
            if not self._closed:
                self._cond.wait(self._retry_s)
        self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
        return False

    def _failing(self, reason: str | None) -> None:
        """The database stopped taking writes (`reason`), or takes them again (None)."""
        with self._cond:
            was, self.failing = self.failing, reason
            self._cond.notify_all()  # callers waiting for room stop waiting: nothing is written now
        if reason is None:
            self._retry_s = RETRY_FIRST_S
            log.warning("the journal %s takes writes again", self._path)
        elif was is None:
            self._errors.note(
                f"the journal cannot write ({reason}); it keeps {self.pending} record(s) and tries again"
            )
        if (was is None) != (reason is None) and self._on_failing is not None:
            try:
                self._on_failing(reason)
            except Exception:  # a listener must not stop the writer
                log.exception("journal: a listener of its state failed")

    def _write_batch(self, batch: list[tuple[str, JSONDict]]) -> str | None:
        """Write `batch`; None when done (a bad row is dropped alone), else why the database does
        not take writes (nothing of the batch was written)."""
        rows: dict[str, list[Row]] = {table: [] for table in INSERTS}
        pending: dict[str, PendingBlob] = {}
        # Every table is written with INSERT OR REPLACE: of the records of one id in a batch (a tool
        # call that started and ended within it), the last is the row that stays, and the only one
        # encoded and written.
        last = {(table, data.get("id")): i for i, (table, data) in enumerate(batch)}
        for i, (table, data) in enumerate(batch):
            if last[(table, data.get("id"))] != i:
                continue
            try:
                rows[table].append(ROW_BUILDERS[table](self._blobs.split(table, data, pending)))
            except Exception as exc:  # drop only the bad row
                self._errors.note(f"cannot encode {table} record {data.get('id')!r}: {exc!r}")
        # Make room first when this batch would take the database past the limit.
        incoming = sum(len(row[-1]) for table_rows in rows.values() for row in table_rows)
        incoming += sum(len(blob.text or "") for blob in pending.values())
        if self._retention.would_pass_limit(incoming):
            self._retention.trim(room=incoming)
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            blobs.store(conn, pending)
            for table, table_rows in rows.items():
                if table_rows:
                    conn.executemany(INSERTS[table], table_rows)
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            # The database as a whole is unusable right now (locked past busy_timeout, disk
            # full, I/O error, read-only): row by row would fail the same way, slowly. Kept.
            rollback(conn)
            self._blobs.forget()  # what it remembers as stored may not be
            return str(exc) or type(exc).__name__
        except Exception as exc:  # a bad row (constraint, too big...): retry row by row
            rollback(conn)
            self._errors.note(f"journal batch write failed, retrying row by row: {exc!r}")
            self._write_rows_one_by_one(rows, pending)
        self._retention.wrote(
            {table: len(table_rows) for table, table_rows in rows.items()}, incoming, len(pending)
        )
        self._retention.trim()
        return None

    def _write_rows_one_by_one(self, rows: dict[str, list[Row]], pending: dict[str, PendingBlob]) -> None:
        conn = self._conn
        dropped = 0
        last: Exception | None = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            blobs.store(conn, pending)
            conn.execute("COMMIT")
        except Exception as exc:
            rollback(conn)
            self._blobs.forget()
            last = exc
        for table, table_rows in rows.items():
            for row in table_rows:
                try:
                    # autocommit: each row is its own transaction
                    conn.execute(INSERTS[table], row)
                except Exception as exc:  # drop only the bad row
                    dropped += 1
                    last = exc
        if dropped:
            self._errors.note(f"journal dropped {dropped} row(s); last error: {last!r}")
