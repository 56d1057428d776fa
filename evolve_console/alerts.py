"""What the console tells the operator without being asked, and what it keeps of it.

An `Alert` is one notice (a hook that started failing, a change held for review, a warning of the
engine, the answer to a command): its text whole, the change it names, the commit a revert would
undo, and how long its toast stays: never more than a minute, unless it holds a decision (a change
that awaits review), which stays until it is decided or closed. `Alerts` keeps the recent ones, so
that a toast gone (or cut, for a long one) can be read whole again, and answers which change the
newest one on screen names (the keys that select it and revert it act on that one). The alerts the
engine's records raise are made here too (`failure_alert`, `notice_alert`, `held_alert`, ...).

Plain data, no Textual: the notifier shows an alert as a toast; the main screen's keys read `Alerts`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final, Literal

from engine.protocol.records import Attempt, Failure, Notice, PendingChange

Severity = Literal["information", "warning", "error"]

TOAST_MAX_S: Final = 60.0  # a toast stays at most this long, unless it holds a decision
HELD_S: Final = 24 * 3600.0  # "until decided or closed": a toast that holds a decision
LONG: Final = 240  # characters beyond which a toast shows the beginning (the whole: the alerts dialog)
KEPT: Final = 50  # alerts kept to be read again
FAILURE_ALERT_S: Final = 30.0  # how long the toast of a hook that started failing stays
NOTICE_S: Final = 12.0  # how long the toast of a warning or an error the engine sent stays

# The keys that act on an alert, as its toast names them (bound by the main screen).
SHOW_KEY: Final = "j"
REVERT_KEY: Final = "R"
READ_KEY: Final = "N"

_PENDING_ID: Final = re.compile(r"\bchg_[0-9a-z]+\b")
_SHA: Final = re.compile(r"\b[0-9a-f]{7,40}\b")


@dataclass(frozen=True)
class Alert:
    """One notice to the operator. `change`: the change it names (a commit's sha, a held change's id,
    an attempt's id), which a key selects in view 5; `revert`: the commit a key reverts (asking
    first); `decision`: the held change it waits for a decision on (its toast stays until then)."""

    text: str
    severity: Severity = "information"
    title: str = ""  # what it is about, in a few words ("a hook started failing")
    timeout: float = 8.0
    change: str | None = None
    revert: str | None = None
    decision: str | None = None
    bell: bool = False
    at: float = 0.0  # when it was raised
    number: int = 0  # its place among the alerts raised, from 1

    @property
    def lasts(self) -> float:
        """How long its toast stays: its timeout, at most a minute, unless it holds a decision."""
        return HELD_S if self.decision else min(self.timeout, TOAST_MAX_S)

    @property
    def long(self) -> bool:
        return len(self.text) > LONG

    def toast_text(self) -> str:
        """The toast's text: the alert, or its beginning when it is long (the dialog has it whole)."""
        if not self.long:
            return self.text
        cut = self.text[: LONG - 1].rstrip()
        return f"{cut}… ({READ_KEY}: read it whole)"

    def toast_title(self) -> str:
        """The toast's title: what it is about, and the keys that act on it."""
        keys = []
        if self.change:
            keys.append(f"{SHOW_KEY}: show {short_key(self.change)}")
        if self.revert:
            keys.append(f"{REVERT_KEY}: revert it")
        return " · ".join([self.title, *keys] if self.title else keys)


@dataclass(frozen=True)
class Named:
    """A change something on screen names (an alert, a failed run's cause, a degraded tick): the
    key that selects it in view 5, and the commit a revert would undo (None: nothing to revert)."""

    change: str
    revert: str | None = None


def short_key(key: str) -> str:
    """A change as alerts name it: a commit by its first 7 characters, a held change by its id."""
    return key if key.startswith(("chg_", "att_")) or len(key) < 40 else key[:7]


