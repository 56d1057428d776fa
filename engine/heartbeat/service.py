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
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from engine.changes.commits import Commits
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.journal.store import Journal
from engine.opencode.client import OpencodeUnreachable
from engine.opencode.sessions import SessionStore
from engine.protocol.records import HeartbeatChanged, HeartbeatStatus, StageResult, TickResult
from engine.tools.builtins import format_datetime
from engine.tools.host import CallContext
from engine.workspace.config import Config
from engine.workspace.layout import StateFile

log = logging.getLogger("evolve.heartbeat")

MIN_CHOSEN_MS = 60_000  # the shortest interval the agent may choose for itself
RECENT_BEATS = 10  # the recent beats an hcp hook gets as the heartbeat stage's `history`


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
    """What a tick needs from opencode (engine.connections.OpencodeSessions, over HTTP). Raises
    OpencodeUnreachable when opencode does not answer."""

    async def busy_sessions(self) -> set[str]: ...
    async def create_session(self, title: str) -> str: ...
    async def session_tokens(self, session: str) -> int: ...
    async def summarize(self, session: str, model: dict[str, str]) -> None: ...
    async def archive(self, session: str) -> None: ...
    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None: ...


@dataclass
class HeartbeatState:
    running: bool = False
    next_at: float | None = None
    last: TickResult | None = None
    ticks: int = 0
    history: list[TickResult] = field(default_factory=list)


Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]


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
    ) -> None:
        self._config = config
        self._state_file = state
        self._journal = journal
        self._bus = bus
        self._dispatch = dispatch
        self._sessions = sessions
        self._after_result = after_result
        self._commits = commits
        self._model = model
        self._prompt = prompt
        self._activity = activity
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
        last = state.read().get("heartbeat_last")
        if isinstance(last, dict):
            with contextlib.suppress(TypeError):
                self.state.last = TickResult.from_dict(last)

    # ---- schedule ---------------------------------------------------------------------------

    @property
    def interval_ms(self) -> int:
        """The config's `heartbeat_ms` when it is negative (the operator's force-disable always
        wins), else the agent's own choice (`evolve_heartbeat_set`, kept in the state file), else the
        config's value. Negative: no timer."""
        configured = self._config().heartbeat_ms
        if configured < 0:
            return configured
        choice = self.choice()
        if choice is not None:
            if choice.get("enabled") is False:
                return -1
            chosen = choice.get("interval_ms")
            if isinstance(chosen, int) and not isinstance(chosen, bool) and chosen >= 0:
                return chosen
        return configured

    def choice(self) -> dict[str, Any] | None:
        """The agent's choice of its own cadence (state file `heartbeat_choice`), if it made one."""
        found = self._state_file.read().get("heartbeat_choice")
        return found if isinstance(found, dict) else None

    @property
    def interval_source(self) -> str:
        """Where the interval comes from: `config`, `agent`, or `config (disabled)`, which wins."""
        if self._config().heartbeat_ms < 0:
            return "config (disabled)"
        choice = self.choice()
        if choice is not None and (
            choice.get("enabled") is False or isinstance(choice.get("interval_ms"), int)
        ):
            return "agent"
        return "config"

    @property
    def enabled(self) -> bool:
        return self.interval_ms >= 0

    @property
    def paused(self) -> bool:
        return bool(self._state_file.read().get("heartbeat_paused"))

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def connected(self) -> None:
        """opencode is reachable: the first tick comes `heartbeat_ms` from now."""
        if not self._connected:
            self._connected = True
            self._connected_at = self.clock.now()
            self._schedule_from(self._connected_at)
            self._publish("connected")

    def disconnected(self) -> None:
        """No opencode is reachable any more: no tick until one connects again."""
        if self._connected:
            self._connected = False
            self._schedule_from(self.clock.now())
            self._publish("disconnected")

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
        self._state_file.update({"heartbeat_paused": True})
        self._publish("paused")
        self._wake.set()

    async def resume(self) -> None:
        self._state_file.update({"heartbeat_paused": False})
        if self.state.next_at is not None and self.state.next_at < self.clock.now():
            self._schedule_from(self.clock.now())
        self._publish("resumed")
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
            self._publish("tick_started", trigger=trigger)
            result = TickResult(trigger=trigger, started_at=self.clock.now())
            started = time.perf_counter()
            try:
                with self._activity.running():
                    await self._tick(result)
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
                self._schedule_from(self.clock.now())
            self._publish("tick", tick=result, trigger=result.trigger)
            for callback in self.on_tick:
                outcome = callback(result)
                if asyncio.iscoroutine(outcome):
                    await outcome
            return result

    async def _tick(self, result: TickResult) -> None:
        config = self._config()
        model = self._model()
        result.model = model
        state = self._state_file.read()
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
        # hcp hooks get the heartbeat session in their base payload and, as `history`, the recent beats.
        dispatched = await self._dispatch(
            "heartbeat",
            {"sessions": []},
            session=session,
            settle=False,
            hcp_context={"sessions": [], "history": self.recent_beats()},
        )
        result.dispatch_id = dispatched.id
        user = self._user(dispatched)
        if user:
            system = dispatched.merged.get("system")
            if isinstance(system, list) and any(isinstance(s, str) and s for s in system):
                self._sessions.freeze(session, [str(s) for s in system])
            result.user = user
            try:
                await self.opencode.prompt(session, f"[heartbeat] {user}", config.heartbeat_agent, model)
            except OpencodeUnreachable:
                raise
            except Exception as exc:
                # The session is unusable (deleted, broken): the next tick starts a new one.
                self._state_file.update({"heartbeat_session": None, "heartbeat_count": 0})
                result.outcome, result.reason = "failed", f"prompt failed, session dropped: {exc}"
                return
            count += 1
            await self._measure_tokens(session, result)
            self._state_file.update(
                {
                    "heartbeat_count": count,
                    "heartbeat_time": format_datetime(datetime.now(UTC)),
                    "heartbeat_session": session,
                }
            )
            result.count = count
        else:
            result.reason = "no user message (the hooks gave none and prompts/heartbeat.md is empty)"
        self._after_result(dispatched.merged, session)
        async with self._commits.lock:
            await self._commits.commit_hook_changes(
                "heartbeat",
                {"Origin": "heartbeat", "Session": session, "Stage": "heartbeat"},
                None,
                "heartbeat",
                CallContext(session=session, origin="heartbeat"),
            )

    def _user(self, result: StageResult) -> str | None:
        """`user` from the hooks, else the trimmed prompts/heartbeat.md."""
        user = result.merged.get("user")
        if isinstance(user, str) and user:
            return user
        return self._prompt().strip() or None

    async def _measure_tokens(self, session: str, result: TickResult) -> None:
        """The session's token total after this tick's turn (the gauge shows what the next tick
        will compare with its threshold)."""
        try:
            self.tokens = result.tokens = await self.opencode.session_tokens(session)
        except Exception as exc:
            log.info("heartbeat: cannot read the token total of %s: %s", session, exc)

    async def _busy(self) -> set[str]:
        try:
            return await self.opencode.busy_sessions()
        except OpencodeUnreachable:
            raise
        except Exception as exc:
            raise OpencodeUnreachable(str(exc)) from exc

    async def _new_session(self) -> str:
        title = f"{self._config().heartbeat_title} ({format_datetime(datetime.now(UTC))})"
        session = await self.opencode.create_session(title)
        self._state_file.update({"heartbeat_session": session})
        # Announced with its title at once, not only when opencode's event about it arrives.
        self._sessions.update(session, title=title)
        return session

    async def _cleanup_due(self, session: str, count: int, result: TickResult) -> dict[str, Any] | None:
        """Each threshold on its own; the count is checked first."""
        config = self._config()
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
        """Run the cleanup mode; the count is reset whatever happens."""
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
        self._state_file.update({"heartbeat_count": 0, "heartbeat_session": new_session})
        self.tokens = None if new_session != session else self.tokens
        self._publish("cleanup", cleanup=cleanup)
        if self._journal is not None:
            self._journal.record_event("heartbeat_cleanup", cleanup)
        return new_session

    # ---- what the agent sees of its heartbeat (the evolve_heartbeat_* tools) ----------------

    def recent_beats(self, limit: int = RECENT_BEATS) -> list[dict[str, Any]]:
        """The last ticks, oldest first: `{at, trigger, outcome, reason, user, session}`."""
        ticks = self._ticks(limit)
        return [
            {
                "at": format_datetime(datetime.fromtimestamp(t.started_at, UTC)),
                "trigger": t.trigger,
                "outcome": t.outcome,
                "reason": t.reason,
                "user": t.user,
                "session": t.session,
            }
            for t in reversed(ticks)
        ]

    def _ticks(self, limit: int) -> list[TickResult]:
        """The last `limit` ticks, newest first: from the journal (they survive a restart), else
        this engine's own."""
        if self._journal is not None:
            found = []
            for row in self._journal.events(kind="heartbeat", limit=limit):
                data = row.get("data")
                if isinstance(data, dict):
                    with contextlib.suppress(TypeError):
                        found.append(TickResult.from_dict(data))
            if found or not self.state.history:
                return found
        return list(reversed(self.state.history[-limit:]))

    def choose(self, interval_ms: int | None, enabled: bool | None, reset: bool, session: str | None) -> str:
        """The agent sets its own cadence; kept in the state file, so a restarted engine keeps it."""
        if reset:
            self._state_file.update({"heartbeat_choice": None})
        else:
            choice = dict(self.choice() or {})
            if interval_ms is not None:
                if interval_ms < MIN_CHOSEN_MS:
                    return (
                        f"error: interval_ms must be at least {MIN_CHOSEN_MS} (one minute), got {interval_ms}"
                    )
                choice["interval_ms"] = interval_ms
            if enabled is not None:
                choice["enabled"] = enabled
            choice["at"] = format_datetime(datetime.now(UTC))
            choice["session"] = session
            self._state_file.update({"heartbeat_choice": choice})
        self.reschedule()
        self._publish("chosen")
        return self.describe()

    def describe(self) -> str:
        """The heartbeat as the agent reads it."""
        status = self.status()
        source = self.interval_source
        if source == "config (disabled)":
            lines = [
                "heartbeat: disabled by the operator (heartbeat_ms < 0 in the config); this wins over your choice"
            ]
        elif not status.enabled:
            lines = [f"heartbeat: off ({'your choice' if source == 'agent' else 'the config'})"]
        else:
            who = "your choice" if source == "agent" else "the config's default"
            lines = [f"heartbeat: on, every {status.interval_ms} ms ({who})"]
        if status.paused:
            lines.append("paused by the operator")
        if status.next_in_s is not None:
            lines.append(f"next beat in {status.next_in_s:.0f} s")
        elif status.enabled and not status.connected:
            lines.append("no beat is scheduled until opencode connects")
        lines.append(f"beats in the current heartbeat session: {status.count}")
        if status.time:
            lines.append(f"last beat that sent a message: {status.time}")
        return "\n".join(lines)

    def history_text(self, limit: int) -> str:
        beats = self.recent_beats(limit)
        if not beats:
            return "no heartbeat has run yet"
        lines = []
        for beat in reversed(beats):
            line = f"{beat['at']} {beat['trigger']} {beat['outcome']}"
            if beat["reason"]:
                line += f": {beat['reason']}"
            if beat["user"]:
                line += f" | message: {' '.join(str(beat['user']).split())[:200]}"
            lines.append(line)
        return "\n".join(lines)

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
            connected=self._connected,
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
            connected_at=self._connected_at if self._connected else None,
        )
