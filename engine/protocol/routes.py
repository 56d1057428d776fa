"""Every route of the engine's HTTP API, declared once: its method, its path (with `{parameters}`), its
query parameters, the record its request body is and the record it answers.

The engine serves exactly these (engine/api/ registers each handler under its `Route`), the typed
calls (`protocol.calls`) are built on them, the shim's routes (`api.SHIM_ROUTES`) are those marked
`shim`, and tests/project/test_contract.py fails when a `/v1/...` string anywhere in the code is not one of
them. docs/opencode.md describes each ("The engine's HTTP API").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, Self, TypeVar
from urllib.parse import quote

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


class Decodes(Protocol):
    """What an answer is: a record that reads itself from the answer's JSON object."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self: ...


A = TypeVar("A", bound=Decodes)

_PARAM = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Param:
    """A query parameter: its name, what it holds, and what the engine takes when it is absent."""

    name: str
    kind: type[Any] = str  # str, int, float or bool ("1", "true", "yes": true; any other value: false)
    doc: str = ""
    default: Any = None
    maximum: int | None = None  # an int above it is taken as it
    required: bool = False


@dataclass(frozen=True)
class Route(Generic[A]):
    method: str
    path: str  # e.g. "/v1/changes/{rev}/revert"
    answer: type[A]  # the record of the answer (of each message, for a stream)
    body: type[Record] | None = None  # the record of the request's body (a JSON object)
    query: tuple[Param, ...] = ()
    shim: bool = False  # the opencode plugin calls it (SHIM_ROUTES; every answer has HANDLED_HEADER)
    accepted: bool = False  # answered 202 at once, the work done in the background (unless `wait`)
    stream: bool = False  # Server-Sent Events
    doc: str = ""

    @property
    def key(self) -> str:
        """How the engine counts the requests it answered (EngineStatus.requests)."""
        return f"{self.method} {self.path}"

    @property
    def path_params(self) -> tuple[str, ...]:
        return tuple(_PARAM.findall(self.path))

    def path_for(self, **values: str) -> str:
        """The path with each parameter filled in (percent-encoded: an id holds no slash)."""
        if set(values) != set(self.path_params):
            raise TypeError(f"{self.key} takes {', '.join(self.path_params) or 'no path parameters'}")
        return _PARAM.sub(lambda m: quote(str(values[m.group(1)]), safe=""), self.path)

    def param(self, name: str) -> Param:
        return next(p for p in self.query if p.name == name)


def _limit(default: int) -> Param:
    return Param("limit", int, "at most this many, newest first", default, maximum=10_000)


_BEFORE: Final = Param("before", float, "only those started earlier (epoch seconds): the next page")
_SESSION: Final = Param("session", doc="only those of this session")
_STAGE: Final = Param("stage", doc="only those of this stage")

# ---- the engine ----------------------------------------------------------------------------------

HEALTH: Final = Route("GET", "/v1/health", Health, shim=True, doc="whether the engine answers, and as what")
STATUS: Final = Route("GET", "/v1/status", EngineStatus, doc="configuration, hooks, connections, heartbeat")
SHUTDOWN: Final = Route("POST", "/v1/shutdown", Ok, doc="the engine stops after answering")
DEBUG_LOAD: Final = Route(
    "POST",
    "/v1/debug/load",
    LoadRecorded,
    LoadRequest,
    doc="synthetic hook runs, only with EVOLVE_DEBUG_LOAD=1 (load tests of the console)",
)
EVENTS: Final = Route(
    "GET",
    "/v1/events",
    Event,
    query=(
        Param("since", int, "first the recent events after this sequence number", -1),
        Param("brief", bool, "hook runs as summaries (api.BRIEF_RUN_FIELDS)", False),
    ),
    stream=True,
    doc="what the engine does, as it happens",
)

# ---- stages and what the journal recorded ---------------------------------------------------------

