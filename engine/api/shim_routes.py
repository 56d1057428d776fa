"""The routes the opencode plugin calls (protocol.api.SHIM_ROUTES): connecting, its hooks, its tools."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..protocol.opencode import OWN_CALL_PREFIXES
from ..runtime import Engine
from . import shapes
from .http import ApiError, JSONResponse, Router, body, opt_obj, opt_str

CONNECTION_HEADER = "x-evolve-connection"  # the shim's connection id, on every call after connecting


def add_shim_routes(router: Router, engine: Engine) -> None:
    bridge = engine.bridge

    def from_session(request: Request, data: dict[str, Any]) -> str | None:
        """The call's session, noted as seen through the caller's opencode connection."""
        session = opt_str(data, "session")
        bridge.seen(session, request.headers.get(CONNECTION_HEADER))
        return session

    @router.add("/v1/tools", "GET")
    async def tools(request: Request) -> Response:
        return JSONResponse({"tools": [s.to_dict() for s in engine.tools.specs()]})

    @router.add("/v1/tools/{name}/permission", "POST")
    async def permission(request: Request) -> Response:
        data = await body(request)
        args = opt_obj(data, "args") or {}
        return JSONResponse({"ask": engine.tools.permission_request(request.path_params["name"], args)})

    @router.add("/v1/tools/{name}/call", "POST")
    async def call(request: Request) -> Response:
        data = await body(request)
        args = opt_obj(data, "args")
        session = from_session(request, data)
        bridge.take_history(session, shapes.history(data))
        result = await engine.tools.call(
            request.path_params["name"],
            args,
            session=session,
            call_id=opt_str(data, "call_id"),
            origin=opt_str(data, "origin") or "tool",
        )
        return JSONResponse(result.to_dict())

    @router.add("/v1/opencode/connect", "POST")
    async def connect(request: Request) -> Response:
        data = await body(request)
        url, directory, token = shapes.connection(data)
        conn = engine.connections.connect(
            url,
            directory,
            token,
            opt_str(data, "mode") or "unknown",
            opt_str(data, "shim_version"),
        )
        return JSONResponse(
            {
                "id": conn.id,
                "config": engine.config.to_dict(),
                "own_call_prefixes": list(OWN_CALL_PREFIXES.values()),
            }
        )

    @router.add("/v1/opencode/disconnect", "POST")
    async def disconnect(request: Request) -> Response:
        conn_id = opt_str(await body(request), "id")
        if conn_id:
            await engine.connections.disconnect(conn_id, "opencode said goodbye")
        return JSONResponse({"ok": True})

    @router.add("/v1/opencode/system", "POST")
    async def system(request: Request) -> Response:
        data = await body(request)
        session = from_session(request, data)
        current = shapes.system(data)
        bridge.take_history(session, shapes.history(data))
        result, reason, cacheable = await bridge.system(session, current)
        return JSONResponse({"system": result, "reason": reason, "cacheable": cacheable})

    @router.add("/v1/opencode/chat-message", "POST")
    async def chat_message(request: Request) -> Response:
        data = await body(request)
        model = shapes.model(data.get("model"))
        synthetic = data.get("synthetic") is True
        bridge.chat_message(from_session(request, data), opt_str(data, "agent"), model, synthetic)
        return JSONResponse({"ok": True})

    @router.add("/v1/opencode/tool-before", "POST")
    async def tool_before(request: Request) -> Response:
        data = await body(request)
        session = from_session(request, data)
        bridge.take_history(session, shapes.history(data))
        bridge.tool_before(session, str(data.get("tool")), opt_str(data, "call_id"), data.get("args"))
        return JSONResponse({"ok": True}, 202)

    @router.add("/v1/opencode/tool-after", "POST")
    async def tool_after(request: Request) -> Response:
        data = await body(request)
        bridge.tool_after(
            from_session(request, data),
            str(data.get("tool")),
            opt_str(data, "call_id"),
            data.get("title"),
            data.get("output"),
        )
        return JSONResponse({"ok": True}, 202)

    @router.add("/v1/opencode/compacting", "POST")
    async def compacting(request: Request) -> Response:
        data = await body(request)
        session = from_session(request, data)
        bridge.take_history(session, shapes.history(data))
        return JSONResponse({"prompt": await bridge.compacting(session)})

    @router.add("/v1/opencode/assistant", "POST")
    async def assistant(request: Request) -> Response:
        data = await body(request)
        session = from_session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        message = shapes.message(data.get("message"))
        parts = shapes.parts(data.get("parts"))
        bridge.take_history(session, shapes.history(data))
        return JSONResponse({"continue": await bridge.assistant_finished(session, message, parts)})

    @router.add("/v1/opencode/event", "POST")
    async def event(request: Request) -> Response:
        bridge.event(shapes.event(await body(request)), request.headers.get(CONNECTION_HEADER))
        return JSONResponse({"ok": True}, 202)
