"""Behaviour checks of a change: the workspace's scenarios (or its last real turns, re-asked) run at the
version before the change and after it, each version in a throwaway copy with its own engine and its
own headless opencode (engine/evals/harness.py), and compared side by side (engine/evals/compare.py).

A change is a commit (before: its first parent, after: the commit), a pending change (before: HEAD,
after: HEAD with the held file) or a proposal of the agent's (the same, for a file it has not yet
proposed). The scenarios are those of the version after the change (a change to a scenario is judged
by the scenario it leaves). Nothing of it touches the live workspace: not its files, not its history,
not its journal, not its sessions.

Bounded: one opencode per version at a time, whose runs follow each other (so that they do not see
each other), the two versions side by side, each run holding a slot (one per core, shared by every
eval of this engine), a timeout per run; cancelling ends every process an eval started and
removes its directory. The last finished result of each change is kept in `state/evals/<sha or id>.json`;
progress and the end are events (`eval_progress`, `eval`).

With `"review": "gate"` and `evals_on_review`, a change held for review is checked at once; with
`evals_auto_approve` too, one that regresses no scenario is installed by itself and one that does stays
held, and its author is told which scenario failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engine.changes.errors import ChangeError
from engine.changes.gitstore import GitError, GitStore
from engine.core.slots import Slots
from engine.evals import compare
from engine.evals.copies import CopyError, Held, VersionSpec
from engine.evals.harness import HarnessError, Instance, Setup
from engine.evals.project import ProjectError, agent_settings, eval_config
from engine.evals.scenarios import Scenario, load_scenarios
from engine.evals.turns import Fetch, Picked, Turn, pick
from engine.opencode import setup as opencode_setup
from engine.protocol.events import EventKind
from engine.protocol.records import (
    EvalProgress,
    EvalRun,
    Notice,
    PendingChange,
    ScenarioComparison,
    ScenarioRun,
    SessionInfo,
    new_id,
)
from engine.workspace.config import Config
from engine.workspace.layout import write_atomic

log = logging.getLogger("evolve.evals")

KEEP_RESULTS: Final = 200  # files in state/evals/ (the oldest go first)
KEEP_IN_MEMORY: Final = 20  # finished evals answered by id
PROGRESS_EVERY_S: Final = 0.2
MAX_REPEAT: Final = 20
MAX_TURNS: Final = 50
APPROVER: Final = "evals"  # who installs a change that regresses nothing, with evals_auto_approve


class EvalError(RuntimeError):
    """Behaviour checks that cannot run; the message says why and what to do."""


@dataclass
class Change:
    """What an eval compares: two versions of the workspace."""

    kind: str  # commit | pending | proposal
    target: str  # the commit's sha, the pending change's id, a proposal's id
    title: str
    files: list[str]
    before: VersionSpec
    after: VersionSpec
    installed_at: float | None = None  # a commit's time: the sessions it reaches are those active since
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Running:
    record: EvalRun
    task: asyncio.Task[EvalRun]
    asked: tuple[Any, ...]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Evals:
    def __init__(
        self,
        *,
        root: Path,
        git: GitStore,
        config: Callable[[], Config],
        env: Mapping[str, str],
        publish: Callable[..., Any],
        store: Path,
        pending: Callable[[str], PendingChange],
        project: Callable[[], Path | None],
        model: Callable[[], dict[str, str] | None],
        sessions: Callable[[], list[SessionInfo]] = list,
        conversation: Fetch | None = None,
        recorded: Callable[[str], list[Any]] = lambda session: [],
        slots: Slots | None = None,
    ) -> None:
        """`project`: the opencode project the agent runs in (where its provider and model are
        named); `model`: the model of its last chat turn; `sessions`, `conversation`, `recorded`:
        the sessions the engine knows, a session's conversation as its opencode keeps it (None when
        that opencode is gone), and as the engine recorded it (re-asked turns)."""
        self._root = root
        self._git = git
        self._config = config
        self._env = dict(env)
        self._publish = publish
        self._store = store
        self._pending = pending
        self._project = project
        self._model = model
        self._sessions = sessions
        self._conversation = conversation
        self._recorded = recorded
        self.slots = slots or Slots()
        self._running: dict[str, _Running] = {}
        self._finished: OrderedDict[str, EvalRun] = OrderedDict()
        self._last_progress: dict[str, float] = {}
        self._spawned: set[asyncio.Task[Any]] = set()

    # ---- what to check ---------------------------------------------------------------------------

    async def commit(self, rev: str) -> Change:
        return await asyncio.to_thread(self._commit, rev)

    def _commit(self, rev: str) -> Change:
        try:
            sha = self._git.resolve(rev)
        except GitError:
            sha = ""
        if not sha:
            raise EvalError(f"no commit {rev!r} in {self._root}")
        parent = self._git.first_parent(sha)
        if parent is None:
            raise EvalError(f"{sha[:10]} is the first commit: there is no version before it to compare with")
        commits = {c["sha"]: c for c in self._git.log(1000)}
        at = commits.get(sha, {}).get("time")
        return Change(
            kind="commit",
            target=sha,
            title=self._git.subject(sha) or sha[:10],
            files=self._git.files_changed(sha),
            before=VersionSpec(parent, describe=f"the workspace at {parent[:10]} (before {sha[:10]})"),
            after=VersionSpec(sha, describe=f"the workspace at {sha[:10]}"),
            installed_at=float(at) if isinstance(at, int) else None,
        )

    async def pending_change(self, pending_id: str) -> Change:
        return await asyncio.to_thread(self._pending_change, pending_id)

    def _pending_change(self, pending_id: str) -> Change:
        try:
            item = self._pending(pending_id)
        except ChangeError as exc:
            raise EvalError(str(exc)) from exc
        if item.status != "pending":
            hint = f"; check its commit {item.commit[:10]} instead" if item.commit else ""
            raise EvalError(f"change {pending_id} was already {item.status}{hint}")
        change = self._proposal(
            item.file, (item.content or "").encode("utf-8", "surrogateescape"), item.hook is not None
        )
        change.kind, change.target, change.title = "pending", item.id, item.message
        return change

    def proposal(self, file: str, content: str) -> Change:
        """The workspace as committed, and with `file` as proposed (not yet held, nor written)."""
        change = self._proposal(file, content.encode("utf-8", "surrogateescape"), file.startswith("hooks/"))
        change.target = new_id("prop")
        return change

    def _proposal(self, file: str, content: bytes, executable: bool) -> Change:
        head = self._git.head()
        if head is None:
            raise EvalError(f"{self._root} has no commit yet: nothing to compare with")
        committed = self._git.committed_file(file)
        warnings = []
        if committed is not None:
            executable = executable or bool(committed[0] & 0o111)
        try:
            live = (self._root / file).read_bytes()
        except OSError:
            live = None
        if live is not None and committed is not None and live != committed[1]:
            warnings.append(f"{file} has changes not committed yet: both versions use the committed file")
        return Change(
            kind="proposal",
            target="",
            title=f"proposed {file}",
            files=[file],
            before=VersionSpec(head, describe=f"the workspace at {head[:10]}"),
            after=VersionSpec(
                head,
                [Held(file, content, executable)],
                describe=f"the workspace at {head[:10]}, with {file} as proposed",
            ),
            warnings=warnings,
        )

    async def report(self, file: str, content: str, scenarios: Sequence[str] | None = None) -> str:
        """The agent's own proposal checked, and the result in its words (the evolve_eval_run tool)."""
        change = await asyncio.to_thread(self.proposal, file, content)
        result = await self.check(change, scenarios=scenarios)
        if result.state == "failed":
            raise EvalError(f"the behaviour checks could not run: {result.error}")
        return compare.for_the_agent(result)

    def scenarios(self) -> tuple[list[Scenario], list[str]]:
        """The live workspace's scenarios, and what is wrong with its scenario files."""
        loaded = load_scenarios(self._root)
        return loaded.scenarios, [str(e) for e in loaded.errors]

    # ---- running ---------------------------------------------------------------------------------

    def start(
        self,
        change: Change,
        scenarios: Sequence[str] | None = None,
        repeat: int | None = None,
        turns: int | None = None,
        project: Path | None = None,
    ) -> EvalRun:
        """Start checking `change`; the run as it starts (`state: running`). The same check already
        under way is returned as it is."""
        repeat = max(1, min(repeat or self._config().evals_repeat, MAX_REPEAT))
        turns = max(1, min(turns, MAX_TURNS)) if turns else None
        asked = (change.target, tuple(scenarios) if scenarios else None, repeat, turns)
        for running in self._running.values():
            if running.asked == asked:
                return running.record
        record = EvalRun(
            id=new_id("evl"),
            target=change.target,
            kind=change.kind,
            title=change.title,
            mode="turns" if turns else "scenarios",
            files=list(change.files),
            before=change.before.describe,
            after=change.after.describe,
            repeat=1 if turns else repeat,
            warnings=list(change.warnings),
            started_at=time.time(),
        )
        task = asyncio.create_task(
            self._run(record, change, list(scenarios) if scenarios else None, turns, project),
            name=f"eval {change.target}",
        )
        self._running[record.id] = _Running(record, task, asked)
        self._progress(record, "starting", force=True)
        return record

    async def check(self, change: Change, **kwargs: Any) -> EvalRun:
        """Check `change` and wait for the result."""
        return await self.wait(self.start(change, **kwargs).id)

    async def wait(self, eval_id: str) -> EvalRun:
        found = self._running.get(eval_id)
        if found is None:
            done = self.get(eval_id)
            if done is None:
                raise EvalError(f"no eval {eval_id!r}")
            return done
        return await asyncio.shield(found.task)

    def get(self, eval_id: str) -> EvalRun | None:
        found = self._running.get(eval_id)
        return found.record if found else self._finished.get(eval_id)

    def cancel(self, eval_id: str) -> bool:
        """Stop an eval under way (every process it started ends); False when none runs by that id."""
        found = self._running.get(eval_id)
        if found is None:
            return False
        found.task.cancel()
        return True

    def latest(self, target: str) -> EvalRun | None:
        """The eval of a change (sha or pending id) under way, else the last one kept."""
        running = [r.record for r in self._running.values() if r.record.target == target]
        if running:
            return running[-1]
        try:
            return EvalRun.from_dict(json.loads(self._path(target).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    async def close(self) -> None:
        for task in list(self._spawned):
            task.cancel()
        for running in list(self._running.values()):
            running.task.cancel()
        await asyncio.gather(
            *self._spawned, *(r.task for r in self._running.values()), return_exceptions=True
        )

    def _setup(self, project: Path | None) -> Setup:
        binary = opencode_setup.installed_binary(self._env)
        if binary is None:
            raise EvalError(
                f"opencode {opencode_setup.OPENCODE_VERSION} is not installed (expected at "
                f"{opencode_setup.binary_path(self._env)}): install it with `evolve opencode install`"
            )
        configured = self._config().evals_project
        where = project or (Path(configured) if configured else None) or self._project()
        if where is not None and not where.is_absolute():
            where = self._root / where
        if where is None:
            raise EvalError(
                "evals run the agent with its own provider and model, named in its opencode project: "
                "connect opencode to this engine, or set evals_project in config/evolve.jsonc (or "
                "give --project) to that project's directory"
            )
        chat = self._model()
        model = f"{chat['providerID']}/{chat['modelID']}" if chat else None
        try:
            config = eval_config(agent_settings(where, self._env), model)
        except ProjectError as exc:
            raise EvalError(f"{exc} (looked in {where})") from exc
        return Setup(binary=binary, config=config, env=self._env)

    async def _run(
        self,
        record: EvalRun,
        change: Change,
        names: list[str] | None,
        turns: int | None,
        project: Path | None,
    ) -> EvalRun:
        started = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix="evolve-eval-"))
        instances: list[Instance] = []
        # The run says it has ended only once its processes are gone and its directory removed.
        state, error = "failed", None
        try:
            setup = self._setup(project)
            record.model = str(setup.config.get("model") or "") or None
            instances = [
                Instance("before", scratch / "before", change.before, setup),
                Instance("after", scratch / "after", change.after, setup),
            ]
            record.scenarios = await self._compare(record, change, names, turns, instances)
            state = "done"
        except asyncio.CancelledError:
            state = "cancelled"
        except (EvalError, HarnessError, CopyError) as exc:
            error = str(exc)
        except Exception as exc:
            log.exception("eval of %s failed", change.target)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._progress(record, "stopping opencode and the copies' engines", force=True)
            try:
                await asyncio.gather(*(i.stop() for i in instances), return_exceptions=True)
            finally:
                for instance in instances:
                    instance.kill()
                    record.timings[instance.name] = dict(instance.timings)
                await asyncio.to_thread(shutil.rmtree, scratch, True)
                record.state, record.error = state, error
                compare.finish(record)
                record.finished_at = time.time()
                record.duration_ms = (time.perf_counter() - started) * 1000
                self._running.pop(record.id, None)
                self._last_progress.pop(record.id, None)
                self._finished[record.id] = record
                while len(self._finished) > KEEP_IN_MEMORY:
                    self._finished.popitem(last=False)
                if record.state != "cancelled" and change.kind != "proposal":
                    with contextlib.suppress(OSError):
                        await asyncio.to_thread(self._keep, record)
                self._publish(record.brief())
        return record

    async def _compare(
        self,
        record: EvalRun,
        change: Change,
        names: list[str] | None,
        turns: int | None,
        instances: list[Instance],
    ) -> list[ScenarioComparison]:
        after = instances[1]
        self._progress(record, "copying both versions", force=True)
        for instance in instances:
            await asyncio.to_thread(instance.copy, self._git)
        picked = Picked()
        refused: list[ScenarioComparison] = []
        if turns:
            picked = await pick(self._sessions(), turns, self._fetch, self._recorded, change.installed_at)
            record.warnings += picked.warnings
            refused = [compare.refused(t.name, None, 1, t.refused) for t in picked.turns if t.refused]
            runnable: list[tuple[Scenario, Turn | None]] = [
                (t.scenario(), t) for t in picked.turns if not t.refused
            ]
        else:
            loaded = await asyncio.to_thread(load_scenarios, after.workspace)
            record.warnings += [f"the version after: {e}" for e in loaded.errors]
            try:
                chosen = loaded.named(names) if names else loaded.scenarios
            except KeyError as exc:
                raise EvalError(str(exc.args[0])) from None
            for scenario in chosen:
                outside = scenario.outside_tools()
                if outside:
                    why = (
                        f"refused: it expects a call of {', '.join(outside)}, which evals never give the agent "
                        "(nothing outside the copy: no shell, no web)"
                    )
                    refused.append(compare.refused(scenario.name, scenario.file, record.repeat, why))
            runnable = [(s, None) for s in chosen if not s.outside_tools()]
            if not chosen:
                record.warnings.append("no scenarios: write some in evals/*.jsonc (docs/evals.md)")
        if not runnable:
            return refused
        record.total = len(runnable) * record.repeat * 2
        self._progress(record, "starting opencode for both versions", force=True)
        await asyncio.gather(*(i.start(picked.imports) for i in instances))
        timeout = self._config().evals_timeout_ms / 1000

        async def one(instance: Instance, scenario: Scenario, turn: Turn | None, attempt: int) -> ScenarioRun:
            async with self.slots.hold():
                fork = (turn.session, turn.message_id) if turn and turn.message_id else None
                limit = (scenario.timeout_ms / 1000) if scenario.timeout_ms else timeout
                result = await instance.run(scenario, attempt, limit, fork=fork)
            record.done += 1
            self._progress(record, f"{instance.name}: {scenario.name} {result.state}")
            return result

        async def each(instance: Instance) -> dict[tuple[str, int], ScenarioRun]:
            # One run after the other in a version: runs that shared its opencode and its copy at
            # once would see each other (a high-priority note notifies the other sessions, a note
            # added shows in another's list). The two versions run side by side.
            done: dict[tuple[str, int], ScenarioRun] = {}
            for attempt in range(1, record.repeat + 1):
                for scenario, turn in runnable:
                    done[(scenario.name, attempt)] = await one(instance, scenario, turn, attempt)
            return done

        results = dict(
            zip(("before", "after"), await asyncio.gather(*(each(i) for i in instances)), strict=True)
        )
        out: list[ScenarioComparison] = []
        for scenario, turn in runnable:
            runs = {
                name: [results[name][(scenario.name, a)] for a in range(1, record.repeat + 1)]
                for name in ("before", "after")
            }
            if turn is not None:
                out.append(
                    compare.compare_turn(scenario.name, runs["before"][0], runs["after"][0], turn.note)
                )
            else:
                out.append(
                    compare.compare_scenario(
                        scenario.name, scenario.file, runs["before"], runs["after"], record.repeat
                    )
                )
        return out + refused

    async def _fetch(self, info: SessionInfo) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        if self._conversation is None:
            return None
        try:
            return await self._conversation(info)
        except Exception as exc:  # that opencode is gone or refuses: the turn is asked alone
            log.info("the conversation of %s is not available: %s", info.id, exc)
            return None

    def _progress(self, record: EvalRun, message: str, force: bool = False) -> None:
        now = time.monotonic()
        recent = now - self._last_progress.get(record.id, 0.0) < PROGRESS_EVERY_S
        if recent and not force and record.done < record.total:
            return
        self._last_progress[record.id] = now
        self._publish(EvalProgress(record.id, record.target, record.done, record.total, message))

    # ---- keeping results -------------------------------------------------------------------------

    def _path(self, target: str) -> Path:
        return self._store / f"{os.path.basename(target)}.json"

    def _keep(self, record: EvalRun) -> None:
        write_atomic(self._path(record.target), json.dumps(record.to_dict(), ensure_ascii=False).encode())
        kept = sorted(self._store.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in kept[: max(len(kept) - KEEP_RESULTS, 0)]:
            with contextlib.suppress(OSError):
                old.unlink()


class Gatekeeper:
    """The review gate's use of the checks: a change just held is checked at once (`evals_on_review`);
    with `evals_auto_approve`, one that regresses no scenario is installed by itself, and one that does
    stays held, its author told which scenario failed. The alert and the held change's `evals` say
    the result in one line."""

    def __init__(
        self,
        *,
        evals: Evals,
        config: Callable[[], Config],
        pending: Callable[[str], PendingChange],
        save: Callable[[PendingChange], None],
        approve: Callable[[str, str], Awaitable[Any]],
        tell: Callable[[str, str, str], Awaitable[object]],
        publish: Callable[..., Any],
    ) -> None:
        self._evals = evals
        self._config = config
        self._pending = pending
        self._save = save
        self._approve = approve
        self._tell = tell
        self._publish = publish
        self._tasks: set[asyncio.Task[Any]] = set()

    def held(self, pending: PendingChange) -> None:
        if not self._config().evals_on_review:
            return
        task = asyncio.get_running_loop().create_task(self._check(pending.id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _check(self, pending_id: str) -> None:
        try:
            result = await self._evals.check(await self._evals.pending_change(pending_id))
        except EvalError as exc:
            self._alert(f"pending change {pending_id}: evals could not run: {exc}")
            return
        try:
            item = self._pending(pending_id)
        except ChangeError:
            return
        item.evals = result.summary
        self._save(item)
        if item.status != "pending" or result.state == "cancelled":
            return
        if result.state != "done":
            self._alert(f"pending change {pending_id} “{item.message}”: {result.summary}")
            return
        if result.regressed:
            self._alert(f"pending change {pending_id} “{item.message}”: {result.summary}")
            if item.provenance is not None and item.provenance.session:
                await self._tell(item.provenance.session, held_message(item, result), item.id)
            return
        if self._config().evals_auto_approve:
            try:
                await self._approve(pending_id, APPROVER)
            except ChangeError as exc:
                self._alert(
                    f"pending change {pending_id}: no scenario regressed, but it was not installed: {exc}"
                )

    def _alert(self, message: str) -> None:
        log.warning("%s", message)
        self._publish(Notice("evals", message), EventKind.WARNING)


def held_message(item: PendingChange, result: EvalRun) -> str:
    """What the author of a change is told when its checks keep it held."""
    return (
        f'Your proposed change "{item.message}" to {item.file} ({item.id}) stays held for the operator: '
        f"a behaviour check that passes now fails with it.\n{compare.for_the_agent(result)}"
    )
