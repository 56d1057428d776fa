"""Replay: what a change to a hook, a prompt or the config does to the agent's real traffic.

A change is a commit or a pending change (the review gate). Its replay plays the journal's most
recent recorded inputs of each stage it can affect (engine.replay_inputs) with the version before the
change, twice, and with the version after it, each in a throwaway copy of the workspace (the copy
validation makes: no `.git`, no `state/`; the hooks see the copy as `OPENCODE_EVOLVE_WORKSPACE` and
run there). Every stage is dispatched as the engine dispatches it (engine.dispatch: every hook that
handles it, merged, recover on failure; the prompts come from the copy's prompts/), through the same
hook runner (engine.runner.execute). The two runs of the version before tell what varies from run to
run anyway; the rest is compared field by field (engine.replay_compare). The copies and their runs: engine.replay_version.

The version before is the workspace as it is now with the change's files as they were before the
change; the version after, with them as the change made them (for a pending change: now, and now
with the proposed content). So only the change differs between the two.

Replay runs are not journaled and not published as hook runs: the journal and the console's runs
view stay the record of what the agent really did. The last finished replay of each change is kept
in `state/replays/<sha or pending id>.json`; progress and the end of a replay are events.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engine.changes.gitstore import GitError, GitStore
from engine.changes.history import ChangeError
from engine.core import strictjson
from engine.hooks.groups import run_owner
from engine.journal.store import Journal
from engine.protocol.records import (
    InputComparison,
    PendingChange,
    Record,
    ReplayProgress,
    ReplayResult,
    StageComparison,
    new_id,
)
from engine.protocol.stages import Stage
from engine.replay.clock import Window
from engine.replay.compare import Outcome, compare_input, stage_comparison
from engine.replay.inputs import (
    UNCONTAINED,
    UNCONTAINED_WARNING,
    Recorded,
    affected_stages,
    check_stages,
    recorded_inputs,
)
from engine.replay.version import FileVersion, Overlay, Version, materialize
from engine.replay.version import ReplayError as ReplayError  # the error callers of the replayer catch
from engine.workspace.copies import new_copy_dir
from engine.workspace.layout import write_atomic

log = logging.getLogger("evolve.replay")

DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 200
KEEP_RESULTS: Final = 200  # files in state/replays/ (the oldest go first)
KEEP_IN_MEMORY: Final = 20  # finished replays answered by id
DEFAULT_REPLAYS: Final = 2  # replays that run at once (config: max_replays)
PROGRESS_EVERY_S: Final = 0.2


@dataclass
class Change:
    """What a replay compares: the workspace with `before` laid over it, and with `after`."""

    kind: str  # commit | pending
    target: str  # the commit's sha, or the pending change's id
    title: str
    files: list[str]
    before: Overlay
    after: Overlay
    before_text: str
    after_text: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Running:
    record: ReplayResult
    task: asyncio.Task[ReplayResult]
    asked: list[str] | None  # the stages asked for, None: those the change can affect


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Replayer:
    """Replays changes: one task per replay, hook processes bounded by the number of cores across all
    of them; cancelled replays kill what they started."""

    def __init__(
        self,
        root: Path,
        git: GitStore,
        journal: Journal | None,
        env: Mapping[str, str],
        publish: Callable[[Record], Any],
        pending: Callable[[str], PendingChange],
        store: Path,
        slots: int | None = None,
        limit: int = DEFAULT_REPLAYS,
    ) -> None:
        """`slots`: hook processes at once across every replay (the cores); `limit`: replays that
        run at once (each holds three copies of the workspace), the others wait their turn."""
        self._root = root
        self._git = git
        self._journal = journal
        self._env = dict(env)
        self._publish = publish
        self._pending = pending
        self._store = store
        self._slots = asyncio.Semaphore(slots or os.cpu_count() or 1)
        self._owner = run_owner(root)
        self._limit = max(1, limit)
        self._replays = asyncio.Semaphore(self._limit)
        self._running: dict[str, _Running] = {}
        self._finished: OrderedDict[str, ReplayResult] = OrderedDict()
        self._spawned: set[asyncio.Task[Any]] = set()
        self._last_progress: dict[str, float] = {}

    # ---- what to replay ---------------------------------------------------------------------

    async def commit(self, rev: str) -> Change:
        return await asyncio.to_thread(self._commit, rev)

    def _commit(self, rev: str) -> Change:
        try:
            sha = self._git.resolve(rev)
        except GitError:
            sha = ""
        if not sha:
            raise ReplayError(f"no commit {rev!r} in {self._root}")
        files = self._git.files_changed(sha)
        if not files:
            raise ReplayError(f"commit {sha[:10]} changes no file: nothing to replay")
        parent = self._git.first_parent(sha)
        before: Overlay = {f: self._file_at(parent, f) if parent else None for f in files}
        after: Overlay = {f: self._file_at(sha, f) for f in files}
        subject = self._git.subject(sha) or sha[:10]
        one = len(files) == 1
        what = files[0] if one else f"the {len(files)} files it changed"
        return Change(
            kind="commit",
            target=sha,
            title=subject,
            files=files,
            before=before,
            after=after,
            before_text=f"the workspace now, with {what} as before {sha[:10]}"
            + ("" if parent else f" (absent: {sha[:10]} is the first commit)"),
            after_text=f"the workspace now, with {what} as {sha[:10]} made {'it' if one else 'them'}",
        )

    def _file_at(self, rev: str, path: str) -> FileVersion | None:
        found = self._git.file_at(rev, path)
        return FileVersion(*found) if found is not None else None

    async def pending_change(self, pending_id: str) -> Change:
        return await asyncio.to_thread(self._pending_change, pending_id)

    def _pending_change(self, pending_id: str) -> Change:
        try:
            item = self._pending(pending_id)
        except ChangeError as exc:
            raise ReplayError(str(exc)) from exc
        if item.status != "pending":
            hint = f"; replay its commit {item.commit[:10]} instead" if item.commit else ""
            raise ReplayError(
                f"held change {pending_id} was already {item.status}, so there is no decision left for a "
                f"replay to inform{hint}"
            )
        root = os.path.realpath(self._root)
        real = os.path.realpath(self._root / item.file)
        if os.path.commonpath([root, real]) != root:
            raise ReplayError(f"{item.file} leads out of the workspace; cannot replay")
        rel = os.path.relpath(real, root)
        try:
            st = os.stat(real)
            current: bytes | None = Path(real).read_bytes()
            mode = 0o100755 if st.st_mode & 0o111 else 0o100644
        except OSError:
            current, mode = None, 0o100644
        if item.hook is not None:
            mode = 0o100755  # approval installs a hook executable
        content = (item.content or "").encode("utf-8", "surrogateescape")
        warnings = []
        if _sha256(current or b"") != item.base_sha256:
            warnings.append(
                f"{item.file} changed after the agent proposed this change; the replay compares "
                "with the file as it is now"
            )
        return Change(
            kind="pending",
            target=item.id,
            title=item.message,
            files=[rel],
            before={},
            after={rel: FileVersion(mode, content)},
            before_text="the workspace now",
            after_text=f"the workspace now, with {rel} as the pending change proposes",
            warnings=warnings,
        )

    # ---- running ----------------------------------------------------------------------------

    def start(
        self, change: Change, stages: Sequence[str] | None = None, limit: int = DEFAULT_LIMIT
    ) -> ReplayResult:
        """Start replaying `change` (`stages`: these instead of the ones it can affect); returns the
        replay as it starts (`state: running`). The same replay already under way is returned as is."""
        asked = check_stages(stages) if stages else None
        limit = max(0, min(limit, MAX_LIMIT))
        for running in self._running.values():
            if (running.record.target, running.record.limit, running.asked) == (change.target, limit, asked):
                return running.record
        record = ReplayResult(
            id=new_id("rpl"),
            target=change.target,
            kind=change.kind,
            title=change.title,
            files=list(change.files),
            before=change.before_text,
            after=change.after_text,
            limit=limit,
            warnings=list(change.warnings),
            started_at=time.time(),
        )
        task = asyncio.create_task(self._run(record, change, asked), name=f"replay {change.target}")
        self._running[record.id] = _Running(record, task, asked)
        self._progress(record, "starting", force=True)
        return record

    async def replay(
        self, change: Change, stages: Sequence[str] | None = None, limit: int = DEFAULT_LIMIT
    ) -> ReplayResult:
        """Replay `change` and wait for the result."""
        return await self.wait(self.start(change, stages, limit).id)

    async def wait(self, replay_id: str) -> ReplayResult:
        found = self._running.get(replay_id)
        if found is None:
            done = self.get(replay_id)
            if done is None:
                raise ReplayError(f"no replay {replay_id!r}")
            return done
        return await asyncio.shield(found.task)

    def get(self, replay_id: str) -> ReplayResult | None:
        """A replay under way or among the last finished ones."""
        found = self._running.get(replay_id)
        return found.record if found else self._finished.get(replay_id)

    def cancel(self, replay_id: str) -> bool:
        """Stop a replay under way (its hook processes are killed); False when none runs by that id."""
        found = self._running.get(replay_id)
        if found is None:
            return False
        found.task.cancel()
        return True

    def stop(self, target: str, status: str) -> None:
        """A held change was decided or went stale (`status`): its replays under way stop, since
        their result can no longer inform a decision (cancelled, and they say why)."""
        for running in list(self._running.values()):
            if running.record.target == target and not running.task.done():
                running.record.error = f"stopped: the change was {status} while it was replayed"
                running.task.cancel()

    def latest(self, target: str) -> ReplayResult | None:
        """The replay of a change (sha or pending id) under way, else the last one kept."""
        running = [r.record for r in self._running.values() if r.record.target == target]
        if running:
            return running[-1]
        try:
            data = json.loads(self._path(target).read_text(encoding="utf-8"))
            return ReplayResult.from_dict(data)
        except (OSError, ValueError, TypeError):
            return None

    def held(self, pending: PendingChange) -> None:
        """A change was held for review: replay it at once, so the reviewer sees its effect."""
        task = asyncio.get_running_loop().create_task(self._replay_held(pending.id))
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    async def _replay_held(self, pending_id: str) -> None:
        try:
            change = await self.pending_change(pending_id)
            if self._pending(pending_id).status == "pending":  # not decided while it was read
                self.start(change)
        except (ReplayError, ChangeError) as exc:
            log.warning("replay of pending change %s: %s", pending_id, exc)

    async def close(self) -> None:
        for task in list(self._spawned):
            task.cancel()
        for running in list(self._running.values()):
            running.task.cancel()
        await asyncio.gather(
            *self._spawned, *(r.task for r in self._running.values()), return_exceptions=True
        )

    async def _run(self, record: ReplayResult, change: Change, asked: list[str] | None) -> ReplayResult:
        started = time.perf_counter()
        try:
            if self._replays.locked():
                self._progress(
                    record,
                    f"queued: {self._limit} replay(s) run at once (max_replays); this one starts when "
                    "one of them ends",
                    force=True,
                )
            async with self._replays:  # its copies are made once it may run, and gone when it ends
                scratch = new_copy_dir("replay")
                try:
                    record.stages = await self._compare(record, change, asked, scratch)
                finally:
                    await asyncio.shield(asyncio.to_thread(shutil.rmtree, scratch, True))
            record.state = "done"
        except asyncio.CancelledError:
            record.state = "cancelled"
        except ReplayError as exc:
            record.state, record.error = "failed", str(exc)
        except Exception as exc:
            log.exception("replay of %s failed", change.target)
            record.state, record.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            record.finished_at = time.time()
            record.duration_ms = (time.perf_counter() - started) * 1000
            self._running.pop(record.id, None)
            self._last_progress.pop(record.id, None)
            self._finished[record.id] = record
            while len(self._finished) > KEEP_IN_MEMORY:
                self._finished.popitem(last=False)
            if record.state != "cancelled":
                try:
                    await asyncio.to_thread(self._keep, record)
                except Exception:  # the replay is answered whatever its file could not be
                    log.exception("cannot keep the replay %s in %s", record.id, self._store)
            self._publish(record.summary())
        return record

    async def _compare(
        self, record: ReplayResult, change: Change, asked: list[str] | None, scratch: Path
    ) -> list[StageComparison]:
        self._progress(record, "copying the workspace", force=True)
        versions: list[Version] = []
        for name, overlay in (("before", change.before), ("again", change.before), ("after", change.after)):
            copied = await asyncio.to_thread(materialize, self._root, scratch / name, overlay)
            if name != "again":
                record.warnings += [f"the version {name}: not in its copy: {n}" for n in copied.notes()]
            versions.append(Version(scratch / name, self._env, self._slots, self._owner))
        before, again, after = versions
        for name, version in (("before", before), ("after", after)):
            record.warnings += [f"the version {name}: {e} (defaults used)" for e in version.config_errors]
        self._progress(record, "discovering the hooks", force=True)
        await asyncio.gather(*(v.registry.discover() for v in versions))
        if asked is None:
            stages, notes = affected_stages(
                change.files, [(v.root, v.registrations) for v in (before, after)]
            )
            record.warnings += notes
        else:
            stages = asked
            uncontained = [s for s in asked if s in UNCONTAINED]
            if uncontained:
                record.warnings.append(UNCONTAINED_WARNING.format(stages=", ".join(uncontained)))
        if not stages:
            record.warnings.append("nothing to replay: no stage reads the files this change touches")
            return []
        inputs: dict[str, list[Recorded]] = {}
        for stage in stages:
            if stage == Stage.DISCOVER:
                continue
            if self._journal is None:
                inputs[stage] = []
            else:
                inputs[stage] = await asyncio.to_thread(recorded_inputs, self._journal, stage, record.limit)
        record.total = 3 * sum(len(found) for found in inputs.values())
        self._progress(record, f"replaying {record.total // 3} recorded inputs", force=True)

        async def play(version: Version, stage: str, recorded: Recorded) -> Outcome:
            outcome = await version.play(stage, recorded)
            record.done += 1
            self._progress(record, "replaying recorded inputs")
            return outcome

        plays: dict[str, list[tuple[Recorded, list[asyncio.Task[Outcome]]]]] = {}
        async with asyncio.TaskGroup() as group:
            for stage, found in inputs.items():
                plays[stage] = [
                    (item, [group.create_task(play(v, stage, item)) for v in versions]) for item in found
                ]
        out: list[StageComparison] = []
        clock = Window(record.started_at, time.time())  # when every run compared happened
        for stage in stages:
            if stage == Stage.DISCOVER:
                hooks = list(dict.fromkeys([*before.registrations, *after.registrations]))
                compared = [
                    compare_input(
                        stage,
                        f"hooks/{h}",
                        before.discovered(h),
                        again.discovered(h),
                        after.discovered(h),
                        clock=clock,
                    )
                    for h in hooks
                ]
                out.append(stage_comparison(stage, compared, None if hooks else "no hooks in either version"))
                continue
            compared = []
            for item, tasks in plays[stage]:
                first, second, new = (t.result() for t in tasks)
                compared.append(
                    compare_input(
                        stage,
                        item.source,
                        first,
                        second,
                        new,
                        recorded_at=item.at,
                        session=item.session,
                        clock=clock,
                    )
                )
            out.append(stage_comparison(stage, compared, _note(self._journal, compared)))
        if self._journal is not None:
            await asyncio.to_thread(_name_sessions, self._journal, out)
        return out

    def _progress(self, record: ReplayResult, message: str, force: bool = False) -> None:
        now = time.monotonic()
        recent = now - self._last_progress.get(record.id, 0.0) < PROGRESS_EVERY_S
        if recent and not force and record.done < record.total:
            return
        self._last_progress[record.id] = now
        self._publish(ReplayProgress(record.id, record.target, record.done, record.total, message))

    # ---- keeping results --------------------------------------------------------------------

    def _path(self, target: str) -> Path:
        return self._store / f"{os.path.basename(target)}.json"

    def _keep(self, record: ReplayResult) -> None:
        # strictjson: text with a lone surrogate (a session id a client sent) is kept, \u-escaped
        write_atomic(self._path(record.target), strictjson.dumps(record.to_dict()).encode(), parents=False)
        kept = sorted(self._store.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in kept[: max(len(kept) - KEEP_RESULTS, 0)]:
            with contextlib.suppress(OSError):
                old.unlink()


def _name_sessions(journal: Journal, stages: list[StageComparison]) -> None:
    """Give each input its session's title, as the journal knows it now (an operator knows a
    conversation by its title, not by its id)."""
    titles: dict[str, str | None] = {}
    for stage in stages:
        for found in stage.comparisons:
            if found.session is None:
                continue
            if found.session not in titles:
                known = journal.session(found.session)
                title = known.get("title") if known else None
                titles[found.session] = title if isinstance(title, str) and title else None
            found.session_title = titles[found.session]


def _note(journal: Journal | None, compared: list[InputComparison]) -> str | None:
    if journal is None:
        return "this engine runs without a journal: no recorded inputs"
    return None if compared else "no recorded inputs in the journal"
