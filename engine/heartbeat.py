"""The heartbeat: on a timer the hooks are asked for a prompt, which is sent to a dedicated opencode
session, so the agent acts without a person prompting it.

Ticks never overlap (a manual fire waits for a running tick), the next tick comes `heartbeat_ms`
after the previous one finished, and every tick, skip and cleanup is published as an event and kept
in the state file's `heartbeat_last`. Time comes from an injectable clock, so the scheduling is
tested without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from .builtins import format_datetime

if TYPE_CHECKING:
    from .runtime import Engine

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


class Opencode(Protocol):
    """What a tick needs from opencode (the engine's bridge implements it over HTTP)."""

    async def busy_sessions(self) -> set[str]: ...
    async def create_session(self, title: str) -> str: ...
    async def session_tokens(self, session: str) -> int: ...
    async def summarize(self, session: str, model: dict[str, str]) -> None: ...
    async def archive(self, session: str) -> None: ...
    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None: ...


class Unreachable(RuntimeError):
    """opencode cannot be reached: the tick is skipped with this reason."""


@dataclass
class TickResult:
    trigger: str  # timer | manual
    started_at: float
    outcome: str = "ok"  # ok | skipped | failed | cancelled
    reason: str | None = None
    session: str | None = None
    model: dict[str, str] | None = None
    cleanup: dict[str, Any] | None = None  # {"mode", "due_to", "count", "tokens", "ok", "error"}
    user: str | None = None
    count: int | None = None
    tokens: int | None = None
    duration_ms: float = 0.0
    dispatch_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class HeartbeatState:
    running: bool = False
    next_at: float | None = None
    last: TickResult | None = None
    ticks: int = 0
    history: list[TickResult] = field(default_factory=list)


class Heartbeat:
    def __init__(self, engine: Engine, opencode: Opencode, clock: Clock | None = None) -> None:
        self.engine = engine
        self.opencode = opencode
        self.clock: Clock = clock or RealClock()
        self.state = HeartbeatState()
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connected = False
        self._connected_at = 0.0
        self.tokens: int | None = None  # the heartbeat session's token total, as last measured
        self.on_tick: list[Callable[[TickResult], Awaitable[None] | None]] = []
        last = engine.state.read().get("heartbeat_last")
        if isinstance(last, dict):
            with contextlib.suppress(TypeError):
                self.state.last = TickResult(**last)

    # ---- schedule ---------------------------------------------------------------------------

    @property
    def interval_ms(self) -> int:
        return self.engine.config.heartbeat_ms

    @property
    def enabled(self) -> bool:
        return self.interval_ms >= 0

    @property
    def paused(self) -> bool:
        return bool(self.engine.state.read().get("heartbeat_paused"))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def connected(self) -> None:
        """opencode is reachable: the first tick comes `heartbeat_ms` from now (§177)."""
        if not self._connected:
            self._connected = True
            self._connected_at = self.clock.now()
            self._schedule_from(self._connected_at)

    def reschedule(self) -> None:
        """The config changed: the next tick is `heartbeat_ms` (the new value) after the last tick
        of this engine ended, or after opencode connected; never in the past."""
        last = self.state.last if self.state.ticks else None
        base = last.started_at + last.duration_ms / 1000 if last else self._connected_at
        self._schedule_from(base)
        if self.state.next_at is not None:
            self.state.next_at = max(self.state.next_at, self.clock.now())

    def _schedule_from(self, moment: float) -> None:
        if self.enabled and self._connected:
            self.state.next_at = moment + self.interval_ms / 1000
        else:
            self.state.next_at = None
        self._wake.set()

    async def _loop(self) -> None:
        while True:
            next_at = self.state.next_at
            timeout = None if next_at is None or self.paused else max(next_at - self.clock.now(), 0.0)
            self._wake.clear()
            woken = await self.clock.wait(self._wake, timeout)
            if woken:
                continue
            if self.state.next_at is None or self.paused or self.clock.now() < self.state.next_at:
                continue
            try:
                await self.fire("timer")
            except Exception:  # a tick must never stop the timer
                log.exception("heartbeat tick failed")

    async def pause(self) -> None:
        self.engine.state.update({"heartbeat_paused": True})
        self.engine.bus.publish("heartbeat", {"event": "paused", **self.status()})
        self._wake.set()

    async def resume(self) -> None:
        self.engine.state.update({"heartbeat_paused": False})
        if self.state.next_at is not None and self.state.next_at < self.clock.now():
            self._schedule_from(self.clock.now())
        self.engine.bus.publish("heartbeat", {"event": "resumed", **self.status()})
        self._wake.set()

    # ---- a tick -----------------------------------------------------------------------------

    async def fire(self, trigger: str = "manual") -> TickResult:
        """Run one tick now (after a running one finishes); the next timer tick is then
        `heartbeat_ms` after this one."""
        async with self._lock:
            if trigger == "timer" and (
                self.paused or self.state.next_at is None or self.clock.now() < self.state.next_at
            ):
                # A manual tick ran while this one waited: the timer starts over from that one.
                return self.state.last or TickResult(trigger, self.clock.now(), "skipped", "superseded")
            self.state.running = True
            self.engine.bus.publish("heartbeat", {"event": "tick_started", "trigger": trigger})
            result = TickResult(trigger=trigger, started_at=self.clock.now())
            started = time.perf_counter()
            try:
                await self._tick(result)
            except Unreachable as exc:
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
                self.engine.state.update({"heartbeat_last": result.to_dict()})
                if self.engine.journal is not None:
                    self.engine.journal.record_event("heartbeat", result.to_dict(), at=result.started_at)
                self._schedule_from(self.clock.now())
            self.engine.bus.publish("heartbeat", {"event": "tick", **result.to_dict()})
            for callback in self.on_tick:
                outcome = callback(result)
                if asyncio.iscoroutine(outcome):
                    await outcome
            return result

    async def _tick(self, result: TickResult) -> None:
        engine, config = self.engine, self.engine.config
        model = engine.last_model()
        result.model = model
        state = engine.state.read()
        session = state.get("heartbeat_session") if isinstance(state.get("heartbeat_session"), str) else None
        if config.heartbeat_skip_active:
            busy = await self._busy()
            others = sorted(busy - {session} if session else busy)
            if others:
                result.outcome, result.reason = "skipped", f"other sessions active: {', '.join(others)}"
                return
        if model is None:
            result.outcome, result.reason = (
                "skipped",
                "no model: set `model` in the config or chat once first",
            )
            return
        if session is None:
            session = await self._new_session()
        result.session = session
        count = int(state.get("heartbeat_count") or 0)
        result.count = count
        cleanup = await self._cleanup_due(session, count, result)
        if cleanup is not None:
            busy = await self._busy()
            if busy:
                result.outcome = "skipped"
                result.reason = f"cleanup skipped (sessions busy: {', '.join(sorted(busy))})"
                return
            session = await self._cleanup(session, model, cleanup)
            result.cleanup = cleanup
            result.session = session
            count = 0
        # The tick commits what the hooks changed itself, as the heartbeat's (not as a stage's).
        dispatched = await engine.dispatch("heartbeat", {"sessions": []}, session=session, settle=False)
        result.dispatch_id = dispatched.id
        user = engine.heartbeat_user(dispatched)
        if user:
            system = dispatched.merged.get("system")
            if isinstance(system, list) and any(isinstance(s, str) and s for s in system):
                engine.sessions.freeze(session, [str(s) for s in system])
            result.user = user
            try:
                await self.opencode.prompt(session, f"[heartbeat] {user}", config.heartbeat_agent, model)
            except Unreachable:
                raise
            except Exception as exc:
                # The session is unusable (deleted, broken): the next tick starts a new one (§190).
                engine.state.update({"heartbeat_session": None, "heartbeat_count": 0})
                result.outcome, result.reason = "failed", f"prompt failed, session dropped: {exc}"
                return
            count += 1
            engine.state.update(
                {
                    "heartbeat_count": count,
                    "heartbeat_time": format_datetime(datetime.now(UTC)),
                    "heartbeat_session": session,
                }
            )
            result.count = count
        else:
            result.reason = "no user message (the hooks gave none and prompts/heartbeat.md is empty)"
        engine.bridge.after_result(dispatched.merged, source=session)
        async with engine.write_lock:
            await engine.commit(
                "heartbeat", {"Origin": "heartbeat", "Session": session, "Stage": "heartbeat"}
            )

    async def _busy(self) -> set[str]:
        try:
            return await self.opencode.busy_sessions()
        except Unreachable:
            raise
        except Exception as exc:
            raise Unreachable(str(exc)) from exc

    async def _new_session(self) -> str:
        title = f"{self.engine.config.heartbeat_title} ({format_datetime(datetime.now(UTC))})"
        session = await self.opencode.create_session(title)
        self.engine.state.update({"heartbeat_session": session})
        self.engine.sessions.get(session)
        return session

    async def _cleanup_due(self, session: str, count: int, result: TickResult) -> dict[str, Any] | None:
        """Each threshold on its own; the count is checked first (§182)."""
        config = self.engine.config
        if config.heartbeat_cleanup == "none":
            return None
        if config.heartbeat_cleanup_count is not None and count >= config.heartbeat_cleanup_count:
            return {
                "mode": config.heartbeat_cleanup,
                "due_to": "count",
                "count": count,
                "threshold": config.heartbeat_cleanup_count,
            }
        if config.heartbeat_cleanup_tokens is not None:
            try:
                tokens = await self.opencode.session_tokens(session)
            except Exception as exc:
                log.warning("heartbeat: cannot read the token total of %s: %s", session, exc)
                return None
            self.tokens = result.tokens = tokens
            if tokens >= config.heartbeat_cleanup_tokens:
                return {
                    "mode": config.heartbeat_cleanup,
                    "due_to": "tokens",
                    "tokens": tokens,
                    "threshold": config.heartbeat_cleanup_tokens,
                }
        return None

    async def _cleanup(self, session: str, model: dict[str, str], cleanup: dict[str, Any]) -> str:
        """Run the cleanup mode; the count is reset whatever happens (§185)."""
        mode = cleanup["mode"]
        new_session = session
        try:
            if mode == "compact":
                await self.opencode.summarize(session, model)
            elif mode == "archive":
                await self.opencode.archive(session)
                new_session = await self._new_session()
            elif mode == "new":
                new_session = await self._new_session()
            cleanup["ok"] = True
        except Exception as exc:
            cleanup["ok"] = False
            cleanup["error"] = str(exc)
        cleanup["from_session"] = session
        cleanup["to_session"] = new_session
        self.engine.state.update({"heartbeat_count": 0, "heartbeat_session": new_session})
        self.tokens = None if new_session != session else self.tokens
        self.engine.bus.publish("heartbeat", {"event": "cleanup", **cleanup})
        if self.engine.journal is not None:
            self.engine.journal.record_event("heartbeat_cleanup", cleanup)
        return new_session

    # ---- status -----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        config = self.engine.config
        state = self.engine.state.read()
        now = self.clock.now()
        return {
            "enabled": self.enabled,
            "interval_ms": self.interval_ms,
            "connected": self._connected,
            "paused": bool(state.get("heartbeat_paused")),
            "running": self.state.running,
            "next_at": self.state.next_at,
            "next_in_s": None if self.state.next_at is None else max(self.state.next_at - now, 0.0),
            "count": int(state.get("heartbeat_count") or 0),
            "count_threshold": config.heartbeat_cleanup_count,
            "tokens": self.tokens,
            "tokens_threshold": config.heartbeat_cleanup_tokens,
            "cleanup": config.heartbeat_cleanup,
            "session": state.get("heartbeat_session"),
            "time": state.get("heartbeat_time"),
            "model": self.engine.last_model(),
            "last": self.state.last.to_dict() if self.state.last else None,
        }