STAGE: Final = Route("POST", "/v1/stages/{stage}", StageRun, StageRequest, doc="dispatch a stage by hand")
RUNS: Final = Route(
    "GET",
    "/v1/runs",
    RunList,
    query=(
        _STAGE,
        Param("hook", doc="only those of this hook file"),
        _SESSION,
        Param("failed", bool, "failed ones only (false: successful ones only)"),
        Param("dispatch", doc="only those of this stage dispatch"),
        _BEFORE,
        _limit(200),
    ),
    doc="hook runs and the journal's counts",
)
RUN: Final = Route("GET", "/v1/runs/{id}", HookRun, doc="one hook run, every field")
RUN_CAUSE: Final = Route(
    "GET",
    "/v1/runs/{id}/cause",
    Failure,
    doc="the failure a failed run is part of: the error's last line and the change most likely behind it",
)
FAILURES: Final = Route(
    "GET",
    "/v1/failures",
    FailureList,
    doc="the hooks failing now, with their cause, and those lately cleared",
)
DISPATCHES: Final = Route(
    "GET",
    "/v1/dispatches",
    DispatchList,
    query=(_STAGE, _SESSION, _BEFORE, _limit(200)),
    doc="stage dispatches",
)
TOOL_CALLS: Final = Route(
    "GET",
    "/v1/tool-calls",
    ToolCallList,
    query=(Param("tool", doc="only the calls of this tool"), _SESSION, _BEFORE, _limit(200)),
    doc="tool calls",
)

# ---- sessions -------------------------------------------------------------------------------------

SESSIONS: Final = Route("GET", "/v1/sessions", SessionList, doc="every session the engine knows")
SESSION: Final = Route("GET", "/v1/sessions/{id}", SessionInfo, doc="one session, with its history")

# ---- the heartbeat --------------------------------------------------------------------------------

HEARTBEAT: Final = Route("GET", "/v1/heartbeat", HeartbeatStatus, doc="the heartbeat's status")
HEARTBEAT_FIRE: Final = Route(
    "POST", "/v1/heartbeat/fire", HeartbeatFired, doc="one tick now, answered when done"
)
HEARTBEAT_TICKS: Final = Route(
    "GET",
    "/v1/heartbeat/ticks",
    TickList,
    query=(_limit(50),),
    doc="the last ticks (ok, degraded, skipped, failed, cancelled), as the journal keeps them",
)
HEARTBEAT_PAUSE: Final = Route("POST", "/v1/heartbeat/pause", HeartbeatStatus, doc="stop the timer")
HEARTBEAT_RESUME: Final = Route("POST", "/v1/heartbeat/resume", HeartbeatStatus, doc="start the timer again")

# ---- changes and reviews --------------------------------------------------------------------------

COMMITS: Final = Route("GET", "/v1/commits", CommitLog, query=(_limit(100),), doc="the history as git has it")
CHANGES: Final = Route(
    "GET", "/v1/changes", ChangeList, query=(_limit(200),), doc="the history as the operator sees it"
)
CHANGE: Final = Route("GET", "/v1/changes/{rev}", Change, doc="one change, as in the list")
CHANGE_IMPACT: Final = Route("GET", "/v1/changes/{rev}/impact", Impact, doc="what reverting it would touch")
CHANGE_REACH: Final = Route(
    "GET",
    "/v1/changes/{rev}/reach",
    Reach,
    doc="the sessions that run it and the agent's answers in each since",
)
CHANGE_DIFF: Final = Route("GET", "/v1/changes/{rev}/diff", ChangeDiff, doc="the commit's patch")
CHANGE_FILE: Final = Route(
    "GET",
    "/v1/changes/{rev}/file",
    FileAtChange,
    query=(
        Param("path", doc="a file of the commit, e.g. hooks/notes.py", required=True),
        Param("old_path", doc="the file before the commit, for a rename (default: path)"),
    ),
    doc="one file as the commit left it and as it was before",
)
CHANGE_APPROVE: Final = Route(
    "POST", "/v1/changes/{rev}/approve", ReviewRecorded, Decision, doc="record an approval (a git note)"
)
CHANGE_REVERT: Final = Route(
    "POST", "/v1/changes/{rev}/revert", Reverted, RevertRequest, doc="undo it with a new commit"
)
ATTEMPT: Final = Route(
    "GET", "/v1/attempts/{id}", Attempt, doc="a change the agent tried that its test rejected, whole"
)
PENDING: Final = Route("GET", "/v1/pending/{id}", PendingReview, doc="a held change, its content and diff")
PENDING_APPROVE: Final = Route(
    "POST", "/v1/pending/{id}/approve", PendingChange, Decision, doc="install a held change"
)
PENDING_REJECT: Final = Route(
    "POST", "/v1/pending/{id}/reject", PendingChange, Decision, doc="drop a held change"
)
PENDING_DISMISS: Final = Route(
    "POST",
    "/v1/pending/{id}/dismiss",
    PendingChange,
    Decision,
    doc="set aside a stale held change (its file changed under it), with a reason the agent is told",
)

