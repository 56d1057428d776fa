"""The typed client of the engine's API, as data: one function per route of `routes`, each returning a
`Call[T]` (method, path, query, body, and the decoder of its answer into the record `T`). A transport
sends it: the command line's synchronous one (engine/cli/client.py), the console's asynchronous one
(evolve_console/client.py), or any HTTP client (`call.method`, `call.path`, `call.query`,
`call.body`), and `call.decode(answer)` turns the answer's JSON into its record.

    status = client.send(calls.heartbeat())            # a HeartbeatStatus
    client.send(calls.revert(sha, refresh=[session]))  # a Reverted
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic

import engine.protocol.routes as routes  # not `from . import`: that would import the package, which imports this

from .events import Event
from .records import (
    AssistantRequest,
    Attempt,
    BeforeTurnAnswer,
    BeforeTurnRequest,
    Change,
    ChangeDiff,
    ChangeList,
    ChatMessageAnswer,
    ChatMessageRequest,
    CommitLog,
    CompactingAnswer,
    CompactingRequest,
    Connected,
    ConnectRequest,
    Decision,
    DisconnectRequest,
    DispatchList,
    EngineStatus,
    EvalCancelled,
    EvalRequest,
    EvalRun,
    Failure,
    FailureList,
    FileAtChange,
    Health,
    HeartbeatFired,
    HeartbeatStatus,
    HookRun,
    Impact,
    JSONDict,
    LoadRecorded,
    LoadRequest,
    Ok,
    OpencodeEvent,
    PendingChange,
    PendingReview,
    PermissionAnswer,
    PermissionRequest,
    Reach,
    Record,
    ReplayCancelled,
    ReplayRequest,
    ReplayResult,
    Reverted,
    RevertRequest,
    ReviewRecorded,
    RunList,
    ScenarioList,
    SessionInfo,
    SessionList,
    StageRequest,
    StageRun,
    SystemPrompt,
    SystemRequest,
    TextCompleteAnswer,
    TextCompleteRequest,
    TickList,
    ToolAfterAnswer,
    ToolAfterRequest,
    ToolBeforeAnswer,
    ToolBeforeRequest,
    ToolCall,
    ToolCallList,
    ToolCallRequest,
    ToolList,
    ToolsOffered,
)
from .routes import A, Route


class NotAnAnswer(ValueError):
    """The engine answered something that is not its route's record (not a JSON object)."""


@dataclass(frozen=True)
class Call(Generic[A]):
    """One request of the API, ready to send, and how to read its answer."""

    route: Route[A]
    path: str  # the route's path, its parameters filled in
    query: dict[str, str] = field(default_factory=dict)
    body: JSONDict | None = None  # None: no body (GET)

    @property
    def method(self) -> str:
        return self.route.method

    def decode(self, data: Any) -> A:
        """The answer's JSON as the route's record."""
        if not isinstance(data, dict):
            raise NotAnAnswer(f"{self.route.key} answered {type(data).__name__}, not a JSON object")
        return self.route.answer.from_dict(data)


def call(
    route: Route[A],
    body: Record | None = None,
    query: Mapping[str, Any] | None = None,
    **path: str,
) -> Call[A]:
    """A call of `route`: `path` fills its parameters; a query parameter or a body field that is None
    is left out (the engine takes its default); a POST without a body sends `{}`."""
    declared = {p.name for p in route.query}
    given = {k: v for k, v in (query or {}).items() if v is not None}
    unknown = set(given) - declared
    if unknown:
        raise TypeError(f"{route.key} has no query parameter {', '.join(sorted(unknown))}")
    if body is not None and (route.body is None or not isinstance(body, route.body)):
        raise TypeError(f"{route.key} takes {route.body.__name__ if route.body else 'no body'}")
    encoded = {k: ("1" if v else "0") if isinstance(v, bool) else str(v) for k, v in given.items()}
    sent: JSONDict | None = None if route.method == "GET" else {}
    if body is not None:
        sent = {k: v for k, v in body.to_dict().items() if v is not None}
    return Call(route, route.path_for(**path), encoded, sent)


# ---- the engine ----------------------------------------------------------------------------------


def health() -> Call[Health]:
    return call(routes.HEALTH)


def status() -> Call[EngineStatus]:
    return call(routes.STATUS)


def shutdown() -> Call[Ok]:
    return call(routes.SHUTDOWN)


def debug_load(count: int, stdout_bytes: int = 0) -> Call[LoadRecorded]:
    return call(routes.DEBUG_LOAD, LoadRequest(count, stdout_bytes))


def events(since: int | None = None, brief: bool = False) -> Call[Event]:
    """The event stream (Server-Sent Events): each message decodes to an Event."""
    return call(routes.EVENTS, query={"since": since, "brief": brief or None})


