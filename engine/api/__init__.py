"""The engine's HTTP API (Starlette, served by uvicorn on loopback), used by the shim and the console.

Every request needs `Authorization: Bearer <token>` (the token is in `state/engine.json`, readable only
by its owner). JSON in, JSON out; `GET /v1/events` is a Server-Sent Events stream of engine events.
Every route is declared in the contract (engine/protocol/routes.py) and served by the module of its
resource, which gets only the services it needs; docs/opencode.md documents them ("The engine's HTTP
API").
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from starlette.types import ASGIApp

from engine.api.changes import add_change_routes
from engine.api.evals import add_eval_routes
from engine.api.events import add_events_route
from engine.api.failures import Explaining, add_failure_routes
from engine.api.heartbeat import HeartbeatControls, add_heartbeat_routes
from engine.api.http import Router, TokenAuth
from engine.api.journaling import refusing
from engine.api.replays import add_replay_routes
from engine.api.runs import add_run_routes
from engine.api.sessions import add_session_routes
from engine.api.shim import Shim, add_shim_routes
from engine.api.status import add_status_routes
from engine.api.tools import add_tool_routes
from engine.changes.attempts import Attempts
from engine.changes.history import Changes
from engine.core.bus import EventBus
from engine.evals.service import Evals
from engine.hooks.hookrun import HookRunner
from engine.hooks.registry import HookRegistry
from engine.hooks.stages import Stages
from engine.journal.store import Journal
from engine.opencode.bridge import Bridge
from engine.opencode.connections import Connections
from engine.opencode.sessions import SessionStore
from engine.opencode.toolstages import ToolStages
from engine.protocol.records import EngineStatus
from engine.replay.replayer import Replayer
from engine.tools.toolbox import Tools
from engine.workspace.config import Config
from engine.workspace.layout import Workspace


class Served(Protocol):
    """The services the API hands to its route modules (engine.runtime.Engine has them all)."""

    @property
    def workspace(self) -> Workspace: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def config(self) -> Config: ...
    @property
    def bus(self) -> EventBus: ...
    @property
    def journal(self) -> Journal | None: ...
    @property
    def runner(self) -> HookRunner: ...
    @property
    def registry(self) -> HookRegistry: ...
    @property
    def stages(self) -> Stages: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def connections(self) -> Connections: ...
    @property
    def bridge(self) -> Bridge: ...
    @property
    def tool_stages(self) -> ToolStages: ...
    @property
    def tools(self) -> Tools: ...
    @property
    def changes(self) -> Changes: ...
    @property
    def attempts(self) -> Attempts: ...
    @property
    def replays(self) -> Replayer: ...
    @property
    def failures(self) -> Explaining: ...
    @property
    def evals(self) -> Evals: ...
    @property
    def heartbeat(self) -> HeartbeatControls: ...
    @property
    def shutdown_requested(self) -> asyncio.Event: ...

    def status(self) -> EngineStatus: ...
    def request_shutdown(self) -> None: ...


def build_app(engine: Served, token: str) -> ASGIApp:
    router = Router(lambda: engine.config.max_request_bytes, refusing(engine.journal))
    shim = Shim(engine.registry.handled, engine.bridge.seen)
    add_status_routes(
        router,
        workspace=engine.workspace.root,
        last_seq=lambda: engine.bus.last_seq,
        status=engine.status,
        shutdown=engine.request_shutdown,
        load=engine.runner.inject if engine.env.get("EVOLVE_DEBUG_LOAD") == "1" else None,
        served=router.served,
    )
    add_events_route(router, engine.bus, engine.shutdown_requested)
    add_run_routes(router, engine.journal, engine.stages)
    add_failure_routes(router, engine.failures, engine.journal)
    add_session_routes(router, engine.sessions, engine.connections.tools_offered)
    add_heartbeat_routes(router, engine.heartbeat)
    add_change_routes(router, engine.changes, engine.attempts)
    add_replay_routes(router, engine.replays, engine.changes.resolve)
    add_eval_routes(router, engine.evals, engine.changes.resolve)
    add_tool_routes(router, shim, engine.tools, engine.bridge, engine.tool_stages.own_permission)
    add_shim_routes(
        router,
        shim,
        bridge=engine.bridge,
        tool_stages=engine.tool_stages,
        connections=engine.connections,
        config=lambda: engine.config.to_dict(),
        frozen=engine.sessions.frozen,
    )
    return TokenAuth(router.app(), token)
