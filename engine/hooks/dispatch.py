"""Stage dispatch: every hook in discovery order, each with the payload of its protocol, results
merged, recover when a hook fails."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from engine.hooks.discovery import HookFile, Target
from engine.hooks.protocols import fired_stages, fold_answer, hcp_input
from engine.protocol.records import HookRun, StageResult, new_id
from engine.protocol.stages import NO_RECOVER, SESSIONLESS, HookProtocol
from engine.workspace.layout import Workspace

RunHook = Callable[[HookFile, str, dict[str, Any], "str | None", "str | None"], Awaitable[HookRun]]
HostStages = Callable[["str | None"], list[str]]
"""The canonical stages evolve fires for a session (hcp's `host.stages`)."""


def merge(acc: dict[str, Any], incoming: dict[str, Any]) -> dict[str, Any]:
    """Fold one hook's result into the accumulator: arrays concatenate, strings join with
    a newline, anything else is replaced by the later value. Returns `acc`, changed in place."""
    for key, value in incoming.items():
        if key not in acc:
            acc[key] = value
        elif isinstance(acc[key], list) and isinstance(value, list):
            acc[key] = acc[key] + value
        elif isinstance(acc[key], str) and isinstance(value, str):
            acc[key] = acc[key] + "\n" + value
        else:
            acc[key] = value
    return acc


def build_input(
    stage: str, prompts: dict[str, str], context: dict[str, Any], history: list[Any] | None
) -> dict[str, Any]:
    """The stdin document: `{"hook", "prompts", ...context, "history"?}` in that key order."""
    if stage == "discover":
        return {"hook": "discover"}
    payload: dict[str, Any] = {"hook": stage, "prompts": prompts}
    payload.update(context)
    if history is not None and stage not in SESSIONLESS:
        payload["history"] = history
    return payload


def _nonempty_system(value: object) -> bool:
    return isinstance(value, list) and any(isinstance(s, str) and s for s in value)


def recover_defaults(merged: dict[str, Any], prompts: dict[str, str]) -> list[str]:
    """Fill in the recover stage's host defaults (the preamble and recover prompts); returns the keys it filled."""
    filled: list[str] = []
    if not _nonempty_system(merged.get("system")):
        parts = [p for p in (prompts.get("preamble"), prompts.get("recover")) if p]
        if parts:
            merged["system"] = parts
            filled.append("system")
    if not merged.get("user") and prompts.get("recover"):
        merged["user"] = prompts["recover"]
        filled.append("user")
    return filled


class Dispatcher:
    """Runs a stage across the hooks. `hooks` gives the hooks a stage goes to, each with its protocol;
    `run_hook` executes one hook and records it (the engine's job); `host_stages` gives hcp's
    `host.stages` for a session."""

    def __init__(
        self,
        workspace: Workspace,
        hooks: Callable[[str], Sequence[Target]],
        run_hook: RunHook,
        host_stages: HostStages = lambda session: fired_stages(),
        protocol_of: Callable[[HookFile], HookProtocol] = lambda hook: HookProtocol.OPENCODE_EVOLVE,
    ) -> None:
        self.workspace = workspace
        self._hooks = hooks
        self._run_hook = run_hook
        self._host_stages = host_stages
        self._protocol_of = protocol_of

    def _payload(
        self,
        protocol: HookProtocol,
        stage: str,
        prompts: dict[str, str],
        context: dict[str, Any],
        history: list[Any] | None,
        session: str | None,
    ) -> dict[str, Any]:
        if protocol is HookProtocol.HCP:
            return hcp_input(
                stage,
                prompts,
                context,
                history,
                session=session,
                host_stages=self._host_stages(session),
                cwd=str(self.workspace.root),
            )
        return build_input(stage, prompts, context, history)

    async def dispatch(
        self,
        stage: str,
        context: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        history: list[Any] | None = None,
        hcp_context: dict[str, Any] | None = None,
    ) -> StageResult:
        """`context` goes to every hook; `hcp_context`, when given, to hcp hooks instead (with hcp's
        base payload in front)."""
        started = time.perf_counter()
        context = dict(context or {})
        result = StageResult(
            id=new_id("dsp"), stage=stage, started_at=time.time(), context=context, session=session
        )
        prompts = self.workspace.read_prompts()
        bound = history if session is not None else None
        payloads: dict[HookProtocol, dict[str, Any]] = {}
        merged: dict[str, Any] = {}
        for target in list(self._hooks(stage)):
            hook, protocol = target.hook, target.protocol
            if protocol not in payloads:
                given = hcp_context if protocol is HookProtocol.HCP and hcp_context is not None else context
                payloads[protocol] = self._payload(protocol, stage, prompts, given, bound, session)
            run = await self._run_hook(hook, stage, payloads[protocol], session, result.id)
            result.hooks.append(hook.name)
            result.runs.append(run.id)
            if run.ok:
                merge(merged, fold_answer(stage, protocol, hook.name, run.result or {}))
                continue
            result.failed.append(hook.name)
            if stage in NO_RECOVER:
                continue
            recovery = await self._recover(run.error or "failed", stage, prompts, result)
            merge(merged, recovery)
        result.merged = merged
        result.duration_ms = (time.perf_counter() - started) * 1000
        return result

    async def _recover(
        self, error: str, failed_stage: str, prompts: dict[str, str], parent: StageResult
    ) -> dict[str, Any]:
        """Run `recover` on all hooks; a failure inside recover is swallowed (no recover of recover)."""
        parent.recovered = True
        context = {"error": error, "failed_hook": failed_stage}
        merged: dict[str, Any] = {}
        for target in list(self._hooks("recover")):
            payload = self._payload(target.protocol, "recover", prompts, context, None, parent.session)
            run = await self._run_hook(target.hook, "recover", payload, None, parent.id)
            parent.runs.append(run.id)
            if run.ok:
                merge(merged, run.result or {})
        parent.defaults += [key for key in recover_defaults(merged, prompts) if key not in parent.defaults]
        return merged

    async def call_one(
        self,
        hook: HookFile,
        stage: str,
        context: dict[str, Any],
        *,
        session: str | None = None,
        history: list[Any] | None = None,
    ) -> HookRun:
        """Run a single hook, unmerged and without recover (execute_tool goes to the tool's own hook only)."""
        payload = self._payload(
            self._protocol_of(hook),
            stage,
            self.workspace.read_prompts(),
            context,
            history if session else None,
            session,
        )
        return await self._run_hook(hook, stage, payload, session, None)
