"""Words that are the clock: a time, a date or an epoch number that reads as the moment a replay ran.

The volatile check (engine.replay.worddiff) finds what differs between two runs of the same version.
Two runs within the same second print the same `10:00:05`; the version after, a second later, prints
`10:00:06`, which the check cannot have seen vary. A value that reads as a moment while the replay ran
(within `SLACK_S` of it, in UTC or in local time) is the clock, whatever the version: a difference made
of such values only is no change. A time that is not then (`09:00` in a prompt, yesterday's date) is
text like any other.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass
from typing import Final

SLACK_S: Final = 120.0  # a moment this close to the replay's run reads as its clock
DAY_S: Final = 86_400

_ISO: Final = re.compile(
    r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?"
    r"(?:\s?(Z|UTC|GMT|[+-]\d{2}:?\d{2}))?(?!\d)"
)
_TIME: Final = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2}):(\d{2})(?:[.,]\d+)?(?![\d:])")
_DATE: Final = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")
_EPOCH: Final = re.compile(r"(?<![\d.])(1\d{9}(?:\.\d+)?|1\d{12}|1\d{15}|1\d{18})(?![\d.])")


@dataclass(frozen=True)
class Window:
    """When the runs compared happened (epoch seconds)."""

    start: float
    end: float

    def holds(self, moment: float) -> bool:
        return self.start - SLACK_S <= moment <= self.end + SLACK_S

    def holds_time_of_day(self, seconds: int) -> bool:
        """Whether a time of day (seconds after midnight) falls in the window, in UTC or local time."""
        for east in {0, time.localtime(self.start).tm_gmtoff}:  # a zone's offset east of UTC
            midnight = (self.start + east) // DAY_S * DAY_S - east
            if any(self.holds(midnight + days * DAY_S + seconds) for days in (-1, 0, 1)):
                return True
        return False

    def dates(self) -> set[tuple[int, int, int]]:
        found = set()
        for moment in (self.start, self.end):
            for parts in (time.gmtime(moment), time.localtime(moment)):
                found.add((parts.tm_year, parts.tm_mon, parts.tm_mday))
        return found


def _iso_moments(match: re.Match[str]) -> list[float]:
    """The moments an ISO date and time can mean: as its zone says, else in UTC or in local time."""
    year, month, day, hour, minute = (int(match.group(i)) for i in range(1, 6))
    second = int(match.group(6) or 0)
    try:
        fields = (year, month, day, hour, minute, second)
        utc = calendar.timegm((*fields, 0, 0, 0))
        local = time.mktime((*fields, 0, 0, -1))
    except (OverflowError, ValueError):
        return []
    zone = match.group(7)
    if zone in ("Z", "UTC", "GMT"):
        return [utc]
    if zone:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        return [utc - sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)]
    return [utc, local]


def clock_spans(text: str, window: Window) -> list[tuple[int, int]]:
    """Where `text` holds a moment of `window`: (start, end) character offsets."""
    spans: list[tuple[int, int]] = []
    for match in _ISO.finditer(text):
        if any(window.holds(m) for m in _iso_moments(match)):
            spans.append(match.span())
    for match in _TIME.finditer(text):
        hour, minute, second = (int(match.group(i)) for i in range(1, 4))
        if (
            hour < 24
            and minute < 60
            and second < 61
            and window.holds_time_of_day(hour * 3600 + minute * 60 + second)
        ):
            spans.append(match.span())
    dates = window.dates()
    for match in _DATE.finditer(text):
        if tuple(int(match.group(i)) for i in range(1, 4)) in dates:
            spans.append(match.span())
    for match in _EPOCH.finditer(text):
        digits = match.group(1).split(".")[0]
        scale = {10: 1.0, 13: 1e3, 16: 1e6, 19: 1e9}[len(digits)]
        if window.holds(float(match.group(1)) / scale):
            spans.append(match.span())
    return spans


def clock_tokens(tokens: list[str], window: Window | None) -> set[int]:
    """The indexes of the tokens whose words lie inside a moment of `window` (their trailing white
    space aside); none without a window."""
    if window is None:
        return set()
    text = "".join(tokens)
    spans = clock_spans(text, window)
    if not spans:
        return set()
    found: set[int] = set()
    at = 0
    for index, token in enumerate(tokens):
        word_end = at + len(token.rstrip())
        if word_end > at and any(start <= at and word_end <= end for start, end in spans):
            found.add(index)
        at += len(token)
    return found
