"""The operator's controls of the engine: fire a heartbeat tick, pause or resume the heartbeat, run
a stage by hand. Each makes the engine's API call and returns what the operator is told (the
wording on plain data: `tick_said`, `stage_summary`); the app shows it."""

from __future__ import annotations

from typing import Any

from engine.protocol import HeartbeatStatus, StageResult, TickResult, calls
from engine.protocol.records import Suspect

from .client import EngineClient
from .format import as_json


async def fire(client: EngineClient) -> TickResult:
    """One heartbeat tick now, waited for."""
    return (await client.send(calls.heartbeat_fire(), timeout=3600)).result


def tick_said(result: TickResult) -> tuple[str, str]:
    """A tick's result (its outcome and reason) as the operator is told it, and its severity (a
    tick that did not run ok is a warning: `degraded` when a hook failed at the stage, with the error
    and the change most likely behind it, in the engine's words)."""
    reason = f": {result.reason}" if result.reason else ""
    return f"heartbeat {result.outcome}{reason}", "information" if result.outcome == "ok" else "warning"


def tick_suspect(result: TickResult) -> Suspect | None:
    """The change most likely behind a degraded tick: its first failure's suspect."""
    return next((f.suspect for f in result.failures if f.suspect is not None), None)


async def set_paused(client: EngineClient, paused: bool) -> HeartbeatStatus:
    """Pause the heartbeat's timer, or resume it; the heartbeat's status after."""
    return await client.send(calls.heartbeat_pause() if paused else calls.heartbeat_resume())


async def run_stage(client: EngineClient, request: dict[str, Any]) -> tuple[str, str]:
    """Dispatch a stage by hand (`request`: stage, context, session, as the stage dialog gives it):
    the summary of what ran, and the merged result as JSON."""
    result = await client.send(
        calls.stage(request["stage"], request["context"], request["session"]), timeout=600
    )
    return stage_summary(request["stage"], result), as_json(result.merged)


def stage_summary(stage: str, result: StageResult) -> str:
    """A stage dispatched by hand, in a line: how many hooks ran, which failed, whether recover
    stepped in."""
    summary = f"{stage}: {len(result.hooks)} hooks"
    if result.failed:
        summary += f", failed: {', '.join(result.failed)}"
    if result.recovered:
        summary += ", recover stepped in"
    return summary
