"""Polling until something holds, with a deadline and a message that says what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float = 20.0,
    interval: float = 0.1,
    ignore: tuple[type[Exception], ...] = (),
) -> T:
    """Poll `probe` until it returns something truthy and return that; an exception of a type in
    `ignore` counts as "not yet". After `timeout` seconds: AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except ignore:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
