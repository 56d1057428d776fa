"""The engine's HTTP API (Starlette, served by uvicorn on loopback), used by the shim and the console.

Every request needs `Authorization: Bearer <token>` (the token is in `state/engine.json`, readable only
by its owner). JSON in, JSON out; `GET /v1/events` is a Server-Sent Events stream of engine events.
The routes are documented in docs/opencode.md, "The engine's HTTP API".
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp

from engine.api.events_route import add_events_route
from engine.api.http import Router, TokenAuth
from engine.api.operator_routes import add_operator_routes
from engine.api.shim_routes import add_shim_routes
from engine.runtime import Engine


def build_app(engine: Engine, token: str) -> ASGIApp:
    router = Router(lambda: engine.config.max_request_bytes)
    add_operator_routes(router, engine)
    add_shim_routes(router, engine)
    add_events_route(router, engine)
    return TokenAuth(Starlette(routes=router.routes), token)
