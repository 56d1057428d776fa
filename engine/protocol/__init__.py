"""The wire contract between the engine, the console and the shim: one definition of everything that
crosses a process boundary.

- `routes`: every route of the HTTP API (method, path, query, request and answer records).
- `calls`: the typed client as data: one function per route, returning a `Call[T]` a transport sends.
- `api`: the API version, its headers, the routes the shim calls, the brief-run fields.
- `announcement`: `state/engine.json`, how a running engine is found.
- `stages`: the stage names, and one row of facts a stage (its protocols, who fires it, recover,
  session, replay, the console's input), from which the sets of stages are derived.
- `opencode`: how opencode's own LLM calls (titles, compaction) are told apart from the agent's.
- `records`: hook runs, stage results, tool calls, changes, pending changes, sessions, heartbeat, and
  the requests and answers of the API.
- `events`: every kind of event on the stream, each with its typed payload.
- `text`: a replay's findings in words, shared by `evolve replay` and the console.

This package imports only the standard library, so that any client (the console, a script on
another machine) can use it without the engine's dependencies. A test enforces that.
"""

from .announcement import Announcement
from .api import API_VERSION, API_VERSION_HEADER, BRIEF_RUN_FIELDS, SHIM_ROUTES
from .calls import Call
from .events import Event, EventKind
from .records import (
    Change,
    CommitInfo,
    ConnectionInfo,
    EngineStatus,
    FileAtChange,
    HeartbeatStatus,
    HookInfo,
    HookRun,
    PendingChange,
    SessionInfo,
    StageResult,
    TickResult,
    ToolCall,
    new_id,
)
from .routes import ROUTES, Route
from .stages import STAGES, Stage

__all__ = [
    "API_VERSION",
    "API_VERSION_HEADER",
    "BRIEF_RUN_FIELDS",
    "ROUTES",
    "SHIM_ROUTES",
    "STAGES",
    "Announcement",
    "Call",
    "Change",
    "CommitInfo",
    "ConnectionInfo",
    "EngineStatus",
    "Event",
    "EventKind",
    "FileAtChange",
    "HeartbeatStatus",
    "HookInfo",
    "HookRun",
    "PendingChange",
    "Route",
    "SessionInfo",
    "Stage",
    "StageResult",
    "TickResult",
    "ToolCall",
    "new_id",
]