def named_change(text: str, keys: Iterable[str]) -> str | None:
    """The change `text` names, among `keys` (the changes the console shows): a held change's id, or
    a commit's sha (or the start of one, 7 characters at least)."""
    known = list(keys)
    for found in _PENDING_ID.findall(text):
        if found in known:
            return str(found)
    for found in _SHA.findall(text):
        match = [key for key in known if key.startswith(found)]
        if len(match) == 1:
            return match[0]
    return None


class Alerts:
    """The alerts raised, newest last (at most KEPT), and which of them are on screen."""

    def __init__(self) -> None:
        self.recent: deque[Alert] = deque(maxlen=KEPT)
        self._closed_through = 0  # the toasts of the alerts up to this number were closed with a key
        self._decided: set[str] = set()  # held changes decided: their toasts are gone

    def add(self, alert: Alert, now: float) -> Alert:
        """Keep `alert`, numbered and timed."""
        number = self.recent[-1].number + 1 if self.recent else 1
        kept = replace(alert, at=now, number=number)
        self.recent.append(kept)
        return kept

    def on_screen(self, now: float) -> list[Alert]:
        """The alerts whose toast is still shown, oldest first."""
        return [
            a
            for a in self.recent
            if a.number > self._closed_through
            and now - a.at < a.lasts
            and not (a.decision is not None and a.decision in self._decided)
        ]

    def current(self, now: float) -> Alert | None:
        """The newest alert on screen that names a change (the one the keys act on)."""
        return next((a for a in reversed(self.on_screen(now)) if a.change), None)

    def close(self) -> None:
        """The toasts on screen were closed (with a key)."""
        self._closed_through = self.recent[-1].number if self.recent else 0

    def decided(self, change: str, now: float) -> bool:
        """The held change `change` was decided (or went stale): its toast goes. True when one of
        the toasts on screen was waiting for it."""
        waiting = any(a.decision == change for a in self.on_screen(now))
        self._decided.add(change)
        return waiting

    def newest_first(self) -> list[Alert]:
        return list(reversed(self.recent))


def failure_alert(failure: Failure, since: bool = False) -> Alert:
    """A hook failing, as the operator is alerted: the error's own last line and the change most
    likely behind it (the engine's words), with the keys to show that change and to revert it.
    `since`: the console found it failing when it started (no bell: it is not news)."""
    suspect = failure.suspect
    text = failure.message or f"hooks/{failure.hook} started failing at {failure.stage}: {failure.error}"
    if since:
        text = f"{text} [{failure.runs} failed run{'s' if failure.runs != 1 else ''} so far]"
    revertible = suspect is not None and suspect.origin != "initial"
    return Alert(
        text,
        "warning",
        title="a hook is failing" if since else "a hook started failing",
        timeout=FAILURE_ALERT_S,
        change=suspect.sha if suspect else None,
        revert=suspect.sha if revertible and suspect else None,
        bell=not since,
    )


def notice_alert(severity: str, notice: Notice, changes: Iterable[str]) -> Alert:
    """A warning or an error the engine sent, naming the change it is about when it names one."""
    text = f"{notice.source}: {notice.message}"
    return Alert(
        text,
        "error" if severity == "error" else "warning",
        timeout=NOTICE_S,
        change=named_change(notice.message, changes),
    )


def held_alert(pending: PendingChange) -> Alert:
    """A change held for review: its toast stays until it is decided, and rings the bell."""
    return Alert(
        f"a change awaits your review: {pending.message} ({pending.file})",
        "warning",
        title="held for review",
        change=pending.id,
        decision=pending.id,
        bell=True,
    )


def stale_alert(pending: PendingChange) -> Alert:
    """A held change that can no longer be installed (its file changed under it)."""
    return Alert(
        f"“{pending.message}” can no longer be installed: {pending.note or 'its file changed'}",
        "warning",
        title="a held change went stale",
        change=pending.id,
        timeout=20,
    )


def attempt_alert(attempt: Attempt) -> Alert:
    """An edit of the agent's that its test rejected."""
    return Alert(
        f"the agent tried “{attempt.message or attempt.file}” ({attempt.file}); its test "
        "rejected it, so nothing was installed",
        title="an attempt",
        change=attempt.id,
    )
