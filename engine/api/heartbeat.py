"""The heartbeat: its status, and the operator's fire, pause and resume."""

from __future__ import annotations

import asyncio
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import Router, answer, query
from engine.protocol import routes
from engine.protocol.records import HeartbeatFired, HeartbeatStatus, TickList, TickResult


class HeartbeatControls(Protocol):
    """What the operator does with the heartbeat (engine.heartbeat.service.Heartbeat)."""

    def status(self) -> HeartbeatStatus: ...
    async def fire(self, trigger: str = "manual") -> TickResult: ...
    async def pause(self) -> None: ...
    async def resume(self) -> None: ...
    def ticks(self, limit: int = 50) -> list[TickResult]: ...


def add_heartbeat_routes(router: Router, heartbeat: HeartbeatControls) -> None:
    @router.serve(routes.HEARTBEAT)
    async def status(request: Request) -> Response:
        return answer(heartbeat.status())

    @router.serve(routes.HEARTBEAT_FIRE)
    async def fire(request: Request) -> Response:
        result = await heartbeat.fire("manual")
        return answer(HeartbeatFired(result, heartbeat.status()))

    @router.serve(routes.HEARTBEAT_TICKS)
    async def ticks(request: Request) -> Response:
        limit = query(request, routes.HEARTBEAT_TICKS)["limit"]
        return answer(TickList(await asyncio.to_thread(heartbeat.ticks, limit)))

    @router.serve(routes.HEARTBEAT_PAUSE)
    async def pause(request: Request) -> Response:
        await heartbeat.pause()
        return answer(heartbeat.status())

    @router.serve(routes.HEARTBEAT_RESUME)
    async def resume(request: Request) -> Response:
        await heartbeat.resume()
        return answer(heartbeat.status())
