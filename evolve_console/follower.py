"""One agent's connection to its engine: the workers that follow it.

A long-lived worker follows the engine's event stream into the agent's model (anew after the engine
went away, with the engine's announcement read again); a check asks an engine that has been quiet,
or whose request failed, whether it still answers; parts the events only announce, those a view
asks for (`Reload`) and the journal's exact counts are fetched in workers. Each agent has its own
workers, with their own timeouts, so one engine that hangs holds up nobody else. The console (the
app) runs the workers and draws what they fetched (`Host`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from textual.css.query import NoMatches
from textual.message import Message
from textual.worker import Worker, WorkerState

from .agent import Agent
from .client import EngineError, EngineGone
from .fleetrows import SLOW_S
from .messages import ConnectionChanged
from .parts import PART_NAMES, Part, Update

# Sessions first: the other tables name sessions by their titles.
LOAD_ORDER = (
    Part.STATUS,
    Part.SESSIONS,
    Part.RUNS,
    Part.STAGES,
    Part.CHANGES,
    Part.FAILURES,
    Part.HEARTBEAT,
    Part.TICKS,
    Part.TOOLS,
)
REFRESH_ORDER = (
    Part.RUNS,
    Part.STAGES,
    Part.SESSIONS,
    Part.CHANGES,
    Part.FAILURES,
    Part.HEARTBEAT,
    Part.TICKS,
    Part.STATUS,
    Part.TOOLS,
)
FLOOD = 100  # pending events per tick (a quarter second) above which repaints slow down
HEALTH_TIMEOUT_S = 10.0  # after a request failed, an engine slower than this to answer counts as down
QUIET_S = 1.0  # an engine silent this long is asked whether it still answers (its row says when not)
WATCH_S = 0.25  # how often the console looks for engines gone quiet (a row says so within ~2.5 s)
GAP_RELOAD_S = 2.0  # the runs reloaded for events dropped on the way at most this often


class Host(Protocol):
    """What a follower asks of the console: to run its workers, to hear of the connection
    (`ConnectionChanged`), to fetch and draw a part, and what to do once everything was loaded."""

    def run_worker(
        self,
        work: Coroutine[Any, Any, None],
        name: str | None = "",
        group: str = "default",
        *,
        exit_on_error: bool,
    ) -> Worker[None]: ...

    def post_message(self, message: Message) -> bool: ...

    async def reload(self, part: Part, draw: bool = True, agent: Agent | None = None) -> None: ...

    def loaded(self, agent: Agent, first: bool) -> None: ...


class Follower:
    """The workers of one `agent`'s connection: the latest of each kind (a new reload of a part
    replaces the one before), and all it runs (`owns`: whose failure it is)."""

    def __init__(self, agent: Agent, host: Host) -> None:
        self.agent = agent
        self.host = host
        self._latest: dict[str, Worker[None]] = {}  # what a worker does -> the latest one
        self._running: set[Worker[Any]] = set()
        self._runs_reloaded = float("-inf")  # when the announced parts last included the runs

    def _run(
        self, what: str, work: Coroutine[Any, Any, None], *, group: str, name: str, replace: bool = True
    ) -> None:
        """A worker for the agent; `replace`: the one before it of the same kind is cancelled (the
        latest wins)."""
        old = self._latest.get(what)
        if replace and old is not None and not old.is_finished:
            old.cancel()
        worker = self.host.run_worker(work, name=name, group=group, exit_on_error=False)
        self._latest[what] = worker
        self._running.add(worker)

    def busy(self, what: str) -> bool:
        worker = self._latest.get(what)
        return worker is not None and not worker.is_finished

    def owns(self, worker: Worker[Any]) -> bool:
        return worker in self._running

    def finished(self, worker: Worker[Any]) -> None:
        self._running.discard(worker)

    def follow(self) -> None:
        """Follow the event stream (anew: a stream that may hang on a dead connection is dropped)."""
        self._run("stream", self._follow(), group="engine-stream", name=f"follow {self.agent.name}")

    async def _follow(self) -> None:
        agent = self.agent
        delay = 0.5
        while True:
            try:
                health = await agent.health(timeout=HEALTH_TIMEOUT_S)
                agent.verify(health)
                since = agent.model.apply_health(health)
                await self.load_all()
                self.host.post_message(
                    ConnectionChanged(True, f"{agent.target.url} · pid {health.pid}", agent.name)
                )
                delay = 0.5
                async for event in agent.client.events(since):
                    agent.model.receive(event)
                    agent.heard()
                    if event.seq % 20 == 0:
                        # Buffered events arrive without the loop ever waiting: let keys and
                        # repaints in between.
                        await asyncio.sleep(0)
                raise EngineGone("the event stream ended")
            except (EngineGone, EngineError) as exc:
                self.host.post_message(ConnectionChanged(False, str(exc), agent.name))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                await agent.rediscover()

    def check(self, now: float) -> None:
        """After a request failed, or the engine went quiet: the engine is down only if its health
        check fails too; then the stream is followed anew (it may hang on a dead connection),
        which says when it is back. Until the check answers, the engine counts as slow."""
        if not self.busy("check"):
            if self.agent.slow_since is None:
                self.agent.slow_since = now
            self._run("check", self._check(), group="engine-check", name="check the engine")

    async def _check(self) -> None:
        try:
            await self.agent.health(timeout=HEALTH_TIMEOUT_S)
        except (EngineGone, EngineError) as exc:
            self.host.post_message(ConnectionChanged(False, str(exc), self.agent.name))
            self.follow()

    def watch(self, now: float) -> bool:
        """Ask the engine whether it still answers if it has gone quiet; True when it has just
        become slow to answer (its fleet row says so at once)."""
        agent = self.agent
        if agent.model.connected and (agent.heard_at is None or now - agent.heard_at > QUIET_S):
            self.check(now)
        return agent.slow_since is not None and 0 <= now - agent.slow_since - SLOW_S < WATCH_S

    async def load_all(self) -> None:
        """Everything from the journal and git, so history survives console and engine restarts."""
        agent = self.agent
        for part in LOAD_ORDER:
            await self.host.reload(part, draw=part is not Part.STATUS, agent=agent)
        agent.heard()
        first = not agent.first_load.is_set()
        self.host.loaded(agent, first)
        if first:
            # The widgets, styles and history loaded so far live as long as the console. Without
            # this, every full garbage collection walks them all again (about 45 ms here, every
            # few seconds under a flood of runs), and a key press waiting behind one shows late.
            # (Making the later full collections rarer does not pay: the cyclic garbage of the
            # event loop piles up in between, and one collection then takes 60 ms, not 8.)
            gc.collect()
            gc.freeze()
            agent.looked()  # what it held when the console opened is not news
        agent.first_load.set()

    def reload(self, part: Part) -> None:
        """Fetch `part` anew in a worker (the latest request for a part wins: filters typed in
        quick succession)."""
        self._run(
            f"reload-{part}",
            self.host.reload(part, agent=self.agent),
            group=f"reload-{part}",
            name=f"load {PART_NAMES[part]}",
        )

    def batch(self, tick: int) -> Update | None:
        """The events received since the last batch, applied to the model (at the `tick`th batch);
        the parts they announced are fetched. Under a flood, once a second instead of four times:
        each repaint of a scrolled table costs real time, and the keyboard must stay responsive."""
        model = self.agent.model
        if model.waiting > FLOOD and tick % 4:
            return None
        update = model.apply_waiting() if model.waiting else None
        self.refresh(self._due(model.take_reloads()))
        return update

    def _due(self, parts: set[Part]) -> set[Part]:
        """`parts` but the runs when they were reloaded less than `GAP_RELOAD_S` ago: under a flood
        the engine drops events on the way at every batch, and each reload fetches and redraws the
        whole history, which held the keyboard up once or twice a second. The runs meanwhile are
        counted (the journal's counts) and those received are shown; the reload left out waits in
        the model (`ConsoleModel.stale`) and comes once the interval is over."""
        if Part.RUNS not in parts:
            return parts
        now = time.monotonic()
        if now - self._runs_reloaded < GAP_RELOAD_S:
            self.agent.model.stale.add(Part.RUNS)
            return parts - {Part.RUNS}
        self._runs_reloaded = now
        return parts

    def refresh(self, parts: set[Part]) -> None:
        """Fetch the parts the events announced, in a worker of their own."""
        if parts:
            self._run(
                "refresh",
                self._refresh(parts),
                group="refresh",
                name="load what the engine announced",
                replace=False,
            )

    async def _refresh(self, parts: set[Part]) -> None:
        for part in REFRESH_ORDER:
            if part in parts:
                await self.host.reload(part, agent=self.agent)

    def count(self) -> None:
        """The journal's exact counts (live events only estimate them), unless the last read has
        not finished."""
        if self.agent.model.connected and not self.busy("counts"):
            self._run("counts", self._count(), group="counts", name="read the journal's counts")

    async def _count(self) -> None:
        with contextlib.suppress(NoMatches):
            await self.host.reload(Part.COUNTS, agent=self.agent)


class Followers:
    """The follower of each agent, and what the console asks of them all."""

    def __init__(self, agents: list[Agent], host: Host) -> None:
        self._by_name = {agent.name: Follower(agent, host) for agent in agents}

    def of(self, agent: Agent) -> Follower:
        return self._by_name[agent.name]

    def follow(self) -> None:
        for follower in self._by_name.values():
            follower.follow()

    def count(self) -> None:
        """The journal's exact counts, each agent's in a worker of its own."""
        for follower in self._by_name.values():
            follower.count()

    def watch(self, now: float) -> bool:
        """Ask each engine gone quiet whether it still answers; True when one has just become slow."""
        return any([follower.watch(now) for follower in self._by_name.values()])

    def owner(self, event: Worker.StateChanged) -> str | None:
        """The name of the agent whose worker changed state (None: not a follower's); a finished
        worker is forgotten."""
        found = next((f for f in self._by_name.values() if f.owns(event.worker)), None)
        if found is None:
            return None
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            found.finished(event.worker)
        return found.agent.name
