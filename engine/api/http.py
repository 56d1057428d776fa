"""What every route of the API shares: bearer-token authentication, the API version check, reading
request bodies and query parameters, and errors that become clean JSON answers."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..protocol.api import API_VERSION, API_VERSION_HEADER

log = logging.getLogger("evolve.api")
Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    """An answer other than 200: `status` and a message that says what is wrong and what to do."""

    def __init__(self, status: int, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or {}  # more fields of the answer, for programs


class TokenAuth:
    """401 for every request without the engine's bearer token; 409 for a client of another API version."""

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
        client_api = headers.get(API_VERSION_HEADER.encode())
        if client_api is not None and client_api != str(API_VERSION).encode():
            resp = JSONResponse(
                {
                    "error": f"incompatible versions: the caller speaks evolve API {client_api.decode(errors='replace')}, "
                    f"this engine ({__version__}) speaks API {API_VERSION}; update the shim "
                    "(evolve shim install) or the engine so that both come from the same evolve release"
                },
                409,
            )
            await resp(scope, receive, send)
            return
        await self.app(scope, receive, send)


class Router:
    """Collects routes; a handler's ApiError becomes its status and message, any other exception a 500."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, path: str, *methods: str) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                try:
                    return await fn(request)
                except ApiError as exc:
                    return JSONResponse({**exc.details, "error": exc.message}, exc.status)
                except Exception as exc:  # an API call must answer, never kill the server
                    log.exception("%s %s failed", request.method, path)
                    return JSONResponse({"error": f"internal error: {type(exc).__name__}: {exc}"}, 500)

            self.routes.append(Route(path, endpoint, methods=list(methods)))
            return fn

        return deco


async def body(request: Request) -> dict[str, Any]:
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


def opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ApiError(400, f"{key!r} must be a string")


def int_param(request: Request, key: str, default: int, maximum: int = 10_000) -> int:
    raw = request.query_params.get(key)
    if raw is None:
        return default
    try:
        return max(0, min(int(raw), maximum))
    except ValueError:
        raise ApiError(400, f"query parameter {key!r} must be an integer") from None


def float_param(request: Request, key: str) -> float | None:
    raw = request.query_params.get(key)
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ApiError(400, f"query parameter {key!r} must be a number") from None


def sse(data: dict[str, Any]) -> bytes:
    """One Server-Sent Events message whose id is the event's sequence number."""
    return (
        f"id: {data.get('seq', '')}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()
    )
