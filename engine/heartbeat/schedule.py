"""When the heartbeat beats: the timer that fires a tick `heartbeat_ms` after the previous one
finished (or after opencode connected), never while no opencode is connected or while paused. Time
comes from an injectable clock, so the scheduling is tested without sleeping."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from engine.protocol.records import TickResult

log = logging.getLogger("evolve.heartbeat")


class Clock(Protocol):
    def now(self) -> float: ...

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        """Wait until `event` is set (True) or `timeout` seconds pass (False); None waits forever."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False


@dataclass
class HeartbeatState:
    running: bool = False
    next_at: float | None = None
    last: TickResult | None = None
    ticks: int = 0
    history: list[TickResult] = field(default_factory=list)


class Schedule:
    """The timer: sets `state.next_at` and fires `fire("timer")` when it comes.

    `interval_ms()` is the interval in force (negative: no timer), `paused()` the operator's pause.
    """

    def __init__(
        self,
        clock: Clock,
        state: HeartbeatState,
        interval_ms: Callable[[], int],
        paused: Callable[[], bool],
        fire: Callable[[str], Awaitable[object]],
    ) -> None:
        self._clock = clock
        self._state = state
        self._interval_ms = interval_ms
        self._paused = paused
        self._fire = fire
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.connected = False
        self.connected_at = 0.0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def connect(self) -> bool:
        """opencode is reachable: the first tick comes `heartbeat_ms` from now. False if it was."""
        if self.connected:
            return False
        self.connected = True
        self.connected_at = self._clock.now()
        self.schedule_from(self.connected_at)
        return True

    def disconnect(self) -> bool:
        """No opencode is reachable any more: no tick until one connects again. False if none was."""
        if not self.connected:
            return False
        self.connected = False
        self.schedule_from(self._clock.now())
        return True

    def reschedule(self) -> None:
        """The interval changed: the next tick is the new interval after the last tick of this
        engine ended, or after opencode connected; never in the past."""
        last = self._state.last if self._state.ticks else None
        base = last.started_at + last.duration_ms / 1000 if last else self.connected_at
        self.schedule_from(base)
        if self._state.next_at is not None:
            self._state.next_at = max(self._state.next_at, self._clock.now())

    def schedule_from(self, moment: float) -> None:
        """The next tick one interval after `moment` (none when disabled or not connected)."""
        if self._interval_ms() >= 0 and self.connected:
            self._state.next_at = moment + self._interval_ms() / 1000
        else:
            self._state.next_at = None
        self._wake.set()

    def resumed(self) -> None:
        """The operator resumed: a tick missed while paused comes now."""
        if self._state.next_at is not None and self._state.next_at < self._clock.now():
            self.schedule_from(self._clock.now())

    def wake(self) -> None:
        """Look at the schedule again (the pause changed)."""
        self._wake.set()

    def due(self) -> bool:
        """Whether a timer tick is due now (not paused, scheduled, its time come)."""
        next_at = self._state.next_at
        return next_at is not None and not self._paused() and self._clock.now() >= next_at

    async def _loop(self) -> None:
        while True:
            next_at = self._state.next_at
            timeout = None if next_at is None or self._paused() else max(next_at - self._clock.now(), 0.0)
            self._wake.clear()
            woken = await self._clock.wait(self._wake, timeout)
            if woken:
                continue
            if not self.due():
                continue
            try:
                await self._fire("timer")
            except Exception:  # a tick must never stop the timer
                log.exception("heartbeat tick failed")
