"""Tests for engine.heartbeat.

Scheduler unit tests: time comes from a FakeClock (no real sleeps) and opencode is a FakeOpencode
implementing the `heartbeat.Opencode` protocol. Everything else is real: an Engine on a temporary
workspace with a small python hook, real git, the real state file, journal and event bus.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.opencode.client import OpencodeUnreachable as Unreachable
from engine.protocol.events import Event
from engine.protocol.records import TickResult
from engine.runtime import Engine
from tests.support.processes import pid_alive

INTERVAL_S = 10.0  # heartbeat_ms 10000 in every test unless said otherwise
MODEL = {"providerID": "prov", "modelID": "mod"}
FALLBACK = "Fallback heartbeat prompt."
DATETIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00"
WRAPPED = "<system-reminder>\n<assistant-notification>{}</assistant-notification>\n</system-reminder>"

# The workspace's only hook. Each stage's stdin is appended to $HB_OUT/<stage>.jsonl; what the
# heartbeat stage answers comes from $HB_OUT/spec.json, which the tests rewrite between ticks:
# {"system", "user", "notify", "actions"} are echoed, "touch": [path, text] appends to a workspace file,
# "sleep": seconds writes the hook's pid to $HB_OUT/pid and sleeps that long first.
HOOK = (
    f"#!{sys.executable} -S\n"  # -S: a faster start, the hook needs only the standard library
    + """import json, os, sys
stage = sys.argv[1]
raw = sys.stdin.read()
if stage == "discover":
    print(json.dumps({"name": "hb"}))
    sys.exit(0)
out = os.environ["HB_OUT"]
with open(os.path.join(out, stage + ".jsonl"), "a") as f:
    f.write(raw.replace("\\n", " ") + "\\n")
try:
    with open(os.path.join(out, "spec.json")) as f:
        spec = json.load(f)
except FileNotFoundError:
    spec = {}
if stage == "heartbeat":
    if spec.get("sleep"):
        with open(os.path.join(out, "pid"), "w") as f:
            f.write(str(os.getpid()))
        import time
        time.sleep(spec["sleep"])
    if spec.get("touch"):
        path, text = spec["touch"]
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "a") as f:
            f.write(text)
    for key in ("system", "user", "notify", "actions"):
        if key in spec:
            print(json.dumps({key: spec[key]}))
elif stage == "format_notification":
    print(json.dumps({"message": " | ".join(json.loads(raw).get("notifications", []))}))
"""
)


# ---- fakes --------------------------------------------------------------------------------------


class Signal:
    """Wakes waiters whenever something observable changed (fakes, bus, ticks)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()

    async def wait(self, pred: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
        async def loop() -> None:
            while not pred():
                self._event.clear()
                await self._event.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}") from None


