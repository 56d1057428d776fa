"""The opencode sessions the engine knows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer
from engine.opencode.sessions import SessionStore
from engine.protocol import routes
from engine.protocol.records import SessionList

Offered = Callable[[str | None], list[dict[str, Any]] | None]  # connection -> the tools it offers


def add_session_routes(router: Router, sessions: SessionStore, offered: Offered) -> None:
    @router.serve(routes.SESSIONS)
    async def listed(request: Request) -> Response:
        return answer(SessionList([s.info() for s in sessions.known()]))

    @router.serve(routes.SESSION)
    async def one(request: Request) -> Response:
        info = await asyncio.to_thread(sessions.info, request.path_params["id"], True)
        if info is None:
            raise ApiError(404, f"the engine knows no session {request.path_params['id']}")
        info.tools = offered(info.connection)
        return answer(info)
