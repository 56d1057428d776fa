"""Jobs of one kind that run in the background (replays, behaviour checks): each is a task and the
record that says how it goes, started, listed, polled, waited for and cancelled by id.

A job's record is answered while it runs and, once it has ended, among the last finished ones
(`KEEP_IN_MEMORY`); the last finished record of each change (its target) is kept in a file of the
store (`KEEP_RESULTS` files, the oldest go first). Progress is published at most every
`PROGRESS_EVERY_S` (the first and the last always), the end of a job as its brief record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

from engine.core import strictjson
from engine.protocol.records import Record
from engine.workspace.layout import write_atomic

log = logging.getLogger("evolve.jobs")

KEEP_RESULTS: Final = 200  # files in the store (the oldest go first)
KEEP_IN_MEMORY: Final = 20  # finished jobs answered by id
PROGRESS_EVERY_S: Final = 0.2


class JobRecord(Protocol):
    """What a job's record says of it (ReplayResult, EvalRun)."""

    id: str
    target: str  # the change it is about: a commit's sha, a pending change's id
    state: str  # running | done | cancelled | failed
    error: str | None
    finished_at: float | None
    duration_ms: float
    done: int
    total: int

    def to_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=JobRecord)


@dataclass
class _Running(Generic[R]):
    record: R
    task: asyncio.Task[R]
    key: Hashable  # what was asked: the same job asked again while it runs is that one


class Jobs(Generic[R]):
    """The jobs of one kind; a service that runs them (Replayer, Evals) is its Jobs, and starts each
    with `launch`."""

    def __init__(
        self,
        *,
        noun: str,
        store: Path,
        publish: Callable[[Record], Any],
        progress: Callable[[str, str, int, int, str], Record],
        brief: Callable[[R], Record],
        load: Callable[[Any], R],
        error: Callable[[str], Exception],
    ) -> None:
        """`noun`: what a job is called in messages ("replay"); `progress`: the progress record of
        (id, target, done, total, message); `brief`: the record published when a job ends; `load`:
        a record from its kept JSON; `error`: the exception raised for an unknown id."""
        self._noun = noun
        self._store = store
        self._publish_job = publish
        self._progress_record = progress
        self._brief = brief
        self._load = load
        self._error = error
        self._jobs_running: dict[str, _Running[R]] = {}
        self._jobs_finished: OrderedDict[str, R] = OrderedDict()
        self._last_progress: dict[str, float] = {}
        self._jobs_spawned: set[asyncio.Task[Any]] = set()

    def under_way(self, key: Hashable) -> R | None:
        """The job running for the same question, if any."""
        for running in self._jobs_running.values():
            if running.key == key:
                return running.record
        return None

    def launch(self, record: R, work: Coroutine[Any, Any, R], key: Hashable, name: str) -> R:
        """Run `work` as the job `record` (which `work` finishes with `finish`)."""
        task = asyncio.create_task(work, name=name)
        self._jobs_running[record.id] = _Running(record, task, key)
        self.progress(record, "starting", force=True)
        return record

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Work that starts jobs later (a held change read first): cancelled on close."""
        task = asyncio.get_running_loop().create_task(work)
        self._jobs_spawned.add(task)
        task.add_done_callback(self._jobs_spawned.discard)

    async def wait(self, job_id: str) -> R:
        found = self._jobs_running.get(job_id)
        if found is None:
            done = self.get(job_id)
            if done is None:
                raise self._error(f"no {self._noun} {job_id!r}")
            return done
        return await asyncio.shield(found.task)

    def get(self, job_id: str) -> R | None:
        """A job under way or among the last finished ones."""
        found = self._jobs_running.get(job_id)
        return found.record if found else self._jobs_finished.get(job_id)

    def cancel(self, job_id: str) -> bool:
        """Stop a job under way; False when none runs by that id."""
        found = self._jobs_running.get(job_id)
        if found is None:
            return False
        found.task.cancel()
        return True

    def running(self, target: str) -> Iterator[tuple[R, asyncio.Task[R]]]:
        """The jobs under way about `target`, oldest first."""
        for running in list(self._jobs_running.values()):
            if running.record.target == target:
                yield running.record, running.task

    def latest(self, target: str) -> R | None:
        """The job of a change (sha or pending id) under way, else the last one kept."""
        running = [record for record, _task in self.running(target)]
        if running:
            return running[-1]
        try:
            return self._load(json.loads(self._path(target).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def progress(self, record: R, message: str, force: bool = False) -> None:
        now = time.monotonic()
        recent = now - self._last_progress.get(record.id, 0.0) < PROGRESS_EVERY_S
        if recent and not force and record.done < record.total:
            return
        self._last_progress[record.id] = now
        self._publish_job(self._progress_record(record.id, record.target, record.done, record.total, message))

    async def finish(self, record: R, started: float, keep: bool = True) -> None:
        """The job has ended (its state is set; `started`: its time.perf_counter() at the start):
        answered among the finished ones, kept (unless cancelled, or not `keep`), published."""
        record.finished_at = time.time()
        record.duration_ms = (time.perf_counter() - started) * 1000
        self._jobs_running.pop(record.id, None)
        self._last_progress.pop(record.id, None)
        self._jobs_finished[record.id] = record
        while len(self._jobs_finished) > KEEP_IN_MEMORY:
            self._jobs_finished.popitem(last=False)
        if keep and record.state != "cancelled":
            try:
                await asyncio.to_thread(self._keep, record)
            except Exception:  # the job is answered whatever its file could not be
                log.exception("cannot keep the %s %s in %s", self._noun, record.id, self._store)
        self._publish_job(self._brief(record))

    async def close(self) -> None:
        for task in list(self._jobs_spawned):
            task.cancel()
        for running in list(self._jobs_running.values()):
            running.task.cancel()
        await asyncio.gather(
            *self._jobs_spawned, *(r.task for r in self._jobs_running.values()), return_exceptions=True
        )

    def _path(self, target: str) -> Path:
        return self._store / f"{os.path.basename(target)}.json"

    def _keep(self, record: R) -> None:
        # strictjson: text with a lone surrogate (a session id a client sent) is kept, \u-escaped;
        # parents=False: a workspace deleted under the engine is not made again
        write_atomic(self._path(record.target), strictjson.dumps(record.to_dict()).encode(), parents=False)
        kept = sorted(self._store.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in kept[: max(len(kept) - KEEP_RESULTS, 0)]:
            with contextlib.suppress(OSError):
                old.unlink()
