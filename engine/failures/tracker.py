"""Hooks failing at a stage, followed from the bus: when a hook starts failing at a stage, the engine
names the error's own last line and the change that most likely caused it, publishes it (a `failure`
event, `started`), counts the failed runs that follow (`failing`), and says when it runs fine there
again (`cleared`).

A run that belongs to a dispatch is explained once the dispatch has ended (its `stage` event), so
that what the stage fell back to (the recover defaults) is part of it. A restarted engine finds the
hooks still failing in the journal. The failure of any failed run, current or long over, is rebuilt
from the journal on demand (`of_run`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from engine.changes.gitreads import GitReads
from engine.core.bus import EventBus
from engine.failures.errorline import error_line, where
from engine.failures.suspects import cause_text, depends_on, find_suspect
from engine.journal.store import Journal
from engine.protocol.events import Event, EventKind
from engine.protocol.records import FailingSince, Failure, HookRun, JSONDict, StageResult, new_id
from engine.protocol.stages import NO_RECOVER

log = logging.getLogger("evolve.failures")

QUIET_S: Final = 60.0  # a hook that failed there less than this before starts again: it `recurs`
KEEP_CLEARED: Final = 20
KEEP_COMMITS: Final = 1000  # when the commits this engine made were made, to the fraction of a second
KEEP_RUN_IDS: Final = 1000  # the runs of a failure remembered, to answer which failure a run is

Key = tuple[str, str]  # (hook, stage)


@dataclass
class _Episode:
    failure: Failure
    stderr: str  # the first failed run's, for the files its error names
    runs: set[str] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    announced: bool = False


def describe_fallback(result: StageResult) -> str | None:
    """What a dispatch fell back to, in words."""
    if not result.recovered:
        return None
    if result.defaults:
        sources = {
            "system": "the system prompt from prompts/preamble.md and prompts/recover.md",
            "user": "the message from prompts/recover.md",
        }
        filled = " and ".join(sources.get(k, k) for k in result.defaults)
        return f"the stage fell back to the recover defaults: {filled}"
    return "the stage fell back to what the recover stage's hooks answered"


class Failures:
    def __init__(
        self,
        *,
        root: Path,
        git: GitReads,
        journal: Journal | None,
        bus: EventBus,
        session_title: Callable[[str], str | None],
    ) -> None:
        self._root = root
        self._git = git
        self._journal = journal
        self._bus = bus
        self._title = session_title
        self._active: dict[Key, _Episode] = {}
        self._cleared: OrderedDict[str, _Episode] = OrderedDict()
        self._awaiting: dict[str, list[_Episode]] = {}  # dispatch id -> failures explained at its end
        self._last_ok: dict[Key, float] = {}
        self._last_cleared: dict[Key, float] = {}
        self._committed: OrderedDict[str, float] = OrderedDict()  # sha -> when it was announced

    # ---- from the bus ---------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """The bus listener: hook runs start, continue and clear failures; a dispatch's end lets
        its failures be explained. Never raises: it runs inside whoever published."""
        try:
            if event.kind == EventKind.HOOK_RUN:
                self._run(event.data)
            elif event.kind == EventKind.STAGE:
                self._stage(event.data)
            elif event.kind == EventKind.COMMIT:
                self._committed[str(event.data.get("sha"))] = event.at
                while len(self._committed) > KEEP_COMMITS:
                    self._committed.popitem(last=False)
        except Exception:
            log.exception("following the failures of hooks (event %s)", event.kind)

    def _run(self, data: JSONDict) -> None:
        hook, stage = str(data.get("hook") or ""), str(data.get("stage") or "")
        if not hook or not stage:
            return
        key = (hook, stage)
        at = float(data.get("started_at") or 0.0)
        run_id = str(data.get("id") or "")
        if data.get("error") is None:
            self._last_ok[key] = max(self._last_ok.get(key, 0.0), at)
            episode = self._active.pop(key, None)
            if episode is not None:
                self._clear(key, episode, run_id, at)
            return
        stderr, error = str(data.get("stderr") or ""), str(data.get("error"))
        episode = self._active.get(key)
        if episode is None:
            episode = self._begin(key, run_id, at, stderr)
            dispatch = data.get("dispatch_id")
            if isinstance(dispatch, str) and stage not in NO_RECOVER:
                self._awaiting.setdefault(dispatch, []).append(episode)
            else:
                self._explain(episode)
        else:
            episode.failure.runs += 1
        failure = episode.failure
        failure.last_run, failure.last_at = run_id, at
        failure.error, failure.exit = error_line(stderr, error), error
        failure.where = where(stderr, self._root) or failure.where
        if len(episode.runs) < KEEP_RUN_IDS:
            episode.runs.add(run_id)
        if episode.announced:
            failure.state = "failing"
            self._bus.publish(replace(failure))

    def _begin(self, key: Key, run_id: str, at: float, stderr: str) -> _Episode:
        hook, stage = key
        cleared = self._last_cleared.get(key)
        failure = Failure(
            id=new_id("flr"),
            hook=hook,
            stage=stage,
            runs=1,
            first_run=run_id,
            first_at=at,
            last_ok_at=self._last_ok.get(key),
            recurs=cleared is not None and at - cleared < QUIET_S,
        )
        episode = _Episode(failure, stderr)
        self._active[key] = episode
        return episode

    def _stage(self, data: JSONDict) -> None:
        waiting = self._awaiting.pop(str(data.get("id") or ""), None)
        if not waiting:
            return
        try:
            result = StageResult.from_dict(data)
        except (TypeError, ValueError):
            result = None
        for episode in waiting:
            if result is not None:
                episode.failure.fallback = describe_fallback(result)
            self._explain(episode)

    def _clear(self, key: Key, episode: _Episode, run_id: str, at: float) -> None:
        failure = episode.failure
        failure.state, failure.cleared_at, failure.cleared_by = "cleared", at, run_id
        self._last_cleared[key] = at
        self._cleared[failure.id] = episode
        while len(self._cleared) > KEEP_CLEARED:
            self._cleared.popitem(last=False)
        if episode.task is not None and not episode.task.done():
            episode.task.cancel()  # never announced: nobody waits for it
        elif episode.announced:
            self._bus.publish(replace(failure))

    # ---- explaining -----------------------------------------------------------------------------

    def _explain(self, episode: _Episode) -> None:
        if episode.task is None:
            episode.task = asyncio.get_running_loop().create_task(
                self._announce(episode), name=f"explain {episode.failure.hook}"
            )

    async def _announce(self, episode: _Episode) -> None:
        failure = episode.failure
        try:
            await asyncio.to_thread(self._analyse, failure, episode.stderr, dict(self._committed))
        except Exception as exc:  # git or the journal failed: the failure is still told, unexplained
            log.warning("cannot explain the failure of hooks/%s: %s", failure.hook, exc)
            failure.cause = "the engine could not look for the change behind it (see the engine log)"
        failure.message = message(failure)
        episode.announced = True
        if failure.state != "cleared":
            failure.state = "started"
            self._bus.publish(replace(failure))
            failure.state = "failing"

    def _analyse(self, failure: Failure, stderr: str, committed: dict[str, float]) -> None:
        """Fill in `failure.suspect` and `cause` (in a thread: git and the journal)."""
        if failure.last_ok_at is None and self._journal is not None:
            before = self._journal.runs(
                stage=failure.stage, hook=failure.hook, failed=False, before=failure.first_at, limit=1
            )
            failure.last_ok_at = before[0].started_at if before else None
        depends = depends_on(failure.hook, stderr, self._root)
        failure.suspect = find_suspect(
            self._git, depends, failure.first_at, failure.last_ok_at, self._title, committed
        )
        failure.cause = cause_text(failure.suspect, failure.stage, failure.last_ok_at, failure.first_at)

    # ---- at start -------------------------------------------------------------------------------

    async def start(self) -> None:
        """The hooks the journal shows failing still (their newest runs at a stage failed): each is
        a failure again, explained anew, published as `started`."""
        if self._journal is None:
            return
        try:
            found = await asyncio.to_thread(self._journal.failing_hooks)
        except Exception as exc:
            log.warning("cannot read the failing hooks from the journal: %s", exc)
            return
        for row in found:
            key = (str(row["hook"]), str(row["stage"]))
            if key in self._active:
                continue
            first = await asyncio.to_thread(self._journal.run, str(row.get("first") or ""))
            last = await asyncio.to_thread(self._journal.run, str(row.get("last") or ""))
            episode = self._begin(key, str(row.get("first") or ""), float(row["first_at"]), "")
            failure = episode.failure
            failure.runs, failure.last_ok_at = int(row["runs"]), row.get("last_ok_at")
            failure.last_run, failure.last_at = str(row.get("last") or ""), float(row["last_at"])
            self._fill_errors(episode, first, last)
            self._explain(episode)

    def _fill_errors(self, episode: _Episode, first: HookRun | None, last: HookRun | None) -> None:
        failure = episode.failure
        if first is not None:
            episode.stderr = first.stderr
        shown = last or first
        if shown is not None:
            failure.error, failure.exit = error_line(shown.stderr, shown.error), shown.error
            failure.where = where(shown.stderr, self._root)

    async def close(self) -> None:
        tasks = [e.task for e in [*self._active.values(), *self._cleared.values()] if e.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ---- reading --------------------------------------------------------------------------------

    def active(self) -> list[Failure]:
        """The hooks failing now whose cause is known, newest failure first."""
        found = [replace(e.failure) for e in self._active.values() if e.announced]
        return sorted(found, key=lambda f: f.last_at, reverse=True)

    def cleared(self) -> list[Failure]:
        """Those that ran fine again since this engine started, newest first."""
        return [replace(e.failure) for e in reversed(self._cleared.values()) if e.announced]

    def failing_since(self) -> dict[str, list[FailingSince]]:
        """Per commit, the hooks that have failed since it (the changes listing's `failing`)."""
        out: dict[str, list[FailingSince]] = {}
        for failure in self.active():
            if failure.suspect is not None:
                out.setdefault(failure.suspect.sha, []).append(
                    FailingSince(
                        failure.id, failure.hook, failure.stage, failure.runs, failure.first_at, failure.error
                    )
                )
        return out

    async def of_dispatch(self, result: StageResult) -> list[Failure]:
        """The failures of a dispatch's failed hooks, explained (waits for that)."""
        episodes: list[_Episode] = []
        for hook in dict.fromkeys(result.failed):
            episode = self._active.get((hook, result.stage))
            if episode is None:
                continue
            if episode.task is None:  # its stage event is not handled yet
                episode.failure.fallback = describe_fallback(result)
                waiting = self._awaiting.get(result.id)
                if waiting and episode in waiting:
                    waiting.remove(episode)
                self._explain(episode)
            episodes.append(episode)
        for episode in episodes:
            if episode.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(episode.task)
        return [replace(e.failure) for e in episodes]

    async def of_run(self, run: HookRun) -> Failure | None:
        """The failure a failed run is part of: the current one, one that cleared lately, or one
        rebuilt from the journal (its first failed run, how many, whether and when it cleared)."""
        if run.ok:
            return None
        for episode in [*self._active.values(), *self._cleared.values()]:
            if run.id in episode.runs:
                if episode.task is not None and not episode.announced:
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.shield(episode.task)
                return replace(episode.failure)
        if self._journal is None:
            return None
        return await asyncio.to_thread(self._rebuilt, run, dict(self._committed))

    def _rebuilt(self, run: HookRun, committed: dict[str, float]) -> Failure:
        assert self._journal is not None
        streak: dict[str, Any] = self._journal.streak(run.hook, run.stage, run.started_at)
        first_id = streak.get("first") or run.id
        first = self._journal.run(first_id) if first_id != run.id else run
        failure = Failure(
            id=f"flr_{first_id}",
            hook=run.hook,
            stage=run.stage,
            state="failing",
            runs=int(streak.get("runs") or 1),
            first_run=first_id,
            first_at=float(streak.get("first_at") or run.started_at),
            last_run=run.id,
            last_at=run.started_at,
            last_ok_at=streak.get("last_ok_at"),
        )
        if streak.get("next_ok"):
            failure.state, failure.cleared_by = "cleared", str(streak["next_ok"])
            failure.cleared_at = float(streak["next_ok_at"])
        failure.error, failure.exit = error_line(run.stderr, run.error), run.error
        failure.where = where(run.stderr, self._root)
        dispatch = self._journal.dispatch(run.dispatch_id) if run.dispatch_id else None
        if dispatch is not None:
            failure.fallback = describe_fallback(dispatch)
        self._analyse(failure, first.stderr if first is not None else run.stderr, committed)
        failure.message = message(failure)
        return failure


def message(failure: Failure) -> str:
    """The alert: `hooks/notes.py started failing at heartbeat: TypeError: … (since 7a46fd1, …)`."""
    text = f"hooks/{failure.hook} started failing at {failure.stage}: {failure.error}"
    return text + (f" ({failure.cause})" if failure.cause else "")
