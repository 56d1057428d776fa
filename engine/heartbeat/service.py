"""The heartbeat: on a timer the hooks are asked for a prompt, which is sent to a dedicated opencode
session, so the agent acts without a person prompting it.

Ticks never overlap (a manual fire waits for a running tick), the next tick comes `heartbeat_ms`
after the previous one finished, and every tick, skip and cleanup is published as an event and kept
in the state file's `heartbeat_last`.

`Heartbeat` (here) runs the ticks one at a time and keeps their record; the parts: `cadence` (the
interval in force: the config's or the agent's choice), `schedule` (the timer, on an injectable
clock), `tick` (what one tick does), `beats` (what the agent reads of its heartbeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from engine.changes.commits import Commits
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.heartbeat import beats
from engine.heartbeat.cadence import MIN_CHOSEN_MS, Cadence
from engine.heartbeat.schedule import Clock, HeartbeatState, RealClock, Schedule
from engine.heartbeat.tick import Dispatch, Explain, Opencode, Tick
from engine.journal.store import Journal
from engine.opencode.client import OpencodeUnreachable
from engine.opencode.sessions import SessionStore
from engine.protocol.records import HeartbeatChanged, HeartbeatStatus, TickResult
from engine.workspace.config import Config
from engine.workspace.layout import StateFile

# Names this module had before it was split, for those that import them from here.
__all__ = [
    "MIN_CHOSEN_MS",
    "RECENT_BEATS",
    "Clock",
    "Dispatch",
    "Heartbeat",
    "HeartbeatState",
    "Opencode",
    "RealClock",
]

log = logging.getLogger("evolve.heartbeat")

RECENT_BEATS = 10  # the recent beats an hcp hook gets as the heartbeat stage's `history`


class Heartbeat:
    def __init__(
        self,
        *,
        config: Callable[[], Config],
        state: StateFile,
        journal: Journal | None,
        bus: EventBus,
        dispatch: Dispatch,
        sessions: SessionStore,
        after_result: Callable[[dict[str, Any], str | None], None],
        commits: Commits,
        model: Callable[[], dict[str, str] | None],
        prompt: Callable[[], str],
        activity: Activity,
        opencode: Opencode,
        clock: Clock | None = None,
        explain: Explain | None = None,
    ) -> None:
        """`explain`: the failures of a dispatch's failed hooks, with their cause (a degraded tick
        names them)."""
        self._config = config
        self._state_file = state
        self._journal = journal
        self._bus = bus
        self._model = model
        self._activity = activity
        self.clock: Clock = clock or RealClock()
        self.state = HeartbeatState()
        self._lock = asyncio.Lock()
        self._cadence = Cadence(config, state)
        self._schedule = Schedule(
            self.clock, self.state, lambda: self._cadence.interval_ms, lambda: self.paused, self.fire
        )
        self._tick = Tick(
            config=config,
            state=state,
            journal=journal,
            dispatch=dispatch,
            sessions=sessions,
            after_result=after_result,
            commits=commits,
            model=model,
            prompt=prompt,
            opencode=opencode,
            recent_beats=self.recent_beats,
            cleaned_up=lambda cleanup: self._publish("cleanup", cleanup=cleanup),
            explain=explain,
        )
        self.on_tick: list[Callable[[TickResult], Awaitable[None] | None]] = []
        last = state.read().get("heartbeat_last")
        if isinstance(last, dict):
            with contextlib.suppress(TypeError):
                self.state.last = TickResult.from_dict(last)

    @property
    def opencode(self) -> Opencode:
        return self._tick.opencode

    @property
    def tokens(self) -> int | None:
        """The heartbeat session's token total, as last measured."""
        return self._tick.tokens

    # ---- schedule ---------------------------------------------------------------------------

    @property
    def interval_ms(self) -> int:
        """The interval in force (`Cadence.interval_ms`); negative: no timer."""
        return self._cadence.interval_ms

    def choice(self) -> dict[str, Any] | None:
        """The agent's choice of its own cadence, if it made one."""
        return self._cadence.choice()

    @property
    def interval_source(self) -> str:
        """Where the interval comes from: `config`, `agent`, or `config (disabled)`, which wins."""
        return self._cadence.source

    @property
    def enabled(self) -> bool:
        return self.interval_ms >= 0

    @property
    def paused(self) -> bool:
        return bool(self._state_file.read().get("heartbeat_paused"))

    def start(self) -> None:
        self._schedule.start()

    async def stop(self) -> None:
        await self._schedule.stop()

    def connected(self) -> None:
        """opencode is reachable: the first tick comes `heartbeat_ms` from now."""
        if self._schedule.connect():
            self._publish("connected")

    def disconnected(self) -> None:
        """No opencode is reachable any more: no tick until one connects again."""
        if self._schedule.disconnect():
            self._publish("disconnected")

    def reschedule(self) -> None:
        """The config changed: the next tick is `heartbeat_ms` (the new value) after the last tick
        of this engine ended, or after opencode connected; never in the past."""
        self._schedule.reschedule()

    async def pause(self) -> None:
        self._state_file.update({"heartbeat_paused": True})
        self._publish("paused")
        self._schedule.wake()

    async def resume(self) -> None:
        self._state_file.update({"heartbeat_paused": False})
        self._schedule.resumed()
        self._publish("resumed")
        self._schedule.wake()

    # ---- a tick -----------------------------------------------------------------------------

    async def fire(self, trigger: str = "manual") -> TickResult:
        """Run one tick now (after a running one finishes); the next timer tick is then
        `heartbeat_ms` after this one."""
        async with self._lock:
            if trigger == "timer" and not self._schedule.due():
                # A manual tick ran while this one waited: the timer starts over from that one.
                return self.state.last or TickResult(trigger, self.clock.now(), "skipped", "superseded")
            self.state.running = True
            self._publish("tick_started", trigger=trigger)
            result = TickResult(trigger=trigger, started_at=self.clock.now())
            started = time.perf_counter()
            try:
                with self._activity.running():
                    await self._tick.run(result)
            except OpencodeUnreachable as exc:
                result.outcome, result.reason = "skipped", f"opencode unreachable: {exc}"
            except asyncio.CancelledError:
                result.outcome, result.reason = "cancelled", "the engine stopped during the tick"
                raise
            except Exception as exc:
                log.exception("heartbeat tick failed")
                result.outcome, result.reason = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                result.duration_ms = (time.perf_counter() - started) * 1000
                self.state.running = False
                self.state.last = result
                self.state.ticks += 1
                self.state.history = [*self.state.history[-49:], result]
                self._state_file.update({"heartbeat_last": result.to_dict()})
                if self._journal is not None:
                    self._journal.record_event("heartbeat", result.to_dict(), at=result.started_at)
                self._schedule.schedule_from(self.clock.now())
            self._publish("tick", tick=result, trigger=result.trigger)
            for callback in self.on_tick:
                outcome = callback(result)
                if asyncio.iscoroutine(outcome):
                    await outcome
            return result

    # ---- what the agent sees of its heartbeat (the evolve_heartbeat_* tools) ----------------

    def recent_beats(self, limit: int = RECENT_BEATS) -> list[dict[str, Any]]:
        """The last ticks, oldest first: `{at, trigger, outcome, reason, user, session}`."""
        return beats.recent_beats(beats.last_ticks(self._journal, self.state.history, limit))

    def choose(self, interval_ms: int | None, enabled: bool | None, reset: bool, session: str | None) -> str:
        """The agent sets its own cadence; kept in the state file, so a restarted engine keeps it."""
        error = self._cadence.choose(interval_ms, enabled, reset, session)
        if error is not None:
            return error
        self.reschedule()
        self._publish("chosen")
        return self.describe()

    def describe(self) -> str:
        """The heartbeat as the agent reads it."""
        return beats.describe(self.status())

    def history_text(self, limit: int) -> str:
        return beats.history_text(self.recent_beats(limit))

    def ticks(self, limit: int = 50) -> list[TickResult]:
        """The last ticks, newest first, as the journal keeps them (this engine's own without one).
        Waits for the journal's writer, so that the ticks already announced are there: call it off
        the event loop."""
        if self._journal is not None:
            with contextlib.suppress(TimeoutError):
                self._journal.flush(5.0)
        return beats.last_ticks(self._journal, self.state.history, limit)

    # ---- status -----------------------------------------------------------------------------

    def _publish(
        self,
        event: str,
        *,
        tick: TickResult | None = None,
        cleanup: dict[str, Any] | None = None,
        trigger: str | None = None,
    ) -> None:
        self._bus.publish(HeartbeatChanged(event, self.status(), tick, cleanup, trigger))

    def status(self) -> HeartbeatStatus:
        config = self._config()
        state = self._state_file.read()
        now = self.clock.now()
        return HeartbeatStatus(
            enabled=self.enabled,
            interval_ms=self.interval_ms,
            interval_source=self.interval_source,
            connected=self._schedule.connected,
            paused=bool(state.get("heartbeat_paused")),
            running=self.state.running,
            next_at=self.state.next_at,
            next_in_s=None if self.state.next_at is None else max(self.state.next_at - now, 0.0),
            count=int(state.get("heartbeat_count") or 0),
            count_threshold=config.heartbeat_cleanup_count,
            tokens=self.tokens,
            tokens_threshold=config.heartbeat_cleanup_tokens,
            cleanup=config.heartbeat_cleanup,
            session=state.get("heartbeat_session"),
            time=state.get("heartbeat_time"),
            model=self._model(),
            last=self.state.last,
            connected_at=self._schedule.connected_at if self._schedule.connected else None,
            degraded=last.reason if (last := self.state.last) and last.outcome == "degraded" else None,
        )
