"""What a record becomes in the journal: a snapshot taken when it is handed over, then, on the
writer thread, the row of its table (the few columns copied from it for filtering, and `data`, the
whole record as JSON)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from engine.core import strictjson
from engine.protocol.records import JSONDict, Record
from engine.protocol.records.base import field_names

Row = tuple[Any, ...]

INTENT_KEY: Final = "$intent"  # in a running tool call's data: what it is about to change


def encode_json(value: Any) -> str:
    """JSON text that is guaranteed to encode to UTF-8 and holds no NaN (strictjson.dumps)."""
    return strictjson.dumps(value)


def col(value: str | None) -> str | None:
    """A string fit for a TEXT column (lone surrogates backslash-escaped); used for filter
    columns and for filter parameters alike, so the two always compare equal."""
    return None if value is None else strictjson.escaped(value)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def _run_row(d: JSONDict) -> Row:
    return (
        col(d["id"]),
        float(d["started_at"]),
        col(d.get("stage")),
        col(d.get("hook")),
        col(d.get("session")),
        col(d.get("dispatch_id")),
        1 if d.get("error") is None else 0,
        col(d.get("error")),
        _int(d.get("exit_code")),
        col(d.get("signal")),
        _num(d.get("duration_ms")),
        encode_json(d),
    )


def _dispatch_row(d: JSONDict) -> Row:
    return (
        col(d["id"]),
        float(d["started_at"]),
        col(d.get("stage")),
        col(d.get("session")),
        1 if d.get("recovered") else 0,
        len(d.get("failed") or ()),
        _num(d.get("duration_ms")),
        encode_json(d),
    )


def _tool_row(d: JSONDict) -> Row:
    return (
        col(d["id"]),
        float(d["started_at"]),
        col(d.get("tool")),
        col(d.get("session")),
        col(d.get("call_id")),
        1 if d.get("error") is None else 0,
        1 if INTENT_KEY in d else 0,
        encode_json(d),
    )


def _event_row(d: JSONDict) -> Row:
    return (col(d["id"]), float(d["started_at"]), col(d["kind"]), encode_json(d))


# The row of each batch-written table, in the order of its INSERT's columns (schema.INSERTS).
ROW_BUILDERS: Final[dict[str, Callable[[JSONDict], Row]]] = {
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
    for name in field_names(type(record)):
        value = getattr(record, name)
        if isinstance(value, list):
            value = list(value)
        elif isinstance(value, dict):
            value = dict(value)
        elif isinstance(value, Record):
            value = value.to_dict()
        out[name] = value
    return out
