"""The error of the operator's actions on changes."""

from __future__ import annotations

from typing import Any


class ChangeError(RuntimeError):
    """An operator action that cannot be done; the message says why and what to do. `details` is
    what a program needs to act on it (e.g. the later commits that a revert conflicts with)."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}