class FakeClock:
    """The `heartbeat.Clock` protocol on a manual clock: `advance()` wakes the sleepers that are due."""

    def __init__(self, changed: Signal, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._signal = changed
        self._sleepers: list[tuple[float | None, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def wait(self, event: asyncio.Event, timeout: float | None) -> bool:
        if event.is_set():
            return True
        if timeout is not None and timeout <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (None if timeout is None else self._now + timeout, fut)
        self._sleepers.append(entry)
        self._signal.fire()
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({waiter, fut}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            self._sleepers.remove(entry)
        return event.is_set()

    def advance(self, seconds: float) -> None:
        self._now += seconds
        for deadline, fut in list(self._sleepers):
            if deadline is not None and deadline <= self._now and not fut.done():
                fut.set_result(None)

    def deadlines(self) -> list[float | None]:
        return [d for d, f in self._sleepers if not f.done()]


class FakeOpencode:
    """The `heartbeat.Opencode` protocol: records every call; configurable busy sessions, token
    totals, failures (any exception, `Unreachable` included) and a prompt that blocks on `gate`."""

    def __init__(self, changed: Signal) -> None:
        self.signal = changed
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.busy: set[str] = set()
        self.tokens: dict[str, int] = {}
        self.fail: dict[str, BaseException] = {}
        self.gate: asyncio.Event | None = None
        self.yields = 0  # event-loop turns a prompt takes (a real one takes many)
        self.on_prompt: Callable[[str], None] | None = None
        self.running = 0
        self.max_running = 0
        self._n = 0

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        self.signal.fire()
        exc = self.fail.get(name)
        if exc is not None:
            raise exc

    def of(self, name: str) -> list[tuple[Any, ...]]:
        return [args for n, args in self.calls if n == name]

    @property
    def prompts(self) -> list[tuple[Any, ...]]:
        return self.of("prompt")

    @property
    def created(self) -> list[str]:
        return [title for (title,) in self.of("create_session")]

    async def busy_sessions(self) -> set[str]:
        self._call("busy_sessions")
        return set(self.busy)

    async def create_session(self, title: str) -> str:
        self._call("create_session", title)
        self._n += 1
        return f"ses_{self._n}"

    async def session_tokens(self, session: str) -> int:
        self._call("session_tokens", session)
        return self.tokens.get(session, 0)

    async def summarize(self, session: str, model: dict[str, str]) -> None:
        self._call("summarize", session, model)

    async def archive(self, session: str) -> None:
        self._call("archive", session)

    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.on_prompt is not None:
                self.on_prompt(session)
            self._call("prompt", session, text, agent, model)
            if self.gate is not None:
                await self.gate.wait()
            for _ in range(self.yields):
                await asyncio.sleep(0)
        finally:
            self.running -= 1
            self.signal.fire()


# ---- harness ------------------------------------------------------------------------------------


class H:
    def __init__(self, root: Path, out: Path, signal: Signal) -> None:
        self.root, self.out, self.signal = root, out, signal
        self.clock = FakeClock(signal)
        self.oc = FakeOpencode(signal)
        self.engine = engine = Engine(root, env=hook_env(out), opencode=self.oc, clock=self.clock)
        self.hb = engine.heartbeat
        self.results: list[TickResult] = []
        self.events: list[Event] = []
        self.hb.on_tick.append(self._ticked)
        self._unlisten = engine.bus.listen(self._event)

    def _ticked(self, result: TickResult) -> None:
        self.results.append(result)
        self.signal.fire()

    def _event(self, event: Event) -> None:
        self.events.append(event)
        self.signal.fire()

    def hb_events(self, name: str) -> list[dict[str, Any]]:
        """What the heartbeat events called `name` tell, by kind: a tick's result, a cleanup, the
        trigger of a tick that started, the status after a pause or resume."""
        part = {"tick": "tick", "cleanup": "cleanup", "paused": "status", "resumed": "status"}
        found = [e.data for e in self.events if e.kind == "heartbeat" and e.data.get("event") == name]
        if name == "tick_started":
            return [{"trigger": d["trigger"]} for d in found]
        return [d[part[name]] for d in found]

    def spec(self, **spec: Any) -> None:
        (self.out / "spec.json").write_text(json.dumps(spec), encoding="utf-8")

    def state(self) -> dict[str, Any]:
        return self.engine.state.read()

    async def ticks(self, n: int) -> None:
        await self.signal.wait(lambda: len(self.results) >= n, f"{n} finished ticks")

    async def prompts(self, n: int) -> None:
        await self.signal.wait(lambda: len(self.oc.prompts) >= n, f"{n} prompts")

    async def sleeping_until(self, deadline: float | None) -> None:
        """The timer loop is asleep with this deadline (None: until woken)."""
        await self.signal.wait(
            lambda: any(
                d == deadline if deadline is None or d is None else d == pytest.approx(deadline, abs=1e-6)
                for d in self.clock.deadlines()
            ),
            f"the loop sleeping until {deadline}",
        )

    async def fire(self, trigger: str = "manual") -> TickResult:
        return await asyncio.wait_for(self.hb.fire(trigger), 15)


async def settle(turns: int = 100) -> None:
    """Give every ready task many turns of the event loop (no real time passes)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def until(pred: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Yield to the event loop until `pred()` holds (for state no fake signals, like engine.activity.busy)."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0)


def hook_env(out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVOLVE_", "OPENCODE_"))}
    env["HB_OUT"] = str(out)
    return env


def make_workspace(root: Path, config: dict[str, Any], heartbeat_md: str) -> None:
    (root / "hooks").mkdir(parents=True)
    (root / "prompts").mkdir()
    (root / "config").mkdir()
    hook = root / "hooks" / "hb.py"
    hook.write_text(HOOK, encoding="utf-8")
    hook.chmod(0o755)
    (root / "prompts" / "heartbeat.md").write_text(heartbeat_md, encoding="utf-8")
    (root / "config" / "evolve.jsonc").write_text(json.dumps(config, indent=2), encoding="utf-8")


@asynccontextmanager
async def harness(
    tmp_path: Path,
    config: dict[str, Any] | None = None,
    *,
    state: dict[str, Any] | None = None,
    heartbeat_md: str = f"\n  {FALLBACK}  \n",
    spec: dict[str, Any] | None = None,
    connect: bool = True,
) -> AsyncIterator[H]:
    root, out = tmp_path / "ws", tmp_path / "out"
    out.mkdir(exist_ok=True)
    if not root.exists():
        make_workspace(
            root,
            {"heartbeat_ms": int(INTERVAL_S * 1000), "model": "prov/mod", **(config or {})},
            heartbeat_md,
        )
    h = H(root, out, Signal())
    engine = h.engine
    await engine.start()
    try:
        h.spec(**({"user": "do the upkeep"} if spec is None else spec))
        if state:
            engine.state.update(state)
        h.hb.start()
        if connect:
            h.hb.connected()
        yield h
    finally:
        # Let a tick still in flight finish (a test that failed midway), so that no hook process is
        # cut off by stop().
        if h.oc.gate is not None:
            h.oc.gate.set()
        h.oc.fail.clear()
        await until(lambda: not h.hb.state.running and not engine.activity.busy, "the last tick to finish")
        await h.hb.stop()
        await engine.close()


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


# ---- scheduling ---------------------------------------------------------------------------------


def test_no_tick_before_connected(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, connect=False) as h:
            await h.sleeping_until(None)
            h.clock.advance(100 * INTERVAL_S)
            await settle()
            assert h.hb_events("tick_started") == []
            assert h.oc.calls == []
            assert h.hb.status().connected is False and h.hb.status().next_at is None

            h.hb.connected()  # the first tick is counted from here, not from the start
            t0 = h.clock.now()
            await h.sleeping_until(t0 + INTERVAL_S)
            h.clock.advance(INTERVAL_S)
            await h.ticks(1)
            assert h.results[0].trigger == "timer" and h.results[0].outcome == "ok"

    run(main())


def test_first_tick_exactly_heartbeat_ms_after_connected(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, connect=False) as h:
            h.clock.advance(3.0)  # time before connecting does not count
            t0 = h.clock.now()
            h.hb.connected()
            h.hb.connected()  # a second announcement does not move the first tick
            await h.sleeping_until(t0 + INTERVAL_S)
            assert h.hb.status().next_at == pytest.approx(t0 + INTERVAL_S)

            h.clock.advance(INTERVAL_S - 0.001)
            await settle()
            assert h.hb_events("tick_started") == [] and h.oc.prompts == []

            h.clock.advance(0.002)
            await h.ticks(1)
            assert len(h.oc.prompts) == 1
            assert h.results[0].trigger == "timer"
            assert h.results[0].started_at == pytest.approx(t0 + INTERVAL_S + 0.001)

    run(main())


def test_next_tick_heartbeat_ms_after_the_previous_finished(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            t0 = h.clock.now()
            h.oc.gate = asyncio.Event()  # the first tick takes 25 s
            h.clock.advance(INTERVAL_S)
            await h.prompts(1)
            h.clock.advance(25.0)  # two intervals pass while it runs: nothing else starts
            await settle()
            assert len(h.oc.prompts) == 1 and len(h.hb_events("tick_started")) == 1
            assert h.hb.status().running is True

            h.oc.gate.set()
            await h.ticks(1)
            finished = t0 + INTERVAL_S + 25.0
            await h.sleeping_until(finished + INTERVAL_S)

            h.clock.advance(INTERVAL_S - 0.001)
            await settle()
            assert len(h.hb_events("tick_started")) == 1

            h.clock.advance(0.002)
            await h.ticks(2)
            assert len(h.oc.prompts) == 2
            assert h.results[1].started_at == pytest.approx(finished + INTERVAL_S + 0.001)
            assert h.oc.max_running == 1

    run(main())


def test_manual_fire_during_a_running_tick_waits_and_runs_after_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.oc.gate = asyncio.Event()
            h.clock.advance(INTERVAL_S)
            await h.prompts(1)

            manual = asyncio.create_task(h.hb.fire("manual"))
            await settle()
            assert len(h.oc.prompts) == 1, "the manual tick started while the timer tick was running"
            assert [e["trigger"] for e in h.hb_events("tick_started")] == ["timer"]

            h.oc.gate.set()
            result = await asyncio.wait_for(manual, 15)
            assert result.trigger == "manual" and result.outcome == "ok"
            assert len(h.oc.prompts) == 2
            assert h.oc.max_running == 1
            order = [
                (e.data["event"], e.data["trigger"])
                for e in h.events
                if e.kind == "heartbeat" and e.data["event"].startswith("tick")
            ]
            assert order == [
                ("tick_started", "timer"),
                ("tick", "timer"),
                ("tick_started", "manual"),
                ("tick", "manual"),
            ]

    run(main())


def test_manual_fire_moves_the_next_timer_tick(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            t0 = h.clock.now()
            h.clock.advance(4.0)
            result = await h.fire()
            assert result.trigger == "manual" and result.outcome == "ok"
            await h.sleeping_until(t0 + 4.0 + INTERVAL_S)
            h.clock.advance(INTERVAL_S - 0.5)  # past the original t0 + 10 deadline
            await settle()
            assert len(h.hb_events("tick_started")) == 1
            h.clock.advance(1.0)
            await h.ticks(2)
            assert h.results[1].trigger == "timer"

    run(main())


def test_timer_tick_due_during_a_manual_fire_comes_heartbeat_ms_after_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            t0 = h.clock.now()
            h.clock.advance(5.0)
            h.oc.gate = asyncio.Event()
            manual = asyncio.create_task(h.hb.fire("manual"))
            await h.prompts(1)
            h.clock.advance(6.0)  # the timer's t0 + 10 passes while the manual tick runs
            await settle()
            assert len(h.oc.prompts) == 1

            h.oc.gate.set()
            await asyncio.wait_for(manual, 15)
            await settle()
            started = len(h.hb_events("tick_started"))
            await h.ticks(started)  # (let a tick that did start finish before failing)
            assert started == 1, "a timer tick ran right after the manual one"
            await h.sleeping_until(t0 + 11.0 + INTERVAL_S)

    run(main())


def test_negative_heartbeat_ms_disables_the_timer_but_fire_works(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"heartbeat_ms": -1}) as h:
            await h.sleeping_until(None)
            assert h.hb.enabled is False and h.hb.status().next_at is None
            h.clock.advance(10_000.0)
            await settle()
            assert h.hb_events("tick_started") == [] and h.oc.calls == []

            result = await h.fire()
            assert result.outcome == "ok" and len(h.oc.prompts) == 1
            await h.sleeping_until(None)  # still no timer after a manual tick
            h.clock.advance(10_000.0)
            await settle()
            assert len(h.oc.prompts) == 1

    run(main())


def test_pause_stops_timer_ticks_persists_and_resume_restarts(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.clock.advance(1.0)
            await h.hb.pause()
            assert h.state()["heartbeat_paused"] is True
            assert h.hb_events("paused") and h.hb_events("paused")[0]["paused"] is True
            await h.sleeping_until(None)
            h.clock.advance(100.0)
            await settle()
            assert h.hb_events("tick_started") == []

            # A new Heartbeat over the same engine state reads the pause back.
            other = Engine(
                h.root, env=hook_env(h.out), opencode=FakeOpencode(Signal()), clock=h.clock
            ).heartbeat
            assert other.paused is True and other.status().paused is True

            await h.hb.resume()
            assert h.state()["heartbeat_paused"] is False
            assert other.paused is False
            resumed = h.clock.now()
            await h.sleeping_until(resumed + INTERVAL_S)
            h.clock.advance(INTERVAL_S - 0.1)
            await settle()
            assert h.hb_events("tick_started") == []
            h.clock.advance(0.2)
            await h.ticks(1)
            assert h.results[0].trigger == "timer" and h.hb_events("resumed")

    run(main())


def test_pause_survives_an_engine_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            await h.hb.pause()
        async with harness(tmp_path) as h:  # a new Engine on the same workspace
            assert h.hb.paused is True
            h.clock.advance(5 * INTERVAL_S)
            await settle()
            assert h.hb_events("tick_started") == []
            await h.hb.resume()
            h.clock.advance(INTERVAL_S)
            await h.ticks(1)

    run(main())


def test_a_failed_tick_does_not_stop_the_timer(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"heartbeat_skip_active": False}) as h:
            h.oc.fail["create_session"] = RuntimeError("boom")
            h.clock.advance(INTERVAL_S)
            await h.ticks(1)
            assert h.results[0].outcome == "failed"
            assert h.results[0].reason == "RuntimeError: boom"
            del h.oc.fail["create_session"]
            h.clock.advance(INTERVAL_S)
            await h.ticks(2)
            assert h.results[1].outcome == "ok"

    run(main())


def test_a_tick_interrupted_by_stop_is_not_recorded_as_ok(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.oc.gate = asyncio.Event()
            h.clock.advance(INTERVAL_S)
            await h.prompts(1)
            await h.hb.stop()
            last = h.state().get("heartbeat_last")
            assert last is None or last["outcome"] != "ok", last

    run(main())


def test_stop_during_the_heartbeat_hook_kills_the_hook(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, spec={"user": "u", "sleep": 30}) as h:
            h.clock.advance(INTERVAL_S)
            pid_file = h.out / "pid"
            await until(lambda: pid_file.exists() and pid_file.read_text() != "", "the hook to start")
            pid = int(pid_file.read_text())
            try:
                await h.hb.stop()
                await until(lambda: not pid_alive(pid), "the hook process to end", timeout=10)
            finally:
                if pid_alive(pid):
                    os.killpg(pid, signal.SIGKILL)
                    await until(lambda: not pid_alive(pid), "the leftover hook to be reaped")
                gc.collect()  # close the leaked pipe transports while the loop still runs
                await settle()

    run(main())


# ---- skips --------------------------------------------------------------------------------------


def assert_skip_recorded(h: H, result: TickResult, reason: str) -> None:
    assert result.outcome == "skipped"
    assert result.reason is not None and reason in result.reason, result.reason
    assert h.state()["heartbeat_last"] == result.to_dict()
    ticks = h.hb_events("tick")
    assert ticks and ticks[-1]["outcome"] == "skipped" and ticks[-1]["reason"] == result.reason
    assert h.hb.status().last == result


def test_skip_when_another_session_is_busy(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.oc.busy = {"ses_other", "ses_x"}
            result = await h.fire()
            assert_skip_recorded(h, result, "other sessions active: ses_other, ses_x")
            assert h.oc.prompts == [] and h.oc.created == []
            assert "heartbeat_count" not in h.state()

            h.oc.busy = set()
            assert (await h.fire()).outcome == "ok"

    run(main())


def test_no_skip_when_only_the_heartbeat_session_is_busy(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, state={"heartbeat_session": "ses_hb"}) as h:
            h.oc.busy = {"ses_hb"}
            result = await h.fire()
            assert result.outcome == "ok", result.reason
            assert [p[0] for p in h.oc.prompts] == ["ses_hb"]

    run(main())


def test_skip_active_false_ignores_busy_sessions(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"heartbeat_skip_active": False}) as h:
            h.oc.busy = {"ses_other"}
            result = await h.fire()
            assert result.outcome == "ok", result.reason
            assert len(h.oc.prompts) == 1

    run(main())


def test_skip_without_a_model(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"model": None}) as h:
            result = await h.fire()
            assert_skip_recorded(h, result, "no model")
            assert result.model is None
            assert h.oc.prompts == [] and h.oc.created == []

            h.engine.models.note({"providerID": "chat", "modelID": "m1", "extra": "ignored"})
            result = await h.fire()
            assert result.outcome == "ok"
            assert h.oc.prompts[-1][3] == {"providerID": "chat", "modelID": "m1"}

    run(main())


def test_model_order_config_then_state_then_last_chat_model(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"model": None}) as h:
            h.engine.models.note({"providerID": "chat", "modelID": "m1"})
            h.engine.state.update({"model": {"providerID": "state", "modelID": "m2"}})
            await h.fire()  # the state file is re-read on every tick
            h.engine.state.update({"model": None})
            await h.fire()
            config = h.root / "config" / "evolve.jsonc"
            config.write_text(json.dumps({"heartbeat_ms": 10000, "model": "cfg/m3"}), encoding="utf-8")
            h.engine.reload_config()
            await h.fire()
            assert [p[3] for p in h.oc.prompts] == [
                {"providerID": "state", "modelID": "m2"},
                {"providerID": "chat", "modelID": "m1"},
                {"providerID": "cfg", "modelID": "m3"},
            ]
            assert h.results[-1].model == {"providerID": "cfg", "modelID": "m3"}

    run(main())


@pytest.mark.parametrize(
    "config, failing",
    [
        ({}, "busy_sessions"),
        ({"heartbeat_skip_active": False}, "create_session"),
    ],
)
def test_skip_when_opencode_is_unreachable(tmp_path: Path, config: dict[str, Any], failing: str) -> None:
    async def main() -> None:
        async with harness(tmp_path, config) as h:
            h.oc.fail[failing] = Unreachable("connection refused")
            h.clock.advance(INTERVAL_S)
            await h.ticks(1)
            assert_skip_recorded(h, h.results[0], "opencode unreachable: connection refused")
            assert h.oc.prompts == []

            del h.oc.fail[failing]  # the timer goes on; the next tick works
            h.clock.advance(INTERVAL_S)
            await h.ticks(2)
            assert h.results[1].outcome == "ok" and len(h.oc.prompts) == 1

    run(main())


def test_busy_check_errors_count_as_unreachable(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.oc.fail["busy_sessions"] = OSError("socket closed")
            result = await h.fire()
            assert_skip_recorded(h, result, "opencode unreachable: socket closed")

    run(main())


def test_unreachable_during_the_prompt_keeps_the_session_and_count(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, state={"heartbeat_session": "ses_hb", "heartbeat_count": 3}) as h:
            h.oc.fail["prompt"] = Unreachable("connection reset")
            result = await h.fire()
            assert_skip_recorded(h, result, "opencode unreachable: connection reset")
            assert h.state()["heartbeat_session"] == "ses_hb"
            assert h.state()["heartbeat_count"] == 3
            assert "heartbeat_time" not in h.state()

    run(main())


# ---- the heartbeat session ----------------------------------------------------------------------


def test_session_created_when_missing_titled_and_persisted(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"heartbeat_title": "heartbeat"}) as h:
            before = datetime.now(UTC)
            result = await h.fire()
            after = datetime.now(UTC)
            assert result.outcome == "ok" and result.session == "ses_1"
            [title] = h.oc.created
            match = re.fullmatch(rf"heartbeat \(({DATETIME})\)", title)
            assert match, title
            stamp = datetime.fromisoformat(match.group(1))
            assert before - timedelta(seconds=1) <= stamp <= after
            assert h.state()["heartbeat_session"] == "ses_1"
            assert h.oc.prompts[0][0] == "ses_1"
            # The console learns of the new session at once, with its title, not at opencode's event.
            announced = [
                e.data for e in h.events if e.kind == "session" and e.data["session"]["id"] == "ses_1"
            ]
            assert announced[0]["change"] == "created"
            assert announced[-1]["session"]["title"] == title
            known = h.engine.sessions.info("ses_1")
            assert known is not None and known.title == title

            await h.fire()  # reused, not created again
            assert h.oc.created == [title] and h.oc.prompts[1][0] == "ses_1"

    run(main())


def test_custom_title_and_a_session_from_the_state_file(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(
            tmp_path, {"heartbeat_title": "pulse"}, state={"heartbeat_session": "ses_kept"}
        ) as h:
            await h.fire()
            assert h.oc.created == [] and h.oc.prompts[0][0] == "ses_kept"
            h.engine.state.update({"heartbeat_session": None})
            await h.fire()
            assert re.fullmatch(rf"pulse \({DATETIME}\)", h.oc.created[0])

    run(main())


def test_a_prompt_failure_drops_the_session_and_the_next_tick_creates_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.oc.fail["prompt"] = RuntimeError("session ses_1 not found")
            result = await h.fire()
            assert result.outcome == "failed"
            assert result.reason == "prompt failed, session dropped: session ses_1 not found"
            assert h.state()["heartbeat_session"] is None
            assert h.state()["heartbeat_last"]["reason"] == result.reason
            # the next session starts counting from zero
            assert h.state().get("heartbeat_count") == 0 and "heartbeat_time" not in h.state()

            del h.oc.fail["prompt"]
            result = await h.fire()
            assert result.outcome == "ok" and result.session == "ses_2"
            assert len(h.oc.created) == 2
            assert h.state()["heartbeat_session"] == "ses_2"
            assert h.state()["heartbeat_count"] == 1

    run(main())


def test_an_hcp_hook_gets_the_heartbeat_session_and_the_recent_beats(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"hook_protocols": {"hb.py": "hcp"}}) as h:
            first = await h.fire()
            h.spec(user="tidy the notes")
            second = await h.fire()
            assert first.outcome == second.outcome == "ok"
            lines = (h.out / "heartbeat.jsonl").read_text(encoding="utf-8").splitlines()
            payloads = [json.loads(line) for line in lines]
            assert [p["hook"] for p in payloads] == ["heartbeat", "heartbeat"]
            assert [p["session"]["id"] for p in payloads] == [first.session, second.session]
            assert payloads[0]["host"]["name"] == "evolve" and "heartbeat" in payloads[0]["host"]["stages"]
            assert payloads[0]["history"] == [], "no beat before the first"
            (beat,) = payloads[1]["history"]
            assert re.fullmatch(DATETIME, beat.pop("at"))
            assert beat == {
                "trigger": "manual",
                "outcome": "ok",
                "reason": None,
                "user": "do the upkeep",
                "session": first.session,
            }

    run(main())


# ---- cleanup ------------------------------------------------------------------------------------

CLEANUP = {"heartbeat_cleanup_count": 2, "heartbeat_cleanup_tokens": 1000}


@pytest.mark.parametrize("mode", ["new", "archive", "compact"])
@pytest.mark.parametrize("due_to", ["count", "tokens"])
def test_cleanup_modes_at_each_threshold(tmp_path: Path, mode: str, due_to: str) -> None:
    # Both thresholds are set; only one is reached, and it alone triggers the cleanup.
    count, tokens = (2, 10) if due_to == "count" else (1, 1500)

    async def main() -> None:
        state = {"heartbeat_session": "ses_old", "heartbeat_count": count}
        async with harness(tmp_path, {"heartbeat_cleanup": mode, **CLEANUP}, state=state) as h:
            h.oc.tokens["ses_old"] = tokens
            result = await h.fire()
            assert result.outcome == "ok", result.reason
            new = "ses_old" if mode == "compact" else "ses_1"
            assert result.cleanup is not None
            assert result.cleanup["mode"] == mode and result.cleanup["due_to"] == due_to
            assert result.cleanup["ok"] is True
            assert result.cleanup["from_session"] == "ses_old" and result.cleanup["to_session"] == new
            if due_to == "count":
                assert result.cleanup["count"] == 2 and result.cleanup["threshold"] == 2
            else:
                assert result.cleanup["tokens"] == 1500 and result.cleanup["threshold"] == 1000
                assert result.tokens == h.oc.tokens.get(new, 0)  # the total after the tick's turn

            assert h.oc.of("archive") == ([("ses_old",)] if mode == "archive" else [])
            assert h.oc.of("summarize") == ([("ses_old", MODEL)] if mode == "compact" else [])
            assert len(h.oc.created) == (0 if mode == "compact" else 1)
            assert [p[0] for p in h.oc.prompts] == [new]
            assert result.session == new and h.state()["heartbeat_session"] == new

            [event] = h.hb_events("cleanup")
            assert event["mode"] == mode and event["due_to"] == due_to
            assert event["from_session"] == "ses_old" and event["to_session"] == new
            assert h.hb_events("tick")[-1]["cleanup"] == result.cleanup

    run(main())


def test_cleanup_resets_the_count(tmp_path: Path) -> None:
    async def main() -> None:
        state = {"heartbeat_session": "ses_old", "heartbeat_count": 7}
        config = {"heartbeat_cleanup": "new", **CLEANUP}
        # No user message this time: nothing is sent, so the persisted count is the reset one.
        async with harness(tmp_path, config, state=state, heartbeat_md="", spec={}) as h:
            result = await h.fire()
            assert result.cleanup is not None and result.cleanup["due_to"] == "count"
            assert result.reason is not None and "no user message" in result.reason
            assert h.oc.prompts == []
            assert h.state()["heartbeat_count"] == 0
            assert h.state()["heartbeat_session"] == "ses_1"

    run(main())


def test_count_restarts_from_one_after_a_count_cleanup(tmp_path: Path) -> None:
    async def main() -> None:
        state = {"heartbeat_session": "ses_old", "heartbeat_count": 2}
        async with harness(tmp_path, {"heartbeat_cleanup": "new", **CLEANUP}, state=state) as h:
            first = await h.fire()
            assert first.cleanup is not None
            assert h.state()["heartbeat_count"] == 1
            second = await h.fire()
            assert second.cleanup is None, "cleaned up again on the next tick"
            assert h.state()["heartbeat_count"] == 2
            assert len(h.oc.created) == 1

    run(main())


def test_cleanup_none_never_cleans_up(tmp_path: Path) -> None:
    async def main() -> None:
        config = {"heartbeat_cleanup": "none", "heartbeat_cleanup_count": 1, "heartbeat_cleanup_tokens": 1}
        state = {"heartbeat_session": "ses_hb", "heartbeat_count": 5}
        async with harness(tmp_path, config, state=state) as h:
            h.oc.tokens["ses_hb"] = 10**9
            for expected in (6, 7):
                result = await h.fire()
                assert result.outcome == "ok" and result.cleanup is None
                assert h.state()["heartbeat_count"] == expected
            assert h.oc.of("archive") == [] and h.oc.of("summarize") == [] and h.oc.created == []
            assert h.hb_events("cleanup") == []
            assert [p[0] for p in h.oc.prompts] == ["ses_hb", "ses_hb"]

    run(main())


@pytest.mark.parametrize(
    "config, busy",
    [
        ({}, {"ses_old"}),  # only the heartbeat session itself is busy: no skip, but no cleanup either
        ({"heartbeat_skip_active": False}, {"ses_other"}),
    ],
)
def test_a_busy_session_blocks_the_cleanup(tmp_path: Path, config: dict[str, Any], busy: set[str]) -> None:
    async def main() -> None:
        state = {"heartbeat_session": "ses_old", "heartbeat_count": 2}
        async with harness(tmp_path, {"heartbeat_cleanup": "archive", **CLEANUP, **config}, state=state) as h:
            h.oc.busy = busy
            result = await h.fire()
            assert_skip_recorded(h, result, f"cleanup skipped (sessions busy: {next(iter(busy))})")
            assert h.oc.of("archive") == [] and h.oc.created == [] and h.oc.prompts == []
            assert h.state()["heartbeat_count"] == 2 and h.state()["heartbeat_session"] == "ses_old"
            assert h.hb_events("cleanup") == []

            h.oc.busy = set()
            result = await h.fire()
            assert result.cleanup is not None and h.oc.of("archive") == [("ses_old",)]

    run(main())


def test_a_failed_archive_keeps_the_session_and_resets_the_count(tmp_path: Path) -> None:
    async def main() -> None:
        state = {"heartbeat_session": "ses_old", "heartbeat_count": 2}
        config = {"heartbeat_cleanup": "archive", **CLEANUP}
        # No user message, so the persisted count is the reset one.
        async with harness(tmp_path, config, state=state, heartbeat_md="", spec={}) as h:
            h.oc.fail["archive"] = RuntimeError("archive refused")
            result = await h.fire()
            assert result.cleanup is not None
            assert result.cleanup["ok"] is False and result.cleanup["error"] == "archive refused"
            assert h.oc.of("archive") == [("ses_old",)]
            assert h.oc.created == []  # a new session only after a successful archive
            assert result.session == "ses_old" and result.cleanup["to_session"] == "ses_old"
            assert h.state()["heartbeat_session"] == "ses_old"
            assert h.state()["heartbeat_count"] == 0

    run(main())


def test_unreadable_token_total_means_no_cleanup(tmp_path: Path) -> None:
    async def main() -> None:
        state = {"heartbeat_session": "ses_hb", "heartbeat_count": 0}
        async with harness(tmp_path, {"heartbeat_cleanup": "archive", **CLEANUP}, state=state) as h:
            h.oc.fail["session_tokens"] = RuntimeError("messages API error")
            result = await h.fire()
            assert result.outcome == "ok" and result.cleanup is None
            assert h.oc.of("session_tokens") == [("ses_hb",), ("ses_hb",)]  # before, and after the turn
            assert h.oc.prompts[0][0] == "ses_hb"

    run(main())


def test_the_token_gauge_shows_the_total_after_the_ticks_turn(tmp_path: Path) -> None:
    async def main() -> None:
        state = {"heartbeat_session": "ses_hb", "heartbeat_count": 0}
        async with harness(tmp_path, {"heartbeat_cleanup": "new", **CLEANUP}, state=state) as h:
            h.oc.tokens["ses_hb"] = 240

            def turn(session: str) -> None:  # each turn adds 240 tokens to the session
                h.oc.tokens[session] = h.oc.tokens.get(session, 0) + 240

            h.oc.on_prompt = turn
            result = await h.fire()
            assert result.outcome == "ok" and result.tokens == 480
            assert h.hb.status().tokens == 480
            assert h.hb_events("tick")[-1]["tokens"] == 480
            [tick] = [e.data for e in h.events if e.kind == "heartbeat" and e.data["event"] == "tick"]
            assert tick["status"]["tokens"] == 480

    run(main())


# ---- the message, the frozen prompt, the bookkeeping --------------------------------------------


def test_the_heartbeat_message_agent_model_and_hook_input(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, {"heartbeat_agent": "hbagent"}, spec={"user": "check the notes"}) as h:
            result = await h.fire()
            assert h.oc.prompts == [("ses_1", "[heartbeat] check the notes", "hbagent", MODEL)]
            assert result.user == "check the notes" and result.dispatch_id
            [line] = (h.out / "heartbeat.jsonl").read_text(encoding="utf-8").splitlines()
            payload = json.loads(line)
            assert payload["hook"] == "heartbeat" and payload["sessions"] == []
            assert payload["history"] == []

    run(main())


def test_fallback_to_prompts_heartbeat_md(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, spec={}) as h:
            result = await h.fire()
            assert result.outcome == "ok"
            assert h.oc.prompts[0][1] == f"[heartbeat] {FALLBACK}"
            assert result.user == FALLBACK

    run(main())


def test_no_user_message_at_all_sends_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, heartbeat_md="  \n", spec={"system": ["S"]}) as h:
            result = await h.fire()
            assert result.outcome == "ok" and result.reason is not None
            assert "no user message" in result.reason
            assert h.oc.prompts == []
            assert "heartbeat_count" not in h.state() and "heartbeat_time" not in h.state()
            assert h.engine.sessions.frozen("ses_1") is None  # no message: no seeding

    run(main())


def test_the_hook_system_is_frozen_for_the_heartbeat_session(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path, spec={"system": ["S1", "S2"], "user": "u"}) as h:
            at_prompt: list[list[str] | None] = []
            h.oc.on_prompt = lambda session: at_prompt.append(h.engine.sessions.frozen(session))
            await h.fire()
            assert h.engine.sessions.frozen("ses_1") == ["S1", "S2"]
            assert at_prompt == [["S1", "S2"]]  # seeded before the prompt is sent

            h.spec(system=["S3"], user="u")  # overwritten on every tick
            await h.fire()
            assert h.engine.sessions.frozen("ses_1") == ["S3"]
            # The seeded prompt is what the session's chat requests get (mutate_request is not asked).
            assert await h.engine.bridge.request_system("ses_1", ["opencode's own"]) == ["S3"]

    run(main())


def test_count_and_time_persisted_on_success(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            first = await h.fire()
            assert first.count == 1 and h.state()["heartbeat_count"] == 1
            before = datetime.now(UTC)
            second = await h.fire()
            assert second.count == 2 and h.state()["heartbeat_count"] == 2
            stamp = h.state()["heartbeat_time"]
            assert re.fullmatch(DATETIME, stamp), stamp
            assert datetime.fromisoformat(stamp) >= before - timedelta(milliseconds=1)
            assert h.state()["heartbeat_session"] == "ses_1"
            assert h.hb.status().count == 2 and h.hb.state.ticks == 2
            assert [e["outcome"] for e in h.hb_events("tick")] == ["ok", "ok"]

    run(main())


@pytest.mark.parametrize("user", [True, False])
def test_notify_is_delivered_to_the_other_sessions(tmp_path: Path, user: bool) -> None:
    async def main() -> None:
        spec: dict[str, Any] = {"notify": ["remember X", "and Y"]}
        if user:
            spec["user"] = "u"
        async with harness(tmp_path, spec=spec, heartbeat_md="" if not user else FALLBACK) as h:
            delivered: list[tuple[str, str]] = []

            async def deliver(session: str, text: str) -> None:
                delivered.append((session, text))
                h.signal.fire()

            h.engine.notifier.deliver = deliver
            h.engine.sessions.get("other")
            result = await h.fire()
            assert result.session == "ses_1"
            await h.signal.wait(lambda: bool(delivered), "a delivered notification")
            assert delivered == [("other", WRAPPED.format("remember X | and Y"))]
            [note] = [e.data for e in h.events if e.kind == "notification"]
            assert note["source"] == "ses_1" and note["recipients"] == ["other"]

    run(main())


def test_actions_are_carried_out(tmp_path: Path) -> None:
    async def main() -> None:
        spec = {"user": "u", "actions": [{"type": "create_session", "title": "from heartbeat"}]}
        async with harness(tmp_path, spec=spec) as h:
            await h.fire()
            # Actions go through the engine's bridge; with no opencode connected there, the attempt
            # is reported as an action error (one failing action never fails the tick).
            await h.signal.wait(
                lambda: any(e.kind == "error" and e.data.get("source") == "action" for e in h.events),
                "the action attempt",
            )
            [error] = [e.data for e in h.events if e.kind == "error" and e.data.get("source") == "action"]
            assert error["message"].startswith("action create_session failed")
            assert h.results[-1].outcome == "ok"

    run(main())


@pytest.mark.parametrize(
    "yields",
    [
        0,
        20,
    ],
)
def test_a_commit_with_origin_heartbeat_when_the_hook_changed_a_file(tmp_path: Path, yields: int) -> None:
    async def main() -> None:
        async with harness(tmp_path, spec={"user": "u", "touch": ["notes/beat.txt", "beat\n"]}) as h:
            h.oc.yields = yields
            head = h.engine.git.head()
            result = await h.fire()
            assert result.outcome == "ok"
            await until(lambda: not h.engine.activity.busy, "the engine to settle")
            commits = h.engine.git.log()
            new = commits[: next(i for i, c in enumerate(commits) if c["sha"] == head)]
            assert [c["files"] for c in new] == [["notes/beat.txt"]], new
            [commit] = new
            assert commit["trailers"]["origin"] == "heartbeat"
            assert commit["trailers"]["session"] == "ses_1"
            assert commit["trailers"]["stage"] == "heartbeat"
            assert h.engine.git.dirty_files() == []

    run(main())


def test_no_commit_when_nothing_changed(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            head = h.engine.git.head()
            await h.fire()
            await until(lambda: not h.engine.activity.busy, "the engine to settle")
            assert h.engine.git.head() == head

    run(main())


def test_skips_are_journaled(tmp_path: Path) -> None:
    async def main() -> None:
        async with harness(tmp_path) as h:
            h.oc.busy = {"ses_other"}
            await h.fire()
            h.oc.busy = set()
            await h.fire()  # overwrites heartbeat_last
            assert h.engine.journal is not None
            h.engine.journal.flush()
            conn = sqlite3.connect(h.engine.workspace.journal_file)
            try:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                rows = [str(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"')]
            finally:
                conn.close()
            assert any("other sessions active" in row for row in rows)

    run(main())
