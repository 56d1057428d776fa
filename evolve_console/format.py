"""Turning engine data into text for the screen: times, durations, and bounded previews of data
that may be huge or garbage (a 10 MB prompt, binary output)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

PREVIEW_LIMIT = 64 * 1024  # characters of one field shown inline; the rest behind "see more"
MORE_LIMIT = 1024 * 1024  # characters shown by "see more"

Clock = Callable[[], float]


def clock_time(at: float | None) -> str:
    """`HH:MM:SS` in UTC, as every table shows times."""
    if not at:
        return "-"
    return time.strftime("%H:%M:%S", time.gmtime(at))


def date_time(at: float | str | None) -> str:
    """`YYYY-MM-DD HH:MM:SS UTC`, as every detail shows times; `at` is epoch seconds or an ISO 8601
    text (as the engine keeps the last heartbeat's time)."""
    if isinstance(at, str):
        try:
            seconds = datetime.fromisoformat(at).timestamp()
        except ValueError:
            return at
    else:
        seconds = at or 0.0
    if not seconds:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def ago(seconds: float) -> str:
    """How long ago, in the largest unit that says it: `45 s`, `3 min 5 s`, `2 h 10 min`."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def size(text: str | int) -> str:
    """`1,234 chars · ~309 tokens` for a text (or a number of characters); tokens are estimated at
    four characters each."""
    chars = text if isinstance(text, int) else len(text)
    return f"{chars:,} chars · ~{(chars + 3) // 4:,} tokens"


def short_id(session: str) -> str:
    """A session id shortened to its end, which is what tells ids of one opencode apart (they share
    a long prefix): `ses_1a2b…9f3c7d2e` -> `…9f3c7d2e`."""
    return session if len(session) <= 12 else "…" + session[-8:]


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def countdown(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def short(text: str | None, width: int) -> str:
    if not text:
        return ""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


# Control characters but newline and tab: what `clean` makes visible.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def _visible(found: re.Match[str]) -> str:
    return f"\\x{ord(found.group()):02x}"


def clean(text: str) -> str:
    """Make any text safe to show: control characters (other than newline and tab) become visible.
    (A regular expression: a run's output or a diff can be megabytes, shown character by character.)"""
    return _CONTROL.sub(_visible, text)


def preview(text: str, limit: int = PREVIEW_LIMIT) -> tuple[str, int]:
    """The first `limit` characters (cleaned) and how many more there are."""
    if len(text) <= limit:
        return clean(text), 0
    return clean(text[:limit]), len(text) - limit


def as_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def session_label(session: str | None, title: str | None = None) -> str:
    """How a session is named in tables: its title, else the end of its id."""
    if not session:
        return "-"
    return title or short_id(session)
