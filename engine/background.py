"""Work the engine starts without waiting for it (observational stages, notifications, actions): kept
track of so that it is finished or cancelled when the engine stops, and its failures reported."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from .bus import EventBus
from .protocol.events import EventKind
from .protocol.records import Notice

log = logging.getLogger("evolve.background")


class Background:
    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str = "background work") -> None:
        task = asyncio.create_task(coro, name=what)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed: %r", task.get_name(), task.exception())
            self._bus.publish(Notice(task.get_name(), repr(task.exception())), EventKind.ERROR)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
