"""Dispatching a stage as the engine does it: to the hooks that handle it, with the session's history,
merged and recovered (engine.dispatch), journaled, published, and with what the hooks changed in the
workspace committed afterwards."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.hooks.discovery import HookFile, Target
from engine.hooks.dispatch import Dispatcher, HostStages, RunHook
from engine.hooks.protocols import fired_stages
from engine.journal.store import Journal
from engine.protocol.records import HookRun, StageResult
from engine.protocol.stages import HookProtocol
from engine.workspace.layout import Workspace

History = Callable[[str], list[Any]]
Settle = Callable[[str, "str | None", float], None]


class Stages:
    def __init__(
        self,
        *,
        workspace: Workspace,
        hooks_for: Callable[[str], Sequence[Target]],
        run_hook: RunHook,
        history: History,
        settle: Settle,
        journal: Journal | None,
        bus: EventBus,
        activity: Activity,
        host_stages: HostStages = lambda session: fired_stages(),
        protocol_of: Callable[[HookFile], HookProtocol] = lambda hook: HookProtocol.OPENCODE_EVOLVE,
    ) -> None:
        self._dispatcher = Dispatcher(workspace, hooks_for, run_hook, host_stages, protocol_of)
        self._hooks_for = hooks_for
        self._history = history
        self._settle = settle
        self._journal = journal
        self._bus = bus
        self._activity = activity

    async def dispatch(
        self,
        stage: str,
        context: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        settle: bool = True,
        turn: str | None = None,
        hcp_context: dict[str, Any] | None = None,
    ) -> StageResult:
        """Run `stage` on every hook that handles it, merge, recover; journal it; commit what the
        hooks changed (unless the caller commits itself: `settle=False`). `turn`: the user message
        whose turn this is about (so that the operator can see a turn's runs together). hcp hooks get
        `hcp_context` when it is given (engine.dispatch.Dispatcher.dispatch)."""
        history = self._history(session) if session is not None else None
        with self._activity.running():
            result = await self._dispatcher.dispatch(
                stage, context, session=session, history=history, hcp_context=hcp_context
            )
        result.turn = turn
        if self._journal is not None:
            self._journal.record_dispatch(result)
        self._bus.publish(result)
        if settle:
            self._settle(stage, session, result.started_at)
        return result

    def runs_of(self, result: StageResult) -> list[HookRun]:
        """The records of a dispatch's runs, in its order, as far as the journal has them (flush it
        first for a dispatch that just ended); none without a journal."""
        if self._journal is None:
            return []
        by_id = {r.id: r for r in self._journal.runs(dispatch_id=result.id, limit=10_000)}
        return [by_id[i] for i in result.runs if i in by_id]

    def handled(self, stage: str) -> bool:
        """Whether some hook runs for `stage` (a stage nobody handles is not dispatched at all)."""
        return bool(self._hooks_for(stage))

    async def call_one(
        self, hook: HookFile, stage: str, context: dict[str, Any], *, session: str | None
    ) -> HookRun:
        """One hook, unmerged and without recover (execute_tool), with the session's history."""
        history = self._history(session) if session else None
        return await self._dispatcher.call_one(hook, stage, context, session=session, history=history)