# ---- stages and what the journal recorded --------------------------------------------------------


def stage(
    name: str, context: JSONDict | None = None, session: str | None = None, with_runs: bool = False
) -> Call[StageRun]:
    return call(routes.STAGE, StageRequest(context or {}, session, with_runs), stage=name)


def runs(
    *,
    stage: str | None = None,
    hook: str | None = None,
    session: str | None = None,
    failed: bool | None = None,
    dispatch: str | None = None,
    before: float | None = None,
    limit: int | None = None,
) -> Call[RunList]:
    query = {"stage": stage, "hook": hook, "session": session, "failed": failed, "dispatch": dispatch}
    return call(routes.RUNS, query={**query, "before": before, "limit": limit})


def run(id: str) -> Call[HookRun]:
    return call(routes.RUN, id=id)


def run_cause(id: str) -> Call[Failure]:
    return call(routes.RUN_CAUSE, id=id)


def failures() -> Call[FailureList]:
    return call(routes.FAILURES)


def dispatches(
    *,
    stage: str | None = None,
    session: str | None = None,
    before: float | None = None,
    limit: int | None = None,
) -> Call[DispatchList]:
    return call(
        routes.DISPATCHES, query={"stage": stage, "session": session, "before": before, "limit": limit}
    )


def tool_calls(
    *,
    tool: str | None = None,
    session: str | None = None,
    before: float | None = None,
    limit: int | None = None,
) -> Call[ToolCallList]:
    return call(routes.TOOL_CALLS, query={"tool": tool, "session": session, "before": before, "limit": limit})


# ---- sessions ------------------------------------------------------------------------------------


def sessions() -> Call[SessionList]:
    return call(routes.SESSIONS)


def session(id: str) -> Call[SessionInfo]:
    return call(routes.SESSION, id=id)


# ---- the heartbeat -------------------------------------------------------------------------------


def heartbeat() -> Call[HeartbeatStatus]:
    return call(routes.HEARTBEAT)


def heartbeat_fire() -> Call[HeartbeatFired]:
    return call(routes.HEARTBEAT_FIRE)


def heartbeat_ticks(limit: int | None = None) -> Call[TickList]:
    return call(routes.HEARTBEAT_TICKS, query={"limit": limit})


def heartbeat_pause() -> Call[HeartbeatStatus]:
    return call(routes.HEARTBEAT_PAUSE)


def heartbeat_resume() -> Call[HeartbeatStatus]:
    return call(routes.HEARTBEAT_RESUME)


# ---- changes and reviews -------------------------------------------------------------------------


def commits(limit: int | None = None) -> Call[CommitLog]:
    return call(routes.COMMITS, query={"limit": limit})


def changes(limit: int | None = None) -> Call[ChangeList]:
    return call(routes.CHANGES, query={"limit": limit})


def change(rev: str) -> Call[Change]:
    return call(routes.CHANGE, rev=rev)


def impact(rev: str) -> Call[Impact]:
    return call(routes.CHANGE_IMPACT, rev=rev)


def reach(rev: str) -> Call[Reach]:
    return call(routes.CHANGE_REACH, rev=rev)


def diff(rev: str) -> Call[ChangeDiff]:
    return call(routes.CHANGE_DIFF, rev=rev)


def file_at(rev: str, path: str, old_path: str | None = None) -> Call[FileAtChange]:
    return call(routes.CHANGE_FILE, query={"path": path, "old_path": old_path}, rev=rev)


def approve(rev: str, by: str | None = None) -> Call[ReviewRecorded]:
    return call(routes.CHANGE_APPROVE, Decision(by), rev=rev)


def revert(
    rev: str, by: str | None = None, refresh: Sequence[str] = (), together: bool = False
) -> Call[Reverted]:
    return call(routes.CHANGE_REVERT, RevertRequest(by, list(refresh), together), rev=rev)


def attempt(id: str) -> Call[Attempt]:
    return call(routes.ATTEMPT, id=id)


def pending(id: str) -> Call[PendingReview]:
    return call(routes.PENDING, id=id)


def approve_pending(id: str, by: str | None = None) -> Call[PendingChange]:
    return call(routes.PENDING_APPROVE, Decision(by), id=id)


def reject_pending(id: str, reason: str | None = None, by: str | None = None) -> Call[PendingChange]:
    return call(routes.PENDING_REJECT, Decision(by, reason), id=id)


def dismiss_pending(id: str, reason: str | None = None, by: str | None = None) -> Call[PendingChange]:
    return call(routes.PENDING_DISMISS, Decision(by=by, reason=reason), id=id)


# ---- replays -------------------------------------------------------------------------------------


def replay(
    rev: str, stages: Sequence[str] | None = None, limit: int | None = None, wait: bool = False
) -> Call[ReplayResult]:
    """Start a replay of a commit (with `wait`, answered when it has finished)."""
    return call(routes.CHANGE_REPLAY, ReplayRequest(list(stages) if stages else None, limit, wait), rev=rev)