# ---- replays --------------------------------------------------------------------------------------

CHANGE_REPLAY: Final = Route(
    "POST", "/v1/changes/{rev}/replay", ReplayResult, ReplayRequest, doc="replay a commit on recorded inputs"
)
PENDING_REPLAY: Final = Route(
    "POST", "/v1/pending/{id}/replay", ReplayResult, ReplayRequest, doc="replay a held change"
)
CHANGE_REPLAY_LATEST: Final = Route(
    "GET", "/v1/changes/{rev}/replay", ReplayResult, doc="a commit's replay under way, else its last"
)
PENDING_REPLAY_LATEST: Final = Route(
    "GET", "/v1/pending/{id}/replay", ReplayResult, doc="a held change's replay under way, else its last"
)
REPLAY: Final = Route("GET", "/v1/replays/{id}", ReplayResult, doc="one replay, with every comparison")
REPLAY_CANCEL: Final = Route("POST", "/v1/replays/{id}/cancel", ReplayCancelled, doc="stop a replay")

# ---- behaviour checks -----------------------------------------------------------------------------

SCENARIOS: Final = Route(
    "GET",
    "/v1/scenarios",
    ScenarioList,
    doc="the workspace's scenarios (evals/), and the files that are wrong",
)
CHANGE_EVAL: Final = Route(
    "POST",
    "/v1/changes/{rev}/eval",
    EvalRun,
    EvalRequest,
    doc="run the scenarios (or re-ask real turns) before and after a commit",
)
PENDING_EVAL: Final = Route(
    "POST", "/v1/pending/{id}/eval", EvalRun, EvalRequest, doc="the same for a held change"
)
CHANGE_EVAL_LATEST: Final = Route(
    "GET", "/v1/changes/{rev}/eval", EvalRun, doc="a commit's checks under way, else its last"
)
PENDING_EVAL_LATEST: Final = Route(
    "GET", "/v1/pending/{id}/eval", EvalRun, doc="a held change's checks under way, else its last"
)
EVAL: Final = Route("GET", "/v1/evals/{id}", EvalRun, doc="one eval, with every run")
EVAL_CANCEL: Final = Route(
    "POST", "/v1/evals/{id}/cancel", EvalCancelled, doc="stop an eval: every process it started ends"
)

# ---- tools (the plugin registers them; the command line calls them too) ---------------------------

TOOLS: Final = Route("GET", "/v1/tools", ToolList, shim=True, doc="every tool the agent gets")
TOOL_PERMISSION: Final = Route(
    "POST",
    "/v1/tools/{name}/permission",
    PermissionAnswer,
    PermissionRequest,
    shim=True,
    doc="what a call asks opencode's permission system",
)
TOOL_CALL: Final = Route(
    "POST", "/v1/tools/{name}/call", ToolCall, ToolCallRequest, shim=True, doc="call one of evolve's tools"
)

# ---- the opencode plugin's hooks ------------------------------------------------------------------

