"""What went wrong in the journal, kept for whoever asks (the engine's status, tests).

The journal never raises into the engine for a record it could not write or read back: the writer
and the readers note the problem here (and log it to `evolve.journal`) and go on.
"""

from __future__ import annotations

import logging

log = logging.getLogger("evolve.journal")


class ErrorLog:
    """The last problem and how many there were since the journal was opened. Noted from the
    writer thread and from readers without a lock: the figures are for people, and an error path
    is no place to wait for one."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.last: str | None = None
        self.count = 0

    def note(self, message: str, exc_info: bool = False) -> None:
        self.last = message
        self.count += 1
        log.error(message, exc_info=exc_info)
