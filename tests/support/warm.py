"""Hooks run through engine.runner directly, warm or cold as the test run says (tests/conftest.py)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from engine.warm.starts import WarmStarts

VARIABLE = "EVOLVE_HOOK_WARM_START"
T = TypeVar("T")


def warm_enabled() -> bool:
    """Whether this test run has warm starts on (the pytest option sets the variable)."""
    return os.environ.get(VARIABLE, "1").strip().lower() not in ("0", "false", "no", "off")


class WarmLoop:
    """An event loop in a thread of its own with one WarmStarts, so that the ready interpreters
    outlive each test's own event loop (every test then runs its hooks warm, not just a second run)."""

    def __init__(self, scratch: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="warm-starts", daemon=True)
        self._thread.start()
        self.warm = WarmStarts(scratch)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.run(self.warm.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
