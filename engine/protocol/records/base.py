"""What every record shares: a plain JSON-able dict (`to_dict`) and back (`from_dict`, which ignores
fields it does not know, so that an older client can read a newer engine's records)."""

from __future__ import annotations

import copy
import marshal
import os
import time
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

JSONDict = dict[str, Any]
_R = TypeVar("_R")


def new_id(prefix: str) -> str:
    """A sortable, unique id: `<prefix>_<ms since epoch, hex>_<random>`."""
    # 8 random hex digits, as the first 8 of a uuid4's were, without making a UUID (several per run).
    return f"{prefix}_{int(time.time() * 1000):011x}{os.urandom(4).hex()}"


_NAMES: dict[type, tuple[str, ...]] = {}
_NAME_SETS: dict[type, frozenset[str]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """The names of the dataclass `cls`'s fields, in order: fixed once the class is made, so looked
    up once per class rather than for every record converted (events and journal rows, per run)."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _name_set(cls: type) -> frozenset[str]:
    names = _NAME_SETS.get(cls)
    if names is None:
        names = _NAME_SETS[cls] = frozenset(field_names(cls))
    return names


def known_fields(cls: type[_R], data: JSONDict) -> JSONDict:
    """The fields of `data` that the record `cls` has."""
    names = _name_set(cls)
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
        return {name: _plain(getattr(value, name)) for name in field_names(type(value))}
    return copy.deepcopy(value)


class Record:
    """A dataclass that converts to and from a JSON-able dict."""

    def to_dict(self) -> JSONDict:
        """A snapshot: the record's fields as plain data, deep-copied (as dataclasses.asdict)."""
        return {name: _plain(getattr(self, name)) for name in field_names(type(self))}

    @classmethod
    def from_dict(cls: type[_R], data: JSONDict) -> _R:
        return cls(**known_fields(cls, data))