def replay_pending(
    id: str, stages: Sequence[str] | None = None, limit: int | None = None, wait: bool = False
) -> Call[ReplayResult]:
    return call(routes.PENDING_REPLAY, ReplayRequest(list(stages) if stages else None, limit, wait), id=id)


def latest_replay(rev: str) -> Call[ReplayResult]:
    return call(routes.CHANGE_REPLAY_LATEST, rev=rev)


def latest_replay_pending(id: str) -> Call[ReplayResult]:
    return call(routes.PENDING_REPLAY_LATEST, id=id)


def replay_status(id: str) -> Call[ReplayResult]:
    return call(routes.REPLAY, id=id)


def replay_cancel(id: str) -> Call[ReplayCancelled]:
    return call(routes.REPLAY_CANCEL, id=id)


# ---- behaviour checks -----------------------------------------------------------------------------


def scenarios() -> Call[ScenarioList]:
    return call(routes.SCENARIOS)


def evaluate(
    rev: str,
    scenarios: list[str] | None = None,
    repeat: int | None = None,
    turns: int | None = None,
    project: str | None = None,
    wait: bool = False,
) -> Call[EvalRun]:
    """Check a commit: its scenarios (`scenarios`: these by name), `repeat` runs each at each version,
    or its last `turns` user turns re-asked."""
    return call(routes.CHANGE_EVAL, EvalRequest(scenarios or None, repeat, turns, project, wait), rev=rev)


def evaluate_pending(
    id: str,
    scenarios: list[str] | None = None,
    repeat: int | None = None,
    turns: int | None = None,
    project: str | None = None,
    wait: bool = False,
) -> Call[EvalRun]:
    return call(routes.PENDING_EVAL, EvalRequest(scenarios or None, repeat, turns, project, wait), id=id)


def latest_eval(rev: str) -> Call[EvalRun]:
    return call(routes.CHANGE_EVAL_LATEST, rev=rev)


def latest_eval_pending(id: str) -> Call[EvalRun]:
    return call(routes.PENDING_EVAL_LATEST, id=id)


def eval_status(id: str) -> Call[EvalRun]:
    return call(routes.EVAL, id=id)


def eval_cancel(id: str) -> Call[EvalCancelled]:
    return call(routes.EVAL_CANCEL, id=id)


# ---- tools ---------------------------------------------------------------------------------------


def tools() -> Call[ToolList]:
    return call(routes.TOOLS)


def tool_permission(name: str, args: JSONDict, call_id: str | None = None) -> Call[PermissionAnswer]:
    return call(routes.TOOL_PERMISSION, PermissionRequest(args, call_id), name=name)


def tool_call(name: str, request: ToolCallRequest) -> Call[ToolCall]:
    return call(routes.TOOL_CALL, request, name=name)


# ---- the opencode plugin's hooks (what the shim sends; the benchmarks send them from Python) -----


def connect(request: ConnectRequest) -> Call[Connected]:
    return call(routes.OPENCODE_CONNECT, request)


def disconnect(id: str) -> Call[Ok]:
    return call(routes.OPENCODE_DISCONNECT, DisconnectRequest(id))


def system(request: SystemRequest) -> Call[SystemPrompt]:
    return call(routes.OPENCODE_SYSTEM, request)


def chat_message(request: ChatMessageRequest) -> Call[ChatMessageAnswer]:
    return call(routes.OPENCODE_CHAT_MESSAGE, request)


def tool_before(request: ToolBeforeRequest) -> Call[ToolBeforeAnswer]:
    return call(routes.OPENCODE_TOOL_BEFORE, request)


def tool_after(request: ToolAfterRequest) -> Call[ToolAfterAnswer]:
    return call(routes.OPENCODE_TOOL_AFTER, request)


def compacting(request: CompactingRequest) -> Call[CompactingAnswer]:
    return call(routes.OPENCODE_COMPACTING, request)


def before_turn(request: BeforeTurnRequest) -> Call[BeforeTurnAnswer]:
    return call(routes.OPENCODE_BEFORE_TURN, request)


def text_complete(request: TextCompleteRequest) -> Call[TextCompleteAnswer]:
    return call(routes.OPENCODE_TEXT_COMPLETE, request)


def assistant(request: AssistantRequest) -> Call[Ok]:
    return call(routes.OPENCODE_ASSISTANT, request)


def opencode_event(event: OpencodeEvent) -> Call[Ok]:
    return call(routes.OPENCODE_EVENT, event)


def tools_offered(tools: list[JSONDict]) -> Call[Ok]:
    return call(routes.OPENCODE_TOOLS_OFFERED, ToolsOffered(tools))
