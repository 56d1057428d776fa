"""Turning engine data into text for the screen: times, durations, and bounded previews of data
that may be huge or garbage (a 10 MB prompt, binary output)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

PREVIEW_LIMIT = 64 * 1024  # characters of one field shown inline; the rest behind "see more"
MORE_LIMIT = 1024 * 1024  # characters shown by "see more"

Clock = Callable[[], float]


def clock_time(at: float | None, local: bool = False) -> str:
    if not at:
        return "-"
    return time.strftime("%H:%M:%S", time.localtime(at) if local else time.gmtime(at))


def date_time(at: float | None) -> str:
    if not at:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


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


def clean(text: str) -> str:
    """Make any text safe to show: control characters (other than newline and tab) become visible."""
    return "".join(
        ch if ch in "\n\t" or (ord(ch) >= 32 and ord(ch) != 127) else f"\\x{ord(ch):02x}" for ch in text
    )


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


def session_label(session: str | None) -> str:
    return session or "-"
