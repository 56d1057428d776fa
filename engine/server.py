"""The engine's HTTP API (Starlette, served by uvicorn on loopback), used by the shim and the console.

Every request needs `Authorization: Bearer <token>` (the token is in `state/engine.json`, readable only
by its owner). JSON in, JSON out; `GET /v1/events` is a Server-Sent Events stream of engine events.
"""

from __future__ import annotations

import asyncio
import difflib
import hmac
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from . import __version__
from .dispatch import STAGES
from .records import Event
from .runtime import Engine

API_VERSION = 1
BRIEF_RUN_KEYS = (
    "id",
    "started_at",
    "stage",
    "hook",
    "session",
    "dispatch_id",
    "duration_ms",
    "error",
    "exit_code",
    "signal",
)
log = logging.getLogger("evolve.server")
Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class TokenAuth:
    """401 for every request without the engine's bearer token; 409 for a shim of another API version."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        given = auth[7:] if auth[:7].lower() == b"bearer " else b""
        if not hmac.compare_digest(given, self.token):
            resp: Response = JSONResponse(
                {"error": "unauthorized: send Authorization: Bearer <token> (see state/engine.json)"}, 401
            )
            await resp(scope, receive, send)
            return
        shim_api = headers.get(b"x-evolve-api")
        if shim_api is not None and shim_api != str(API_VERSION).encode():
            resp = JSONResponse(
                {
                    "error": f"incompatible versions: the caller speaks evolve API {shim_api.decode(errors='replace')}, "
                    f"this engine ({__version__}) speaks API {API_VERSION}; update the shim "
                    "(evolve shim install) or the engine so that both come from the same evolve release"
                },
                409,
            )
            await resp(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, f"request body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    return data


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ApiError(400, f"{key!r} must be a string")


def _int_param(request: Request, key: str, default: int, maximum: int = 10_000) -> int:
    raw = request.query_params.get(key)
    if raw is None:
        return default
    try:
        return max(0, min(int(raw), maximum))
    except ValueError:
        raise ApiError(400, f"query parameter {key!r} must be an integer") from None


def _float_param(request: Request, key: str) -> float | None:
    raw = request.query_params.get(key)
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ApiError(400, f"query parameter {key!r} must be a number") from None


def build_app(engine: Engine, token: str) -> ASGIApp:
    def route(path: str, methods: list[str]) -> Callable[[Handler], Route]:
        def wrap(fn: Handler) -> Route:
            async def endpoint(request: Request) -> Response:
                try:
                    return await fn(request)
                except ApiError as exc:
                    return JSONResponse({"error": exc.message}, exc.status)
                except Exception as exc:  # an API call must answer, never kill the server
                    log.exception("%s %s failed", request.method, path)
                    return JSONResponse({"error": f"internal error: {type(exc).__name__}: {exc}"}, 500)

            return Route(path, endpoint, methods=methods)

        return wrap

    routes: list[Route] = []

    def add(path: str, *methods: str) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            routes.append(route(path, list(methods))(fn))
            return fn

        return deco

    @add("/v1/health", "GET")
    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "ok": True,
                "version": __version__,
                "api": API_VERSION,
                "workspace": str(engine.workspace.root),
                "pid": os.getpid(),
                "seq": engine.bus.last_seq,  # subscribe to /v1/events?since=<this> to miss nothing
            }
        )

    @add("/v1/status", "GET")
    async def status(request: Request) -> Response:
        return JSONResponse(engine.status())

    @add("/v1/tools", "GET")
    async def tools(request: Request) -> Response:
        return JSONResponse({"tools": [s.to_dict() for s in engine.tool_specs()]})

    @add("/v1/tools/{name}/permission", "POST")
    async def permission(request: Request) -> Response:
        data = await _body(request)
        args = data.get("args") or {}
        if not isinstance(args, dict):
            raise ApiError(400, "'args' must be an object")
        return JSONResponse({"ask": engine.permission_request(request.path_params["name"], args)})

    @add("/v1/tools/{name}/call", "POST")
    async def call(request: Request) -> Response:
        data = await _body(request)
        args = data.get("args")
        if args is not None and not isinstance(args, dict):
            raise ApiError(400, "'args' must be an object")
        session = _opt_str(data, "session")
        engine.bridge.take_history(session, data.get("history"))
        result = await engine.call_tool(
            request.path_params["name"],
            args,
            session=session,
            call_id=_opt_str(data, "call_id"),
            origin=_opt_str(data, "origin") or "tool",
        )
        return JSONResponse(result.to_dict())

    @add("/v1/stages/{stage}", "POST")
    async def stage(request: Request) -> Response:
        data = await _body(request)
        context = data.get("context") or {}
        if not isinstance(context, dict):
            raise ApiError(400, "'context' must be an object")
        name = request.path_params["stage"]
        if name not in STAGES:
            raise ApiError(404, f"unknown stage {name!r}; stages: {', '.join(STAGES)}")
        result = await engine.dispatch(name, context, session=_opt_str(data, "session"))
        out = result.to_dict()
        if data.get("with_runs") and engine.journal is not None:
            await asyncio.to_thread(engine.journal.flush)
            by_id = {r.id: r for r in engine.journal.runs(dispatch_id=result.id, limit=10_000)}
            out["run_records"] = [by_id[i].to_dict() for i in result.runs if i in by_id]
        return JSONResponse(out)

    # ---- the shim's calls -----------------------------------------------------------------------

    @add("/v1/opencode/connect", "POST")
    async def connect(request: Request) -> Response:
        data = await _body(request)
        url, directory = _opt_str(data, "url"), _opt_str(data, "directory")
        if not url or not directory:
            raise ApiError(400, "'url' and 'directory' are required")
        conn = engine.bridge.connect(
            url,
            directory,
            _opt_str(data, "token"),
            _opt_str(data, "mode") or "unknown",
            _opt_str(data, "shim_version"),
        )
        engine.on_opencode_connected()
        from .bridge import OWN_CALL_PREFIXES

        return JSONResponse(
            {
                "id": conn.id,
                "config": engine.config.to_dict(),
                "own_call_prefixes": list(OWN_CALL_PREFIXES.values()),
            }
        )

    @add("/v1/opencode/disconnect", "POST")
    async def disconnect(request: Request) -> Response:
        data = await _body(request)
        conn_id = _opt_str(data, "id")
        if conn_id:
            await engine.bridge.disconnect(conn_id)
        return JSONResponse({"ok": True})

    @add("/v1/opencode/system", "POST")
    async def system(request: Request) -> Response:
        data = await _body(request)
        session = _opt_str(data, "session")
        engine.bridge.take_history(session, data.get("history"))
        current = data.get("system") or []
        if not isinstance(current, list):
            raise ApiError(400, "'system' must be a list of strings")
        result, reason = await engine.bridge.system(session, [str(s) for s in current])
        # A frozen prompt never changes, so the shim may keep it and stop asking for that session;
        # not the heartbeat session's, which each tick seeds anew.
        cacheable = result is not None and session != engine.state.read().get("heartbeat_session")
        return JSONResponse({"system": result, "reason": reason, "cacheable": cacheable})

    @add("/v1/opencode/chat-message", "POST")
    async def chat_message(request: Request) -> Response:
        data = await _body(request)
        model = data.get("model") if isinstance(data.get("model"), dict) else None
        engine.bridge.chat_message(_opt_str(data, "session"), _opt_str(data, "agent"), model)
        return JSONResponse({"ok": True})

    @add("/v1/opencode/tool-before", "POST")
    async def tool_before(request: Request) -> Response:
        data = await _body(request)
        session = _opt_str(data, "session")
        engine.bridge.take_history(session, data.get("history"))
        engine.bridge.tool_before(session, str(data.get("tool")), _opt_str(data, "call_id"), data.get("args"))
        return JSONResponse({"ok": True}, 202)

    @add("/v1/opencode/tool-after", "POST")
    async def tool_after(request: Request) -> Response:
        data = await _body(request)
        session = _opt_str(data, "session")
        engine.bridge.tool_after(
            session, str(data.get("tool")), _opt_str(data, "call_id"), data.get("title"), data.get("output")
        )
        return JSONResponse({"ok": True}, 202)

    @add("/v1/opencode/compacting", "POST")
    async def compacting(request: Request) -> Response:
        data = await _body(request)
        session = _opt_str(data, "session")
        engine.bridge.take_history(session, data.get("history"))
        return JSONResponse({"prompt": await engine.bridge.compacting(session)})

    @add("/v1/opencode/assistant", "POST")
    async def assistant(request: Request) -> Response:
        data = await _body(request)
        session = _opt_str(data, "session")
        if not session:
            raise ApiError(400, "'session' is required")
        engine.bridge.take_history(session, data.get("history"))
        raw_message = data.get("message")
        message: dict[str, Any] = raw_message if isinstance(raw_message, dict) else {}
        parts = [p for p in data.get("parts") or [] if isinstance(p, dict)]
        return JSONResponse({"continue": await engine.bridge.assistant_finished(session, message, parts)})

    @add("/v1/opencode/event", "POST")
    async def event(request: Request) -> Response:
        data = await _body(request)
        engine.bridge.event(data)
        return JSONResponse({"ok": True}, 202)

    # ---- what the console reads -------------------------------------------------------------------

    @add("/v1/events", "GET")
    async def events(request: Request) -> Response:
        raw_since = request.query_params.get("since")
        try:
            since = int(raw_since) if raw_since is not None else -1  # -1: no backlog, live only
        except ValueError:
            raise ApiError(400, "query parameter 'since' must be an integer") from None
        brief = request.query_params.get("brief") in ("1", "true", "yes")
        sub = engine.bus.subscribe()
        backlog = [e for e in engine.bus.recent if since >= 0 and e.seq > since]

        def encode(e: Event) -> bytes:
            data = e.to_dict()
            if brief and e.kind == "hook_run":
                # A watcher that fetches details on demand needs only the summary of each run.
                data["data"] = {k: e.data.get(k) for k in BRIEF_RUN_KEYS}
            return _sse(data)

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b": evolve event stream\n\n"
                for e in backlog:
                    yield encode(e)
                last = backlog[-1].seq if backlog else since
                stopping = asyncio.ensure_future(engine.shutdown_requested.wait())
                while True:
                    getting = asyncio.ensure_future(sub.get())
                    done, _ = await asyncio.wait(
                        {getting, stopping}, timeout=15.0, return_when=asyncio.FIRST_COMPLETED
                    )
                    if stopping in done:  # the engine is stopping: end the stream now
                        getting.cancel()
                        return
                    if getting not in done:
                        getting.cancel()
                        yield b": keep-alive\n\n"
                        continue
                    e = getting.result()
                    if e.seq <= last:
                        continue
                    last = e.seq
                    yield encode(e)
            finally:
                sub.close()

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    @add("/v1/runs", "GET")
    async def runs(request: Request) -> Response:
        journal = _journal(engine)
        # Runs already announced on the event stream must be in the answer: a client that reads
        # /v1/health's seq, then this, then subscribes since that seq misses none of them.
        await asyncio.to_thread(journal.flush)
        failed = request.query_params.get("failed")
        items = journal.runs(
            stage=request.query_params.get("stage"),
            hook=request.query_params.get("hook"),
            session=request.query_params.get("session"),
            failed=None if failed is None else failed.lower() in ("1", "true", "yes"),
            dispatch_id=request.query_params.get("dispatch"),
            before=_float_param(request, "before"),
            limit=_int_param(request, "limit", 200),
        )
        return JSONResponse({"runs": [r.to_dict() for r in items], "counts": journal.counts()})

    @add("/v1/runs/{id}", "GET")
    async def run(request: Request) -> Response:
        item = _journal(engine).run(request.path_params["id"])
        if item is None:
            raise ApiError(404, f"no run {request.path_params['id']}")
        return JSONResponse(item.to_dict())

    @add("/v1/dispatches", "GET")
    async def dispatches(request: Request) -> Response:
        await asyncio.to_thread(_journal(engine).flush)  # as for /v1/runs
        items = _journal(engine).dispatches(
            stage=request.query_params.get("stage"),
            session=request.query_params.get("session"),
            before=_float_param(request, "before"),
            limit=_int_param(request, "limit", 200),
        )
        return JSONResponse({"dispatches": [d.to_dict() for d in items]})

    @add("/v1/tool-calls", "GET")
    async def tool_calls(request: Request) -> Response:
        items = _journal(engine).tool_calls(
            tool=request.query_params.get("tool"),
            session=request.query_params.get("session"),
            before=_float_param(request, "before"),
            limit=_int_param(request, "limit", 200),
        )
        return JSONResponse({"tool_calls": [c.to_dict() for c in items]})

    @add("/v1/sessions", "GET")
    async def sessions(request: Request) -> Response:
        return JSONResponse(
            {"sessions": [engine.session_view(s.id, history=False) for s in engine.sessions.known()]}
        )

    @add("/v1/sessions/{id}", "GET")
    async def session(request: Request) -> Response:
        sid = request.path_params["id"]
        if sid not in {s.id for s in engine.sessions.known()}:
            raise ApiError(404, f"the engine knows no session {sid}")
        return JSONResponse(engine.session_view(sid, history=True))

    @add("/v1/commits", "GET")
    async def commits(request: Request) -> Response:
        limit = _int_param(request, "limit", 100)
        return JSONResponse({"commits": await asyncio.to_thread(engine.git.log, limit)})

    @add("/v1/heartbeat", "GET")
    async def heartbeat_status(request: Request) -> Response:
        return JSONResponse(engine.heartbeat.status())

    @add("/v1/heartbeat/fire", "POST")
    async def heartbeat_fire(request: Request) -> Response:
        result = await engine.heartbeat.fire("manual")
        return JSONResponse({"result": result.to_dict(), "status": engine.heartbeat.status()})

    @add("/v1/heartbeat/pause", "POST")
    async def heartbeat_pause(request: Request) -> Response:
        await engine.heartbeat.pause()
        return JSONResponse(engine.heartbeat.status())

    @add("/v1/heartbeat/resume", "POST")
    async def heartbeat_resume(request: Request) -> Response:
        await engine.heartbeat.resume()
        return JSONResponse(engine.heartbeat.status())

    @add("/v1/changes", "GET")
    async def changes(request: Request) -> Response:
        limit = _int_param(request, "limit", 200)
        history = await asyncio.to_thread(engine.changes.history, limit)
        pending = [p.to_dict(with_content=False) for p in engine.changes.pending(include_decided=True)]
        return JSONResponse({"changes": history, "pending": pending})

    @add("/v1/changes/{rev}/diff", "GET")
    async def change_diff(request: Request) -> Response:
        return JSONResponse(
            await _change(lambda: asyncio.to_thread(engine.changes.diff, request.path_params["rev"]))
        )

    @add("/v1/changes/{rev}/approve", "POST")
    async def change_approve(request: Request) -> Response:
        who = _opt_str(await _body(request), "by") or "operator"
        return JSONResponse(await _change(lambda: engine.changes.approve(request.path_params["rev"], who)))

    @add("/v1/changes/{rev}/revert", "POST")
    async def change_revert(request: Request) -> Response:
        who = _opt_str(await _body(request), "by") or "operator"
        return JSONResponse(await _change(lambda: engine.changes.revert(request.path_params["rev"], who)))

    @add("/v1/pending/{id}", "GET")
    async def pending_get(request: Request) -> Response:
        item = await _change(lambda: _async(engine.changes.get, request.path_params["id"]))
        current = engine.workspace.root / item.file
        try:
            before = current.read_text(encoding="utf-8", errors="replace")
        except OSError:
            before = ""
        diff = "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                item.content.splitlines(keepends=True),
                f"a/{item.file}",
                f"b/{item.file}",
            )
        )
        return JSONResponse({**item.to_dict(), "diff": diff})

    @add("/v1/pending/{id}/approve", "POST")
    async def pending_approve(request: Request) -> Response:
        who = _opt_str(await _body(request), "by") or "operator"
        return JSONResponse(
            await _change(lambda: engine.changes.approve_pending(request.path_params["id"], who))
        )

    @add("/v1/pending/{id}/reject", "POST")
    async def pending_reject(request: Request) -> Response:
        data = await _body(request)
        who, reason = _opt_str(data, "by") or "operator", _opt_str(data, "reason")
        return JSONResponse(
            await _change(lambda: engine.changes.reject_pending(request.path_params["id"], who, reason))
        )

    @add("/v1/debug/load", "POST")
    async def debug_load(request: Request) -> Response:
        """Synthetic hook runs through the real journal and event stream, for load tests of the
        console. Only when the engine was started with EVOLVE_DEBUG_LOAD=1."""
        if engine.env.get("EVOLVE_DEBUG_LOAD") != "1":
            raise ApiError(404, "not enabled: start the engine with EVOLVE_DEBUG_LOAD=1")
        data = await _body(request)
        count = int(data.get("count") or 1)
        size = int(data.get("stdout_bytes") or 0)
        return JSONResponse({"recorded": engine.inject_runs(min(count, 100_000), size)})

    @add("/v1/shutdown", "POST")
    async def shutdown(request: Request) -> Response:
        engine.request_shutdown()
        return JSONResponse({"ok": True})

    app = Starlette(routes=routes)
    return TokenAuth(app, token)


async def _change(action: Callable[[], Awaitable[Any]]) -> Any:
    from .changes import ChangeError

    try:
        return await action()
    except ChangeError as exc:
        raise ApiError(409, str(exc)) from exc


async def _async(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def _journal(engine: Engine) -> Any:
    if engine.journal is None:
        raise ApiError(503, "this engine runs without a journal")
    return engine.journal


def _sse(data: dict[str, Any]) -> bytes:
    return (
        f"id: {data.get('seq', '')}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()
    )
