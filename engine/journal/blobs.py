"""Large values stored once: a session's history and the prompts in a hook's input, a tool's
arguments, a stage's merged result (`BLOB_FIELDS`) go to the `blobs` table by content hash, and the
rows refer to them (`"$blobs"`), so the ten runs of a stage that all received the same history store
it once. A blob goes with the last row that used it (`retention`).

`BlobSplitter` takes them out of a record on the writer thread, `store` writes them with the batch
that uses them, `read` and `inflate` put them back when rows are read.
"""

from __future__ import annotations

import collections
import hashlib
import json
import sqlite3
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Final

from engine.core import jsontext
from engine.journal.rows import encode_json
from engine.protocol.records import JSONDict

BLOB_MIN_BYTES: Final = 2048
"""A value of a `BLOB_FIELDS` position at least this large (as JSON) is stored once, by hash."""
_FLAT_KEYS: Final = 64  # a dict of at most this many strings is recognised by its items (BlobSplitter)

# Where large values sit in each table's records: a top-level field (the whole value), or
# `field.*` (each value of that object field, e.g. each part of a hook's input).
BLOB_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "runs": ("input.*", "result", "stdout_lines"),
    "dispatches": ("context.*", "merged"),
    "tool_calls": ("args", "output", "context", "model_args", "tool_output"),
    "events": (),
}
BLOBS_KEY: Final = "$blobs"  # in a row's data: [[*path, hash], ...] of the values stored as blobs
_BLOB_UPSERT: Final = (
    "INSERT INTO blobs (hash, last_used, data) VALUES (?, ?, ?)"
    " ON CONFLICT (hash) DO UPDATE SET last_used = max(last_used, excluded.last_used)"
)


class PendingBlob:
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


class BlobSplitter:
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

    def _hash(self, value: Any, batch: dict[str, PendingBlob], at: float) -> str | None:
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
                    batch[digest] = PendingBlob(value, None, at)
                else:
                    pending.last_used = max(pending.last_used, at)
            return digest
        text = jsontext.kept_text(value) or encode_json(value)  # the text hook runs were sent
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest() if len(text) >= BLOB_MIN_BYTES else None
        self._seen[key] = (value, digest)
        if len(self._seen) > self.CACHE_SIZE:
            self._seen.popitem(last=False)
        if digest is not None:
            pending = batch.get(digest)
            if pending is None or pending.text is None:
                batch[digest] = PendingBlob(value, text, max(at, pending.last_used if pending else at))
            else:
                pending.last_used = max(pending.last_used, at)
        return digest

    def split(self, table: str, d: JSONDict, batch: dict[str, PendingBlob]) -> JSONDict:
        """The row to store for `d`: large values replaced by None and listed under `$blobs`
        (their text added to `batch`)."""
        at = float(d["started_at"])
        stored: JSONDict | None = None
        refs: list[list[str]] = []
        for spec in BLOB_FIELDS[table]:
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
        stored[BLOBS_KEY] = refs
        return stored


def inflate(rows: list[JSONDict], blobs: dict[str, Any]) -> None:
    """Put the stored blobs back where `BlobSplitter.split` took them from."""
    for d in rows:
        for ref in d.pop(BLOBS_KEY, None) or ():
            *path, digest = ref
            target: Any = d
            for key in path[:-1]:
                target = target.get(key) if isinstance(target, dict) else None
            if isinstance(target, dict):
                target[path[-1]] = blobs.get(digest)


def store(conn: sqlite3.Connection, blobs: dict[str, PendingBlob]) -> None:
    """Write a batch's blobs (inside its transaction): new ones whole, known ones their last use."""
    for digest, blob in blobs.items():
        if blob.text is None:
            updated = conn.execute(
                "UPDATE blobs SET last_used = max(last_used, ?) WHERE hash = ?", (blob.last_used, digest)
            ).rowcount
            if updated:
                continue
            blob.text = encode_json(blob.value)  # trimmed since it was last stored
        conn.execute(_BLOB_UPSERT, (digest, blob.last_used, blob.text))


def wanted(rows: Iterable[JSONDict]) -> set[str]:
    """The hashes of the blobs these rows refer to."""
    return {ref[-1] for d in rows for ref in d.get(BLOBS_KEY) or () if ref}


def read(
    conn: sqlite3.Connection, hashes: Iterable[str], note_error: Callable[[str], None]
) -> dict[str, Any]:
    """The stored values of these hashes; one that cannot be decoded is noted and left out."""
    ordered = sorted(hashes)
    out: dict[str, Any] = {}
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for digest, text in conn.execute(f"SELECT hash, data FROM blobs WHERE hash IN ({marks})", chunk):
            try:
                out[digest] = json.loads(text)
            except (ValueError, RecursionError) as exc:
                note_error(f"journal blob {digest} cannot be read: {exc!r}")
    return out
