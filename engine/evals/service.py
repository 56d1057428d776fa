"""Behaviour checks of a change: the workspace's scenarios (or its last real turns, re-asked) run at the
version before the change and after it, each version in a throwaway copy with its own engine, both in
one headless opencode (engine/evals/harness.py, engine/evals/server.py), and compared side by side
(engine/evals/compare.py).

A change is a commit (before: its first parent, after: the commit), a pending change (before: HEAD,
after: HEAD with the held file) or a proposal of the agent's (the same, for a file it has not yet
proposed). The scenarios are those of the version after the change (a change to a scenario is judged
by the scenario it leaves). Nothing of it touches the live workspace: not its files, not its history,
not its journal, not its sessions.

Bounded: one opencode per check, each version's runs one after the other (so that they do not see
each other), the two versions side by side, each run holding a slot (one per core, shared by every
eval of this engine), a timeout per run; cancelling ends every process an eval started and
removes its directory. The last finished result of each change is kept in `state/evals/<sha or id>.json`;
progress and the end are events (`eval_progress`, `eval`).

Each check is a job of engine/core/jobs.py (listed, polled, cancelled by id, like replays); what a
change is to the checks: engine/evals/change.py; the review gate's use of them: engine/evals/gate.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from engine.changes.gitstore import GitStore
from engine.core.jobs import Jobs
from engine.core.slots import Slots
from engine.core.threads import to_the_end
from engine.evals import change as changes
from engine.evals import compare
from engine.evals.change import Change as Change  # what callers of the checks pass them
from engine.evals.change import EvalError as EvalError  # the error callers of the checks catch
from engine.evals.copies import CopyError
from engine.evals.harness import Instance
from engine.evals.processes import HarnessError, together
from engine.evals.project import ProjectError, agent_settings, eval_config
from engine.evals.scenarios import Scenario, load_scenarios
from engine.evals.server import OpencodeServer
from engine.evals.setup import Setup
from engine.evals.turns import Fetch, Picked, Turn, pick
from engine.opencode import setup as opencode_setup
from engine.protocol.records import (
    EvalProgress,
    EvalRun,
    PendingChange,
    ScenarioComparison,
    ScenarioRun,
    SessionInfo,
    new_id,
)
from engine.workspace.config import Config

log = logging.getLogger("evolve.evals")

MAX_REPEAT: Final = 20
MAX_TURNS: Final = 50


class Evals(Jobs[EvalRun]):
    """The behaviour checks of changes, each one a job (`Jobs`: waited for, answered by id, cancelled,
    the latest of a change): every process a cancelled check started ends."""

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
        self._pending = pending
        self._project = project
        self._model = model
        self._sessions = sessions
        self._conversation = conversation
        self._recorded = recorded
        self.slots = slots or Slots()
        super().__init__(
            noun="eval",
            store=store,
            publish=publish,
            progress=EvalProgress,
            brief=EvalRun.brief,
            load=EvalRun.from_dict,
            error=EvalError,
        )

    # ---- what to check ---------------------------------------------------------------------------

    async def commit(self, rev: str) -> Change:
        return await asyncio.to_thread(changes.of_commit, self._root, self._git, rev)

    async def pending_change(self, pending_id: str) -> Change:
        return await asyncio.to_thread(changes.of_pending, self._root, self._git, self._pending, pending_id)

    def proposal(self, file: str, content: str) -> Change:
        """The workspace as committed, and with `file` as proposed (not yet held, nor written)."""
        return changes.proposal(self._root, self._git, file, content)

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
        same = self.under_way(asked)
        if same is not None:
            return same
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
        work = self._run(record, change, list(scenarios) if scenarios else None, turns, project)
        return self.launch(record, work, asked, f"eval {change.target}")

    async def check(self, change: Change, **kwargs: Any) -> EvalRun:
        """Check `change` and wait for the result."""
        return await self.wait(self.start(change, **kwargs).id)

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
        server: OpencodeServer | None = None
        # The run says it has ended only once its processes are gone and its directory removed.
        state, error = "failed", None
        try:
            setup = self._setup(project)
            record.model = str(setup.config.get("model") or "") or None
            server = OpencodeServer(scratch, setup)
            instances = [
                Instance("before", scratch / "before", change.before, setup),
                Instance("after", scratch / "after", change.after, setup),
            ]
            record.scenarios = await self._compare(record, change, names, turns, instances, server)
            state = "done"
        except asyncio.CancelledError:
            state = "cancelled"
        except (EvalError, HarnessError, CopyError) as exc:
            error = str(exc)
        except Exception as exc:
            log.exception("eval of %s failed", change.target)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self.progress(record, "stopping opencode and the copies' engines", force=True)
            try:
                if server is not None:  # opencode first: each plugin says goodbye to its engine
                    with contextlib.suppress(Exception):
                        await server.stop()
                await asyncio.gather(*(i.stop() for i in instances), return_exceptions=True)
            finally:
                if server is not None:
                    server.kill()
                    if server.timings:
                        record.timings["opencode"] = dict(server.timings)
                for instance in instances:
                    instance.kill()
                    record.timings[instance.name] = dict(instance.timings)
                await asyncio.to_thread(shutil.rmtree, scratch, True)
                record.state, record.error = state, error
                compare.finish(record)
                await self.finish(record, started, keep=change.kind != "proposal")
        return record

    async def _compare(
        self,
        record: EvalRun,
        change: Change,
        names: list[str] | None,
        turns: int | None,
        instances: list[Instance],
        server: OpencodeServer,
    ) -> list[ScenarioComparison]:
        after = instances[1]
        self.progress(record, "copying both versions", force=True)
        for instance in instances:
            await to_the_end(instance.copy, self._git)
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
        self.progress(record, "starting opencode and both versions' engines", force=True)
        if picked.imports:  # into each version's directory, before opencode starts
            await together(server.prepare(), *(i.start() for i in instances))
            for shift, instance in enumerate(instances):  # one after the other: one database
                for item in picked.imports:
                    instance.ids.update(await server.give(instance.project, instance.name, shift, item))
            await server.start()
        else:
            await together(_then(server.prepare, server.start), *(i.start() for i in instances))
        await together(*(i.connect(server) for i in instances))
        await server.loaded()
        timeout = self._config().evals_timeout_ms / 1000

        async def one(instance: Instance, scenario: Scenario, turn: Turn | None, attempt: int) -> ScenarioRun:
            async with self.slots.hold():
                fork = (turn.session, turn.message_id) if turn and turn.message_id else None
                limit = (scenario.timeout_ms / 1000) if scenario.timeout_ms else timeout
                result = await instance.run(scenario, attempt, limit, fork=fork)
            record.done += 1
            self.progress(record, f"{instance.name}: {scenario.name} {result.state}")
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


async def _then(*steps: Callable[[], Awaitable[None]]) -> None:
    """`steps` one after the other (one branch of `together`)."""
    for step in steps:
        await step()