OPENCODE_CONNECT: Final = Route(
    "POST", "/v1/opencode/connect", Connected, ConnectRequest, shim=True, doc="an opencode process connects"
)
OPENCODE_DISCONNECT: Final = Route(
    "POST", "/v1/opencode/disconnect", Ok, DisconnectRequest, shim=True, doc="it says goodbye"
)
OPENCODE_SYSTEM: Final = Route(
    "POST", "/v1/opencode/system", SystemPrompt, SystemRequest, shim=True, doc="a request's system prompt"
)
OPENCODE_CHAT_MESSAGE: Final = Route(
    "POST",
    "/v1/opencode/chat-message",
    ChatMessageAnswer,
    ChatMessageRequest,
    shim=True,
    doc="a user message: its agent and model",
)
OPENCODE_TOOL_BEFORE: Final = Route(
    "POST",
    "/v1/opencode/tool-before",
    ToolBeforeAnswer,
    ToolBeforeRequest,
    shim=True,
    accepted=True,
    doc="before a tool runs",
)
OPENCODE_TOOL_AFTER: Final = Route(
    "POST",
    "/v1/opencode/tool-after",
    ToolAfterAnswer,
    ToolAfterRequest,
    shim=True,
    accepted=True,
    doc="after a tool ran",
)
OPENCODE_COMPACTING: Final = Route(
    "POST",
    "/v1/opencode/compacting",
    CompactingAnswer,
    CompactingRequest,
    shim=True,
    doc="the prompt of a compaction",
)
OPENCODE_BEFORE_TURN: Final = Route(
    "POST",
    "/v1/opencode/before-turn",
    BeforeTurnAnswer,
    BeforeTurnRequest,
    shim=True,
    doc="before an LLM round trip (only when a hook handles before_turn)",
)
OPENCODE_TEXT_COMPLETE: Final = Route(
    "POST",
    "/v1/opencode/text-complete",
    TextCompleteAnswer,
    TextCompleteRequest,
    shim=True,
    doc="a text part of a response is complete (only when a hook handles after_turn)",
)
OPENCODE_ASSISTANT: Final = Route(
    "POST",
    "/v1/opencode/assistant",
    Ok,
    AssistantRequest,
    shim=True,
    accepted=True,
    doc="a finished response",
)
OPENCODE_EVENT: Final = Route(
    "POST", "/v1/opencode/event", Ok, OpencodeEvent, shim=True, accepted=True, doc="an opencode event"
)
OPENCODE_TOOLS_OFFERED: Final = Route(
    "POST",
    "/v1/opencode/tools-offered",
    Ok,
    ToolsOffered,
    shim=True,
    doc="the tools opencode offers the model",
)

ROUTES: Final[tuple[Route[Any], ...]] = (
    HEALTH,
    STATUS,
    SHUTDOWN,
    DEBUG_LOAD,
    EVENTS,
    STAGE,
    RUNS,
    RUN,
    RUN_CAUSE,
    FAILURES,
    DISPATCHES,
    TOOL_CALLS,
    SESSIONS,
    SESSION,
    HEARTBEAT,
    HEARTBEAT_FIRE,
    HEARTBEAT_TICKS,
    HEARTBEAT_PAUSE,
    HEARTBEAT_RESUME,
    COMMITS,
    CHANGES,
    CHANGE,
    CHANGE_IMPACT,
    CHANGE_REACH,
    CHANGE_DIFF,
    CHANGE_FILE,
    CHANGE_APPROVE,
    CHANGE_REVERT,
    ATTEMPT,
    PENDING,
    PENDING_APPROVE,
    PENDING_REJECT,
    PENDING_DISMISS,
    CHANGE_REPLAY,
    PENDING_REPLAY,
    CHANGE_REPLAY_LATEST,
    PENDING_REPLAY_LATEST,
    REPLAY,
    REPLAY_CANCEL,
    SCENARIOS,
    CHANGE_EVAL,
    PENDING_EVAL,
    CHANGE_EVAL_LATEST,
    PENDING_EVAL_LATEST,
    EVAL,
    EVAL_CANCEL,
    TOOLS,
    TOOL_PERMISSION,
    TOOL_CALL,
    OPENCODE_CONNECT,
    OPENCODE_DISCONNECT,
    OPENCODE_SYSTEM,
    OPENCODE_CHAT_MESSAGE,
    OPENCODE_TOOL_BEFORE,
    OPENCODE_TOOL_AFTER,
    OPENCODE_COMPACTING,
    OPENCODE_BEFORE_TURN,
    OPENCODE_TEXT_COMPLETE,
    OPENCODE_ASSISTANT,
    OPENCODE_EVENT,
    OPENCODE_TOOLS_OFFERED,
)
"""Every route, each once."""
