"""The JSON text of the large values every hook run sends, encoded once: the prompts (the same files
for every stage) and a session's history (the same list for every run until the session's next
message). A hook's stdin splices their kept text between the rest of its input, encoded as usual,
and the journal's blobs take the same text: each is encoded once per change, not once per run.

A history is kept by identity, and only one its owner declared never changed in place (`keep`:
the session store replaces a history, it never edits one, nor its messages); its text is made of
its messages' kept texts, so a history that grew encodes its new messages only. The kept values are held, so that an
id is never reused while it is remembered. The prompts are recognised by their items (a new dict
with the same strings encodes the same). The writer thread of the journal reads these too: the
tables change under a lock, and a lookup is one `dict.get`.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Any, Final

from engine.core import strictjson

KEPT: Final = 16
"""Histories whose text may be kept (the newest ones passed to `keep`)."""
CHARS_KEPT: Final = 16 * 2**20
"""Of each table of texts (whole values, a history's messages), at most this many characters."""
_FLAT_KEYS: Final = 64  # a dict of at most this many strings is recognised by its items


class _Texts:
    """key -> (the value, its text), the oldest let go past `count` entries or `chars` of text. The
    value is held, so that an id used as a key is never reused while it is here. Changed under
    `_lock`; read without it (one `dict.get`)."""

    def __init__(self, count: int, chars: int) -> None:
        self.entries: dict[Hashable, tuple[Any, str]] = {}
        self._count = count
        self._chars = chars
        self._size = 0

    def put(self, key: Hashable, value: Any, text: str) -> None:
        if len(text) > self._chars:
            return  # larger than the whole table: encoded again when asked for
        self.pop(key)
        self.entries[key] = (value, text)
        self._size += len(text)
        while len(self.entries) > self._count or self._size > self._chars:
            self.pop(next(iter(self.entries)))

    def pop(self, key: Hashable) -> None:
        gone = self.entries.pop(key, None)
        if gone is not None:
            self._size -= len(gone[1])


_lock = threading.Lock()
_held: dict[int, list[Any]] = {}  # id -> a list declared never changed in place (see `keep`)
_texts = _Texts(2 * KEPT, CHARS_KEPT)  # id(a held list) or a flat dict's items -> its text
_items = _Texts(4096, CHARS_KEPT)  # id(an item of a held list: a message) -> its text


def keep(value: list[Any]) -> None:
    """Declare that `value` is never changed in place from now on, nor what it holds: its text may
    be kept and reused."""
    with _lock:
        _held[id(value)] = value
        while len(_held) > KEPT:
            gone = _held.pop(next(iter(_held)))
            _texts.pop(id(gone))


def _key(value: Any) -> Hashable | None:
    """How a value whose text may be kept is known again, or None for one that is not."""
    kind = type(value)
    if kind is list:
        return id(value) if _held.get(id(value)) is value else None
    if kind is dict and 0 < len(value) <= _FLAT_KEYS and all(type(v) is str for v in value.values()):
        return tuple(value.items())
    return None


def kept_text(value: Any) -> str | None:
    """The JSON text of `value` (strictjson.dumps) when it is a value whose text may be kept (a
    history passed to `keep`, a dict of strings), encoded at its first use; None for any other."""
    key = _key(value)
    if key is None:
        return None
    found = _texts.entries.get(key)
    if found is not None and (found[0] is value or type(key) is tuple):
        return found[1]
    text = strictjson.dumps(value) if type(key) is tuple else _list_text(value)
    with _lock:
        if type(key) is tuple or _held.get(id(value)) is value:  # not let go meanwhile
            _texts.put(key, value, text)
    return text


def _list_text(value: list[Any]) -> str:
    """The text of a kept list, from the kept texts of its items: a history that grew by a message
    encodes that message only (the session store gives the messages it had their old objects)."""
    parts = []
    for item in value:
        found = _items.entries.get(id(item))
        if found is not None and found[0] is item:
            parts.append(found[1])
            continue
        text = strictjson.dumps(item)
        with _lock:
            _items.put(id(item), item, text)
        parts.append(text)
    return "[" + ", ".join(parts) + "]"


def dumps(doc: Mapping[str, Any], spliced: tuple[str, ...] = ("prompts", "history")) -> str:
    """strictjson.dumps of the object `doc`, keys in its order, with the kept text (`kept_text`) of
    the values under the keys `spliced` put in as it is instead of encoding them again. The same
    JSON value; the text differs from strictjson.dumps's only where a part holds a lone surrogate
    (that part alone, not the whole document, is then written with escapes)."""
    texts = {}
    for key in spliced:
        if key in doc:
            text = kept_text(doc[key])
            if text is not None:
                texts[key] = text
    if not texts:
        return strictjson.dumps(doc)
    out: list[str] = []
    rest: dict[str, Any] = {}
    for key, value in doc.items():
        text = texts.get(key)
        if text is None:
            rest[key] = value
            continue
        if rest:
            out.append(strictjson.dumps(rest)[1:-1])
            rest = {}
        out.append(f"{strictjson.dumps(key)}: {text}")
    if rest:
        out.append(strictjson.dumps(rest)[1:-1])
    return "{" + ", ".join(out) + "}"
