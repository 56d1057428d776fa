"""JSON as the engine takes it in from hooks and clients, and gives it out again.

In: what JavaScript's `JSON.parse` accepts (no `NaN`, no `Infinity`, no number too large for a
float), nested at most `MAX_DEPTH` levels. Anything else is refused with `Rejected`, whose message
says why, so that a hook's output or a request body can never put into the engine a value it
cannot encode again, or one so deep that handling it exhausts Python's recursion limit.

Out: `dumps` never fails on a value the engine holds: a float that is not finite (a value that
came in before this check, or from Python code) becomes `null`.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

MAX_DEPTH: Final = 100
"""Levels of nested arrays and objects a document may have (`[[1]]` has two)."""


class Rejected(ValueError):
    """A JSON text the engine does not take: not JSON, a non-finite number, or nested too deeply."""


class NotJSON(Rejected):
    """Not JSON at all (a syntax error, bytes that are not UTF-8, an integer of too many digits)."""


def _constant(name: str) -> Any:
    raise Rejected(f"{name} is not a JSON value")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Rejected(f"the number {text[:40]} is too large")
    return value


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of a JSON value, counted up to `limit + 1` (then it stops looking)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def loads(text: str | bytes) -> Any:
    """Parse `text`; Rejected (a ValueError) with the reason when the engine does not take it."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float)
    except Rejected:
        raise
    except RecursionError:
        raise Rejected(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits
        raise NotJSON(str(exc)) from None
    # Fewer brackets than the limit cannot nest deeper than it: most documents skip the walk.
    brackets = (
        text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")
    )
    if brackets > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise Rejected(f"nested deeper than {MAX_DEPTH} levels")
    return value


def finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None (a copy where needed)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def escaped(value: str) -> str:
    """`value` as text that encodes: each lone surrogate (which UTF-8 cannot hold) written as its
    `\\uXXXX` escape, everything else as it is. For what names things (a session id, a call id),
    which ends up in paths, URLs, git and the journal's columns."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", errors="backslashreplace").decode("utf-8")
    return value


def _default(obj: object) -> Any:
    """Last resort for values json can't encode (sets, bytes, paths...): keep something useful."""
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    return str(obj)


def dumps(value: Any, separators: tuple[str, str] | None = None) -> str:
    """JSON text of `value` that never fails on a value the engine holds and always encodes
    to UTF-8.

    Non-ASCII is kept as is (compact for large text), except when the value holds lone surrogates
    (e.g. from a `"\\ud800"` escape): then everything is \\u-escaped, which `json.loads` turns back
    into the very same string. A float that is not finite becomes `null`. `separators` as for
    `json.dumps` (`(",", ":")`: no blanks).
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_default, separators=separators)
    except ValueError:
        value = finite(value)
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_default, separators=separators)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(
                value, ensure_ascii=True, allow_nan=False, default=_default, separators=separators
            )
    return text
