"""What every record shares: a plain JSON-able dict (`to_dict`) and back (`from_dict`, which ignores
fields it does not know, so that an older client can read a newer engine's records)."""

from __future__ import annotations

import copy
import marshal
import time
import uuid
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

JSONDict = dict[str, Any]
_R = TypeVar("_R")


def new_id(prefix: str) -> str:
    """A sortable, unique id: `<prefix>_<ms since epoch, hex>_<random>`."""
    return f"{prefix}_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:8]}"


def known_fields(cls: type[_R], data: JSONDict) -> JSONDict:
    """The fields of `data` that the record `cls` has."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return {k: v for k, v in data.items() if k in names}


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """What dataclasses.asdict makes of a field's value (a deep copy, dataclasses turned into
    dicts), many times faster for plain data: a record's input can hold a whole session."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict or kind is list:
        try:  # a deep copy in C for what marshal takes: dict, list, tuple, str, numbers, None
            return marshal.loads(marshal.dumps(value))
        except (ValueError, RecursionError):
            pass  # something else inside (a dataclass, ...): one level at a time
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is list:
        return [_plain(v) for v in value]
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return copy.deepcopy(value)


class Record:
    """A dataclass that converts to and from a JSON-able dict."""

    def to_dict(self) -> JSONDict:
        """A snapshot: the record's fields as plain data, deep-copied (as dataclasses.asdict)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[_R], data: JSONDict) -> _R:
        return cls(**known_fields(cls, data))
