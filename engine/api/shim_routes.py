"""The routes the opencode plugin calls (protocol.api.SHIM_ROUTES): connecting, its hooks, its tools.

What opencode need not wait for (finished responses, tool calls nobody awaits, events) is answered
`202` at once, before any hook runs; the engine finishes the work in the background.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, JSONResponse, Router, body, opt_obj, opt_str
from engine.api.shapes import connection, event_of, history_of, message_of, model_of, parts_of, system_of
from engine.protocol.api import HANDLED_HEADER
from engine.protocol.opencode import OWN_CALL_PREFIXES
from engine.runtime import Engine

CONNECTION_HEADER = "x-evolve-connection"  # the shim's connection id, on every call after connecting


def add_shim_routes(router: Router, engine: Engine) -> None:
    bridge = engine.bridge
    tool_stages = engine.tool_stages

    def answer(data: Any, status: int = 200) -> Response:
        """Every answer tells the shim which stages some hook handles (HANDLED_HEADER)."""
        return JSONResponse(data, status, headers={HANDLED_HEADER: ",".join(engine.registry.handled())})

    def from_session(request: Request, data: dict[str, Any]) -> str | None:
        """The call's session, noted as seen through the caller's opencode connection."""
        session = opt_str(data, "session")
        bridge.seen(session, request.headers.get(CONNECTION_HEADER))
        return session

    def args_of(data: dict[str, Any]) -> dict[str, Any] | None:
        return opt_obj(data, "args")

    @router.add("/v1/tools", "GET")
    async def tools(request: Request) -> Response:
        return answer({"tools": [s.to_dict() for s in engine.tools.specs()]})

    @router.add("/v1/tools/{name}/permission", "POST")
    async def permission(request: Request) -> Response:
        data = await body(request)
        args = args_of(data) or {}
        ask = engine.tools.permission_request(request.path_params["name"], args, opt_str(data, "call_id"))
        return answer({"ask": ask})

    @router.add("/v1/tools/{name}/call", "POST")
    async def call(request: Request) -> Response:
        data = await body(request)
        args = args_of(data)
        session = from_session(request, data)
        bridge.take_history(session, history_of(data))
        context = data.get("context")
        if context is not None and not isinstance(context, dict):
            raise ApiError(400, "'context' must be an object: {text, reasoning}")
        call_id = opt_str(data, "call_id")
        permission, by = tool_stages.own_permission(call_id, session, opt_str(data, "permission"))
        result = await engine.tools.call(
            request.path_params["name"],
            args,
            session=session,
            call_id=call_id,
            origin=opt_str(data, "origin") or "tool",
            context=bridge.turn_context(session, context),
            permission=permission,
            permission_by=by,
            refused=opt_str(data, "refused"),
            turn=opt_str(data, "turn"),
        )
        return answer(result.to_dict())

    @router.add("/v1/opencode/connect", "POST")
    async def connect(request: Request) -> Response:
        data = await body(request)
        url, directory, token = connection(data)
        conn = engine.connections.connect(
            url,
            directory,
            token,
            opt_str(data, "mode") or "unknown",
            opt_str(data, "shim_version"),
            opt_str(data, "command"),
        )
        return answer(
            {
                "id": conn.id,
                "config": engine.config.to_dict(),
                "own_call_prefixes": list(OWN_CALL_PREFIXES.values()),
                "handled": engine.registry.handled(),
            }
        )

    @router.add("/v1/opencode/disconnect", "POST")
    async def disconnect(request: Request) -> Response:
        conn_id = opt_str(await body(request), "id")
        if conn_id:
            await engine.connections.disconnect(conn_id, "opencode said goodbye")
        return answer({"ok": True})

    @router.add("/v1/opencode/system", "POST")
    async def system(request: Request) -> Response:
        data = await body(request)
        session = from_session(request, data)
        current = system_of(data)
        bridge.take_history(session, history_of(data))
        tools = data.get("tools")
        result = await bridge.system(
            session,
            current,
            model=model_of(data.get("model")),
            tools=[str(t) for t in tools] if isinstance(tools, list) else None,
            turn=opt_str(data, "turn"),
        )
        return answer(
            {
                "system": result.system,
                "reason": result.reason,
                "cacheable": result.cacheable,
                "cancel": result.cancel,
            }
        )

    @router.add("/v1/opencode/chat-message", "POST")
    async def chat_message(request: Request) -> Response:
        data = await body(request)
        model = model_of(data.get("model"))
        synthetic = data.get("synthetic") is True
        session = from_session(request, data)
        bridge.chat_message(session, opt_str(data, "agent"), model, synthetic)
        # Whether the session still has a frozen prompt: when the operator refreshed it, the shim
        # drops the copy it keeps, and the next request composes the prompt anew.
        frozen = bool(session and engine.sessions.frozen(session) is not None)
        return answer({"ok": True, "frozen": frozen})

    @router.add("/v1/opencode/tool-before", "POST")
    async def tool_before(request: Request) -> Response:
        """`wait: true` (the shim sends it when a hook handles before_tool): answered with what the
        shim must do (`deny`, `args`); otherwise accepted at once."""
        data = await body(request)
        session = from_session(request, data)
        bridge.take_history(session, history_of(data))
        tool, call_id, own = str(data.get("tool")), opt_str(data, "call_id"), data.get("own") is True
        if data.get("wait") is True:
            return answer(await tool_stages.before_tool(session, tool, call_id, data.get("args"), own))
        tool_stages.accept_before(session, tool, call_id, data.get("args"), own)
        return answer({"ok": True}, 202)

    @router.add("/v1/opencode/tool-after", "POST")
    async def tool_after(request: Request) -> Response:
        """`wait: true` (a hook handles after_tool): answered with `result` when a hook replaced it."""
        data = await body(request)
        wait = data.get("wait") is True
        result = await tool_stages.after_tool(
            from_session(request, data),
            str(data.get("tool")),
            opt_str(data, "call_id"),
            data.get("args"),
            data.get("title"),
            data.get("output"),
            wait,
        )
        return answer(result) if wait else answer({"ok": True}, 202)

    @router.add("/v1/opencode/compacting", "POST")
    async def compacting(request: Request) -> Response:
        data = await body(request)
        session = from_session(request, data)
        bridge.take_history(session, history_of(data))
        return answer({"prompt": await bridge.compacting(session, opt_str(data, "prompt"))})

    @router.add("/v1/opencode/before-turn", "POST")
    async def before_turn(request: Request) -> Response:
        """Before an LLM round trip, only when a hook handles before_turn (the shim awaits it)."""
        data = await body(request)
        session = from_session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        bridge.take_history(session, history_of(data))
        tools = data.get("tools")
        return answer(
            await bridge.before_turn(session, [str(t) for t in tools] if isinstance(tools, list) else None)
        )

    @router.add("/v1/opencode/text-complete", "POST")
    async def text_complete(request: Request) -> Response:
        """A text part of a response is complete (awaited by opencode, only when a hook handles
        after_turn): answered with `text` when a hook replaced it."""
        data = await body(request)
        session = from_session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        return answer(
            await bridge.after_turn.text_complete(
                session,
                message_of(data.get("message")),
                opt_str(data, "part"),
                opt_str(data, "text") or "",
                parts_of(data.get("parts")),
                opt_str(data, "turn"),
            )
        )

    @router.add("/v1/opencode/assistant", "POST")
    async def assistant(request: Request) -> Response:
        """A finished response: accepted at once (observe_message, idle, before_stop run in the
        background, and the engine sends a `continue` to opencode itself)."""
        data = await body(request)
        session = from_session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        message = message_of(data.get("message"))
        parts = parts_of(data.get("parts"))
        bridge.take_history(session, history_of(data))
        bridge.accept_assistant(session, message, parts)
        return answer({"ok": True}, 202)

    @router.add("/v1/opencode/tools-offered", "POST")
    async def tools_offered(request: Request) -> Response:
        data = await body(request)
        offered = data.get("tools")
        if not isinstance(offered, list) or not all(isinstance(t, dict) for t in offered):
            raise ApiError(400, "'tools' must be a list of {name, description, parameters}")
        connection = request.headers.get(CONNECTION_HEADER)
        if connection:
            engine.connections.offered(connection, offered)
        return JSONResponse({"ok": True})

    @router.add("/v1/opencode/event", "POST")
    async def event(request: Request) -> Response:
        bridge.event(event_of(await body(request)), request.headers.get(CONNECTION_HEADER))
        return answer({"ok": True}, 202)
