"""The changes the agent tried that were not installed (a hook edit its test rejected): recorded when
they happen, in the journal (events of kind `attempt`, so a restarted engine lists them too) and on
the event stream; without a journal, the last ones in memory."""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Final

from engine.core.bus import EventBus
from engine.journal.store import Journal
from engine.protocol.records import Attempt

KIND: Final = "attempt"
KEPT_IN_MEMORY: Final = 50
DIFF_LIMIT: Final = 200_000  # characters of the diff kept
OUTPUT_LIMIT: Final = 64 * 1024  # characters of the test's output kept
FLUSH_TIMEOUT_S: Final = 5.0


class Attempts:
    def __init__(self, journal: Journal | None, bus: EventBus) -> None:
        self._journal = journal
        self._bus = bus
        self._recent: deque[Attempt] = deque(maxlen=KEPT_IN_MEMORY)

    def record(self, attempt: Attempt) -> None:
        """Keep `attempt` (its diff and output bounded) and publish its summary."""
        if attempt.diff is not None and len(attempt.diff) > DIFF_LIMIT:
            attempt.diff = attempt.diff[:DIFF_LIMIT] + f"\n[… cut at {DIFF_LIMIT:,} characters]\n"
        if attempt.output is not None and len(attempt.output) > OUTPUT_LIMIT:
            attempt.output = "[… the start cut]\n" + attempt.output[-OUTPUT_LIMIT:]
        if self._journal is not None:
            self._journal.record_event(KIND, attempt.to_dict(), at=attempt.created_at)
        else:
            self._recent.appendleft(attempt)
        self._bus.publish(attempt.summary())

    def _all(self, limit: int) -> list[Attempt]:
        if self._journal is None:
            return list(self._recent)[:limit]
        with contextlib.suppress(TimeoutError):
            self._journal.flush(FLUSH_TIMEOUT_S)  # the attempts already announced are read back
        found = []
        for row in self._journal.events(kind=KIND, limit=limit):
            data = row.get("data")
            if isinstance(data, dict):
                try:
                    found.append(Attempt.from_dict(data))
                except TypeError:
                    continue  # a row of another shape
        return found

    def listed(self, limit: int = 200) -> list[Attempt]:
        """The newest `limit`, newest first, without their diff and output. (Reads the journal:
        call it off the event loop.)"""
        return [a.summary() for a in self._all(limit)]

    def get(self, attempt_id: str) -> Attempt | None:
        """One attempt, whole (among the newest thousand)."""
        return next((a for a in self._all(1000) if a.id == attempt_id), None)
