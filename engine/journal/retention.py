"""The journal's bounds on disk, kept by the writer thread after each batch.

Retention is bounded twice: runs, dispatches, tool calls and events are each trimmed to the newest
`max_runs` rows (ordered by `started_at`, then `id`), and the oldest rows of all four go when the
database grows past `max_bytes`; the file then shrinks (`auto_vacuum = INCREMENTAL`). A blob goes
with the last row that used it.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Final

from engine.journal.blobs import BLOB_FIELDS
from engine.journal.errors import ErrorLog
from engine.journal.schema import INSERTS, rollback

DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
TRIM_AT: Final = 0.95
TRIM_TO: Final = 0.85
"""Past `TRIM_AT` of `max_bytes`, the oldest rows go until the database is at `TRIM_TO` of it."""
SIZE_READ_EVERY_S: Final = 1.0
"""The writer reads the database's size (PRAGMA page_count) at most this often, unless what it wrote
since could have taken it near `TRIM_AT` (see `Retention.size_bound`)."""
_SPLIT_PAGES: Final = 16  # pages one insert can add at most: 4 B-trees (a table, its indexes) x 4 levels


class Retention:
    """Keeps the database within `max_runs` rows per bounded table and `max_bytes` on disk.

    Used by the writer thread only, on its connection. `forget_blobs` is called when blobs may
    have been deleted (what the blob splitter remembers as stored may be gone).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        max_runs: int,
        max_bytes: int,
        errors: ErrorLog,
        forget_blobs: Callable[[], None],
    ) -> None:
        self.max_runs = max_runs
        self.max_bytes = max_bytes
        self.trimmed_rows = 0  # rows removed to stay under max_bytes, since the journal was opened
        self._conn = conn
        self._errors = errors
        self._forget_blobs = forget_blobs
        self._page_size = self._pragma("page_size")
        # The database's size as last read, when, and how much the batches written since could
        # have added at most (upper bounds: see wrote).
        self._size_read = 0
        self._size_read_at = -math.inf
        self._size_growth = 0
        # Rows per bounded table, as far as the writer knows; it may over-count (upserts of an
        # existing id count again) but never under-counts rows written by this journal, so
        # comparing it with max_runs is a cheap trigger for an exact count and a trim.
        self._approx: dict[str, int] = {
            table: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]) for table in INSERTS
        }

    def would_pass_limit(self, incoming: int) -> bool:
        """Whether writing `incoming` more bytes could take the database past TRIM_AT of its limit."""
        return self.size_bound() + incoming > TRIM_AT * self.max_bytes

    def wrote(self, rows: Mapping[str, int], written: int, blobs: int) -> None:
        """Count a batch in: `rows` rows per table and `blobs` blobs holding `written` bytes. The
        size bound grows by twice the bytes (B-tree pages are at least half full) plus, per row
        and per batch, a page for each level of each table and index an insert can split."""
        count = blobs
        for table, n in rows.items():
            self._approx[table] += n
            count += n
        self._size_growth += 2 * written + (count + 1) * _SPLIT_PAGES * self._page_size

    def trim(self, room: int = 0) -> None:
        """Keep each bounded table to the newest `max_runs` rows and the database under
        `max_bytes` (with `room` bytes to spare, for a batch about to be written); drop the blobs
        no row uses any more. Never raises: a failed trim is noted and tried again next batch."""
        try:
            trimmed = self._trim_rows()
            if self.size_bound() + room > TRIM_AT * self.max_bytes:
                self._trim_bytes(room)
                trimmed = True
            if trimmed:
                self._collect_blobs()
                self._shrink()
                self._size_read_at = -math.inf  # read it again: the file shrank
        except Exception as exc:  # retry on the next batch
            rollback(self._conn)
            self._errors.note(f"journal retention trim failed: {exc!r}")

    def size_bound(self) -> int:
        """At least the database's size: its size as read, plus at most what was written since.
        Read again (exactly) once a second, or when the bound comes near `TRIM_AT`: reading it for
        every batch cost as much as a third of writing a stage's two rows."""
        bound = self._size_read + self._size_growth
        now = time.monotonic()
        if now - self._size_read_at >= SIZE_READ_EVERY_S or bound > TRIM_AT * self.max_bytes * 0.9:
            self._size_read, self._size_read_at, self._size_growth = self._file_bytes(), now, 0
            bound = self._size_read
        return bound

    def _pragma(self, name: str) -> int:
        return int(self._conn.execute(f"PRAGMA {name}").fetchone()[0])

    def _file_bytes(self) -> int:
        return self._pragma("page_count") * self._page_size

    def _used_bytes(self) -> int:
        return (self._pragma("page_count") - self._pragma("freelist_count")) * self._page_size

    def _trim_rows(self) -> bool:
        conn = self._conn
        trimmed = False
        for table in INSERTS:
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
        conn = self._conn
        target = max(TRIM_TO * self.max_bytes - room, 0)
        union = " UNION ALL ".join(f"SELECT started_at, id FROM {table}" for table in INSERTS)
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
            for table in INSERTS:
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
        conn = self._conn
        if not in_transaction:
            conn.execute("BEGIN IMMEDIATE")
        oldest = [
            conn.execute(f"SELECT MIN(started_at) FROM {table}").fetchone()[0]
            for table in INSERTS
            if BLOB_FIELDS[table]
        ]
        present = [at for at in oldest if at is not None]
        if present:
            conn.execute("DELETE FROM blobs WHERE last_used < ?", (min(present),))
        else:
            conn.execute("DELETE FROM blobs")
        if not in_transaction:
            conn.execute("COMMIT")
        self._forget_blobs()  # some of what it remembers as stored may be gone

    def _shrink(self) -> None:
        """Give the pages freed by a trim back to the file system, and keep the WAL small."""
        if self._pragma("freelist_count") * self._page_size >= (1 - TRIM_TO) * self.max_bytes / 4:
            # executescript steps the pragma to the end (execute() would free a single page).
            self._conn.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")
