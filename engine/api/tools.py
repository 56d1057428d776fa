"""Evolve's tools: the list the plugin registers, what a call asks opencode's permission system, and
a call (from the agent through the plugin, or from the command line)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, body, opt_id, opt_obj, opt_str
from engine.api.shapes import history_of
from engine.api.shim import Shim
from engine.protocol import routes
from engine.protocol.records import PermissionAnswer, ToolList
from engine.tools.toolbox import Tools


class Turns(Protocol):
    """What a call needs of the agent's turns (engine.opencode.bridge.Bridge)."""

    def take_history(self, session: str | None, history: list[dict[str, Any]] | None) -> None: ...
    def turn_context(self, session: str | None, context: dict[str, Any] | None) -> dict[str, Any] | None: ...


def add_tool_routes(
    router: Router,
    shim: Shim,
    tools: Tools,
    turns: Turns,
    own_permission: Callable[[str | None, str | None, str | None], tuple[str | None, str | None]],
) -> None:
    """`own_permission`: how the permission of a call of evolve's own tool was decided, and by whom
    (ToolStages.own_permission)."""

    @router.serve(routes.TOOLS)
    async def listed(request: Request) -> Response:
        return shim.answer(ToolList([s.info() for s in tools.specs()]))

    @router.serve(routes.TOOL_PERMISSION)
    async def permission(request: Request) -> Response:
        data = await body(request)
        args = opt_obj(data, "args") or {}
        ask = tools.permission_request(request.path_params["name"], args, opt_id(data, "call_id"))
        return shim.answer(PermissionAnswer(ask))

    @router.serve(routes.TOOL_CALL)
    async def call(request: Request) -> Response:
        data = await body(request)
        args = opt_obj(data, "args")
        session = shim.session(request, data)
        turns.take_history(session, history_of(data))
        context = data.get("context")
        if context is not None and not isinstance(context, dict):
            raise ApiError(400, "'context' must be an object: {text, reasoning}")
        call_id = opt_id(data, "call_id")
        permission, by = own_permission(call_id, session, opt_str(data, "permission"))
        result = await tools.call(
            request.path_params["name"],
            args,
            session=session,
            call_id=call_id,
            origin=opt_str(data, "origin") or "tool",
            context=turns.turn_context(session, context),
            permission=permission,
            permission_by=by,
            refused=opt_str(data, "refused"),
            turn=opt_id(data, "turn"),
        )
        return shim.answer(result)
