"""The routes of the opencode plugin's hooks (those of the contract marked `shim`): connecting, the
system prompt, chat messages, tool stages, compaction, finished responses, events.

What opencode need not wait for (finished responses, tool calls nobody awaits, events) is answered
`202` at once, before any hook runs; the engine finishes the work in the background.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, JSONResponse, Router, body, opt_id, opt_str
from engine.api.shapes import connection, event_of, history_of, message_of, model_of, parts_of, system_of
from engine.opencode.bridge import Bridge
from engine.opencode.connections import Connections
from engine.opencode.toolstages import ToolStages
from engine.protocol import routes
from engine.protocol.api import CONNECTION_HEADER, HANDLED_HEADER
from engine.protocol.opencode import OWN_CALL_PREFIXES
from engine.protocol.records import ChatMessageAnswer, CompactingAnswer, Connected, Ok, Record, SystemPrompt


class Shim:
    """What every route the shim calls shares: each answer names the stages some hook handles
    (HANDLED_HEADER), and a call's session is noted as seen through the caller's connection."""

    def __init__(
        self, handled: Callable[[], list[str]], seen: Callable[[str | None, str | None], None]
    ) -> None:
        self.handled = handled
        self._seen = seen

    def answer(self, data: Record | dict[str, Any], status: int = 200) -> Response:
        content = data.to_dict() if isinstance(data, Record) else data
        return JSONResponse(content, status, headers={HANDLED_HEADER: ",".join(self.handled())})

    def session(self, request: Request, data: dict[str, Any]) -> str | None:
        """The call's session, noted as seen through the caller's opencode connection."""
        session = opt_id(data, "session")
        self._seen(session, request.headers.get(CONNECTION_HEADER))
        return session


def _names(value: Any) -> list[str] | None:
    return [str(t) for t in value] if isinstance(value, list) else None


def add_shim_routes(
    router: Router,
    shim: Shim,
    *,
    bridge: Bridge,
    tool_stages: ToolStages,
    connections: Connections,
    config: Callable[[], dict[str, Any]],
    frozen: Callable[[str], list[str] | None],
) -> None:
    """`config()`: the engine's configuration as the plugin gets it; `frozen(session)`: the session's
    frozen system prompt, if any."""

    @router.serve(routes.OPENCODE_CONNECT)
    async def connect(request: Request) -> Response:
        data = await body(request)
        url, directory, token = connection(data)
        conn = connections.connect(
            url,
            directory,
            token,
            opt_str(data, "mode") or "unknown",
            opt_str(data, "shim_version"),
            opt_str(data, "command"),
        )
        return shim.answer(Connected(conn.id, config(), list(OWN_CALL_PREFIXES.values()), shim.handled()))

    @router.serve(routes.OPENCODE_DISCONNECT)
    async def disconnect(request: Request) -> Response:
        conn_id = opt_str(await body(request), "id")
        if conn_id:
            await connections.disconnect(conn_id, "opencode said goodbye")
        return shim.answer(Ok())

    @router.serve(routes.OPENCODE_SYSTEM)
    async def system(request: Request) -> Response:
        data = await body(request)
        session = shim.session(request, data)
        current = system_of(data)
        bridge.take_history(session, history_of(data))
        result = await bridge.system(
            session,
            current,
            model=model_of(data.get("model")),
            tools=_names(data.get("tools")),
            turn=opt_id(data, "turn"),
        )
        return shim.answer(SystemPrompt(result.system, result.reason, result.cacheable, result.cancel))

    @router.serve(routes.OPENCODE_CHAT_MESSAGE)
    async def chat_message(request: Request) -> Response:
        data = await body(request)
        model = model_of(data.get("model"))
        synthetic = data.get("synthetic") is True
        session = shim.session(request, data)
        bridge.chat_message(session, opt_str(data, "agent"), model, synthetic)
        # Whether the session still has a frozen prompt: when the operator refreshed it, the shim
        # drops the copy it keeps, and the next request composes the prompt anew.
        return shim.answer(ChatMessageAnswer(True, bool(session and frozen(session) is not None)))

    @router.serve(routes.OPENCODE_TOOL_BEFORE)
    async def tool_before(request: Request) -> Response:
        """`wait: true` (the shim sends it when a hook handles before_tool): answered with what the
        shim must do (`deny`, `args`); otherwise accepted at once."""
        data = await body(request)
        session = shim.session(request, data)
        bridge.take_history(session, history_of(data))
        tool, call_id, own = str(data.get("tool")), opt_id(data, "call_id"), data.get("own") is True
        if data.get("wait") is True:
            return shim.answer(await tool_stages.before_tool(session, tool, call_id, data.get("args"), own))
        tool_stages.accept_before(session, tool, call_id, data.get("args"), own)
        return shim.answer(Ok(), 202)

    @router.serve(routes.OPENCODE_TOOL_AFTER)
    async def tool_after(request: Request) -> Response:
        """`wait: true` (a hook handles after_tool): answered with `result` when a hook replaced it."""
        data = await body(request)
        wait = data.get("wait") is True
        result = await tool_stages.after_tool(
            shim.session(request, data),
            str(data.get("tool")),
            opt_id(data, "call_id"),
            data.get("args"),
            data.get("title"),
            data.get("output"),
            wait,
        )
        return shim.answer(result) if wait else shim.answer(Ok(), 202)

    @router.serve(routes.OPENCODE_COMPACTING)
    async def compacting(request: Request) -> Response:
        data = await body(request)
        session = shim.session(request, data)
        bridge.take_history(session, history_of(data))
        return shim.answer(CompactingAnswer(await bridge.compacting(session, opt_str(data, "prompt"))))

    @router.serve(routes.OPENCODE_BEFORE_TURN)
    async def before_turn(request: Request) -> Response:
        """Before an LLM round trip, only when a hook handles before_turn (the shim awaits it)."""
        data = await body(request)
        session = shim.session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        bridge.take_history(session, history_of(data))
        return shim.answer(await bridge.before_turn(session, _names(data.get("tools"))))

    @router.serve(routes.OPENCODE_TEXT_COMPLETE)
    async def text_complete(request: Request) -> Response:
        """A text part of a response is complete (awaited by opencode, only when a hook handles
        after_turn): answered with `text` when a hook replaced it."""
        data = await body(request)
        session = shim.session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        return shim.answer(
            await bridge.after_turn.text_complete(
                session,
                message_of(data.get("message")),
                opt_str(data, "part"),
                opt_str(data, "text") or "",
                parts_of(data.get("parts")),
                opt_str(data, "turn"),
            )
        )

    @router.serve(routes.OPENCODE_ASSISTANT)
    async def assistant(request: Request) -> Response:
        """A finished response: accepted at once (observe_message, idle, before_stop run in the
        background, and the engine sends a `continue` to opencode itself)."""
        data = await body(request)
        session = shim.session(request, data)
        if not session:
            raise ApiError(400, "'session' is required")
        message = message_of(data.get("message"))
        parts = parts_of(data.get("parts"))
        bridge.take_history(session, history_of(data))
        bridge.accept_assistant(session, message, parts)
        return shim.answer(Ok(), 202)

    @router.serve(routes.OPENCODE_TOOLS_OFFERED)
    async def tools_offered(request: Request) -> Response:
        data = await body(request)
        offered = data.get("tools")
        if not isinstance(offered, list) or not all(isinstance(t, dict) for t in offered):
            raise ApiError(400, "'tools' must be a list of {name, description, parameters}")
        conn = request.headers.get(CONNECTION_HEADER)
        if conn:
            connections.offered(conn, offered)
        return JSONResponse(Ok().to_dict())

    @router.serve(routes.OPENCODE_EVENT)
    async def event(request: Request) -> Response:
        bridge.event(event_of(await body(request)), request.headers.get(CONNECTION_HEADER))
        return shim.answer(Ok(), 202)
