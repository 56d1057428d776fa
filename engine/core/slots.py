"""A limit on heavy work running at once: at most `size` pieces (by default one per core), the rest
waiting their turn in the order they came. The behaviour checks hold a slot per scenario run; any other
heavy work (replays) can share the same `Slots`, so that together they never ask for more than the
machine has."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator


class Slots:
    def __init__(self, size: int | None = None) -> None:
        self.size = max(1, size or os.cpu_count() or 1)
        self._free = asyncio.Semaphore(self.size)  # asyncio queues the waiters in order
        self.waiting = 0  # pieces of work waiting for a slot now
        self.running = 0

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """One slot, for as long as the block runs (waiting for it first, when none is free)."""
        self.waiting += 1
        try:
            await self._free.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._free.release()
