"""Work the engine starts without waiting for it (observational stages, notifications, actions): kept
track of so that it is finished (or, past a grace period, cancelled) when the engine stops, and its
failures reported."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.protocol.events import EventKind
from engine.protocol.records import Notice

log = logging.getLogger("evolve.background")

CLOSE_GRACE_S = 10.0  # how long a stopping engine lets accepted work finish before cancelling it


class Background:
    def __init__(self, bus: EventBus, activity: Activity | None = None) -> None:
        self._bus = bus
        self._activity = activity
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(
        self, coro: Coroutine[Any, Any, Any], what: str = "background work", busy: bool = False
    ) -> None:
        """Run `coro` without waiting for it. `busy`: the engine counts as busy from now until it is
        done (work accepted from opencode, which a caller may wait for through the status)."""
        task = asyncio.create_task(coro, name=what)
        self._tasks.add(task)
        if busy and self._activity is not None:
            running = self._activity.running()
            running.__enter__()
            task.add_done_callback(lambda _t: running.__exit__(None, None, None))
        task.add_done_callback(self._done)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed: %r", task.get_name(), task.exception())
            self._bus.publish(Notice(task.get_name(), repr(task.exception())), EventKind.ERROR)

    async def close(self, grace: float = CLOSE_GRACE_S) -> None:
        """Let what was accepted finish (up to `grace` seconds), then cancel what is left."""
        if self._tasks and grace > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), grace)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
