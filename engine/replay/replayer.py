"""Replay: what a change to a hook, a prompt or the config does to the agent's real traffic.

A change is a commit or a pending change (the review gate). Its replay plays the journal's most
recent recorded inputs of each stage it can affect (engine.replay_inputs) with the version before the
change, twice, and with the version after it, each in a throwaway copy of the workspace (the copy
validation makes: no `.git`, no `state/`; the hooks see the copy as `OPENCODE_EVOLVE_WORKSPACE` and
run there). Every stage is dispatched as the engine dispatches it (engine.dispatch: every hook that
handles it, merged, recover on failure; the prompts come from the copy's prompts/), through the same
hook runner (engine.runner.execute). The two runs of the version before tell what varies from run to
run anyway; the rest is compared field by field (engine.replay_compare). The copies and their runs: engine.replay_version.
What a commit or a pending change is to a replay: engine/replay/change.py; each replay is a job of
engine/core/jobs.py (listed, polled, cancelled by id, like behaviour checks).

The version before is the workspace as it is now with the change's files as they were before the
change; the version after, with them as the change made them (for a pending change: now, and now
with the proposed content). So only the change differs between the two.

Replay runs are not journaled and not published as hook runs: the journal and the console's runs
view stay the record of what the agent really did. The last finished replay of each change is kept
in `state/replays/<sha or pending id>.json`; progress and the end of a replay are events.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from engine.changes.errors import ChangeError
from engine.changes.gitstore import GitStore
from engine.core.jobs import Jobs
from engine.core.threads import to_the_end
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
from engine.replay import change as changes
from engine.replay.change import Change as Change  # what callers of the replayer pass it
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
from engine.replay.version import ReplayError as ReplayError  # the error callers of the replayer catch
from engine.replay.version import Version, materialize
from engine.workspace.copies import new_copy_dir

log = logging.getLogger("evolve.replay")

DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 200
DEFAULT_REPLAYS: Final = 2  # replays that run at once (config: max_replays)


class Replayer(Jobs[ReplayResult]):
    """Replays changes, each one a job (`Jobs`: waited for, answered by id, cancelled, the latest of
    a change): hook processes bounded by the number of cores across all of them; cancelled replays
    kill what they started."""

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
        self._pending = pending
        self._slots = asyncio.Semaphore(slots or os.cpu_count() or 1)
        self._owner = run_owner(root)
        self._limit = max(1, limit)
        self._replays = asyncio.Semaphore(self._limit)
        super().__init__(
            noun="replay",
            store=store,
            publish=publish,
            progress=ReplayProgress,
            brief=ReplayResult.summary,
            load=ReplayResult.from_dict,
            error=ReplayError,
        )

    # ---- what to replay ---------------------------------------------------------------------

    async def commit(self, rev: str) -> Change:
        return await asyncio.to_thread(changes.of_commit, self._root, self._git, rev)

    async def pending_change(self, pending_id: str) -> Change:
        return await asyncio.to_thread(changes.of_pending, self._root, self._pending, pending_id)

    # ---- running ----------------------------------------------------------------------------

    def start(
        self, change: Change, stages: Sequence[str] | None = None, limit: int = DEFAULT_LIMIT
    ) -> ReplayResult:
        """Start replaying `change` (`stages`: these instead of the ones it can affect); returns the
        replay as it starts (`state: running`). The same replay already under way is returned as is."""
        asked = check_stages(stages) if stages else None
        limit = max(0, min(limit, MAX_LIMIT))
        key = (change.target, limit, tuple(asked) if asked is not None else None)
        same = self.under_way(key)
        if same is not None:
            return same
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
        return self.launch(record, self._run(record, change, asked), key, f"replay {change.target}")

    async def replay(
        self, change: Change, stages: Sequence[str] | None = None, limit: int = DEFAULT_LIMIT
    ) -> ReplayResult:
        """Replay `change` and wait for the result."""
        return await self.wait(self.start(change, stages, limit).id)

    def stop(self, target: str, status: str) -> None:
        """A held change was decided or went stale (`status`): its replays under way stop, since
        their result can no longer inform a decision (cancelled, and they say why)."""
        for record, task in self.running(target):
            if not task.done():
                record.error = f"stopped: the change was {status} while it was replayed"
                task.cancel()

    def held(self, pending: PendingChange) -> None:
        """A change was held for review: replay it at once, so the reviewer sees its effect."""
        self.spawn(self._replay_held(pending.id))

    async def _replay_held(self, pending_id: str) -> None:
        try:
            change = await self.pending_change(pending_id)
            if self._pending(pending_id).status == "pending":  # not decided while it was read
                self.start(change)
        except (ReplayError, ChangeError) as exc:
            log.warning("replay of pending change %s: %s", pending_id, exc)

    async def _run(self, record: ReplayResult, change: Change, asked: list[str] | None) -> ReplayResult:
        started = time.perf_counter()
        try:
            if self._replays.locked():
                self.progress(
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
            await self.finish(record, started)
        return record

    async def _compare(
        self, record: ReplayResult, change: Change, asked: list[str] | None, scratch: Path
    ) -> list[StageComparison]:
        self.progress(record, "copying the workspace", force=True)
        versions: list[Version] = []
        for name, overlay in (("before", change.before), ("again", change.before), ("after", change.after)):
            copied = await to_the_end(materialize, self._root, scratch / name, overlay)
            if name != "again":
                record.warnings += [f"the version {name}: not in its copy: {n}" for n in copied.notes()]
            versions.append(Version(scratch / name, self._env, self._slots, self._owner))
        before, again, after = versions
        for name, version in (("before", before), ("after", after)):
            record.warnings += [f"the version {name}: {e} (defaults used)" for e in version.config_errors]
        self.progress(record, "discovering the hooks", force=True)
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
        self.progress(record, f"replaying {record.total // 3} recorded inputs", force=True)

        async def play(version: Version, stage: str, recorded: Recorded) -> Outcome:
            outcome = await version.play(stage, recorded)
            record.done += 1
            self.progress(record, "replaying recorded inputs")
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
