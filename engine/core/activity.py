"""What the engine is busy with, so that the file watcher can tell the engine's own changes (committed
when each operation ends) from someone else's edit (committed as an external change)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Activity:
    """Counts operations in progress; `quiet()` waits until none is."""

    def __init__(self) -> None:
        self._count = 0
        self._quiet = asyncio.Event()
        self._quiet.set()

    @property
    def busy(self) -> bool:
        return self._count > 0

    @contextmanager
    def running(self) -> Iterator[None]:
        """Marks the engine busy for the duration of the block."""
        release = self.hold()
        try:
            yield
        finally:
            release()

    def hold(self) -> Callable[[], None]:
        """Marks the engine busy until the returned function is called (once)."""
        self._count += 1
        self._quiet.clear()
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._count -= 1
            if self._count == 0:
                self._quiet.set()

        return release

    async def quiet(self) -> None:
        """Return once no operation is in progress (at once when none is)."""
        while self._count:
            await self._quiet.wait()
