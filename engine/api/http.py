"""What every route of the API shares: bearer-token authentication, the API version check, serving a
route of the contract (a route without parameters found by its method and path in one look-up), the
request body limit, reading request bodies and the declared query parameters, answers that always
encode, and errors that become clean JSON answers."""

from __future__ import annotations

import hmac
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse as StarletteJSONResponse
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engine import __version__
from engine.core import strictjson
from engine.protocol.api import API_VERSION, API_VERSION_HEADER
from engine.protocol.records import Record
from engine.protocol.routes import Param
from engine.protocol.routes import Route as ContractRoute

log = logging.getLogger("evolve.api")
Handler = Callable[[Request], Awaitable[Response]]
_BODY_LIMIT = "evolve.body_limit"  # in a request's scope: the router's body limit, in bytes


class ApiError(Exception):
    """An answer other than 200: `status` and a message that says what is wrong and what to do."""

    def __init__(
        self,
        status: int,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details or {}  # more fields of the answer, for programs
        self.retry_after = retry_after  # seconds, for a 503


class JSONResponse(StarletteJSONResponse):
    """A JSON answer that always encodes: a value that JSON cannot hold (a NaN kept by an older
    engine) becomes null instead of turning the answer into a 500."""

    def render(self, content: Any) -> bytes:
        return strictjson.dumps(content, separators=(",", ":")).encode("utf-8")  # as Starlette's


def too_large(limit: int, size: int | None = None) -> str:
    got = f"is {size} bytes" if size is not None else "is larger"
    return (
        f"request body {got}; this engine takes at most {limit} bytes "
        "(max_request_bytes in config/evolve.jsonc, or EVOLVE_MAX_REQUEST_BYTES)"
    )


_VERSION_HEADER = (API_VERSION_HEADER.encode(), str(API_VERSION).encode())


def _versioned(send: Send) -> Send:
    """`send` with the engine's API version on every answer, refusals included: a client tells an
    evolve engine (and its version) from whatever else answers at an address."""

    async def versioned(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), _VERSION_HEADER]}
        await send(message)

    return versioned


class TokenAuth:
    """401 for every request without the engine's bearer token; 409 for a client of another API version."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _versioned(send)
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
    """Serves the routes of the contract (protocol.routes); a handler's ApiError becomes its status
    and message, any other exception a 500."""

    def __init__(
        self,
        body_limit: Callable[[], int] | None = None,
        refuse: Callable[[ContractRoute[Any]], ApiError | None] | None = None,
    ) -> None:
        """`body_limit()`: the largest request body `body()` reads, in bytes (none when None);
        `refuse(route)`: an answer for a route the engine does not take now (its journal cannot
        write), before anything of the request is read."""
        self.routes: list[Route] = []
        self._exact: dict[
            tuple[str, str], Handler
        ] = {}  # (method, path) -> endpoint, routes without parameters
        self._body_limit = body_limit
        self._refuse = refuse
        self.served: Counter[str] = Counter()  # "METHOD /route/{param}" -> requests answered

    def serve(self, route: ContractRoute[Any]) -> Callable[[Handler], Handler]:
        """Register the handler of a declared route (each route is served once)."""
        if any(route.path == r.path and route.method in (r.methods or ()) for r in self.routes):
            raise ValueError(f"{route.key} is served twice")

        def deco(fn: Handler) -> Handler:
            async def endpoint(request: Request) -> Response:
                self.served[f"{request.method} {route.path}"] += 1
                if self._body_limit is not None:
                    request.scope[_BODY_LIMIT] = self._body_limit()
                try:
                    refused = self._refuse(route) if self._refuse is not None else None
                    if refused is not None:
                        raise refused
                    return await fn(request)
                except ApiError as exc:
                    headers = {"retry-after": str(exc.retry_after)} if exc.retry_after is not None else None
                    return JSONResponse({**exc.details, "error": exc.message}, exc.status, headers)
                except Exception as exc:  # an API call must answer, never kill the server
                    log.exception("%s %s failed", request.method, route.path)
                    return JSONResponse({"error": f"internal error: {type(exc).__name__}: {exc}"}, 500)

            self.routes.append(Route(route.path, endpoint, methods=[route.method]))
            if "{" not in route.path:
                self._exact[(route.method, route.path)] = endpoint
            return fn

        return deco

    def app(self) -> Routes:
        """The ASGI application of the routes served so far."""
        return Routes(self.routes, dict(self._exact))


class Routes:
    """The API's routes as an ASGI application. A request for a route without path parameters (every
    route the plugin calls at each tool call) goes straight to its endpoint, found by method and path
    in a dict: Starlette's router would try each route's pattern in turn (~40 per request) and wrap
    it in two middlewares whose work the endpoint does itself (every exception becomes an answer
    there). Every other request (a path with parameters, HEAD, an unknown path or method) is
    Starlette's."""

    def __init__(self, routes: list[Route], exact: dict[tuple[str, str], Handler]) -> None:
        self.routes = routes
        self._exact = exact
        self._starlette = Starlette(routes=routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            endpoint = self._exact.get((scope["method"], scope["path"]))
            if endpoint is not None:
                response = await endpoint(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await self._starlette(scope, receive, send)


def answer(record: Record, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A record as the answer."""
    return JSONResponse(record.to_dict(), status, headers)


async def read_body(request: Request) -> bytes:
    """The request body, refused with a 413 as soon as it is larger than the router's limit: at once
    when its Content-Length says so, else once that many bytes have come (nothing more is read)."""
    limit = request.scope.get(_BODY_LIMIT)
    if limit is None:
        return await request.body()
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, too_large(limit, int(declared)))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, too_large(limit))
        chunks.append(chunk)
    return b"".join(chunks)


async def body(request: Request) -> dict[str, Any]:
    """The request's JSON object (strictjson: no NaN, no Infinity, at most MAX_DEPTH levels)."""
    raw = await read_body(request)
    if not raw:
        return {}
    try:
        data = strictjson.loads(raw)
    except strictjson.NotJSON as exc:
        raise ApiError(400, f"request body is not JSON: {exc}") from exc
    except strictjson.Rejected as exc:
        raise ApiError(400, f"request body refused: {exc}") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    return data


def opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ApiError(400, f"{key!r} must be a string")


def opt_id(data: dict[str, Any], key: str) -> str | None:
    """`data[key]` as an id (a session's, a call's): a string whose lone surrogates are written as
    their `\\uXXXX` escapes, so that it can name the thing in a URL, in git and in the journal."""
    value = opt_str(data, key)
    return None if value is None else strictjson.escaped(value)


def opt_obj(data: dict[str, Any], key: str, where: str = "") -> dict[str, Any] | None:
    """`data[key]` when it is an object, None when absent or null; else a 400 naming the field."""
    value = data.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise ApiError(400, f"{where + key!r} must be an object")


def opt_int(data: dict[str, Any], key: str, default: int, minimum: int = 0, maximum: int = 10**9) -> int:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ApiError(400, f"{key!r} must be an integer from {minimum} to {maximum}")
    return value


def query(request: Request, route: ContractRoute[Any]) -> dict[str, Any]:
    """The route's declared query parameters (protocol.routes.Param), each as its kind, or its default
    when absent; a 400 naming a parameter that does not parse or is required and missing."""
    return {p.name: _param(request, p) for p in route.query}


def _param(request: Request, param: Param) -> Any:
    raw = request.query_params.get(param.name)
    if raw is None:
        if param.required:
            raise ApiError(400, f"query parameter {param.name!r} is required: {param.doc}")
        return param.default
    if param.kind is bool:
        return raw.lower() in ("1", "true", "yes")
    if param.kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise ApiError(400, f"query parameter {param.name!r} must be an integer") from None
        return value if param.maximum is None else max(0, min(value, param.maximum))
    if param.kind is float:
        try:
            return float(raw)
        except ValueError:
            raise ApiError(400, f"query parameter {param.name!r} must be a number") from None
    return raw


def sse(data: dict[str, Any]) -> bytes:
    """One Server-Sent Events message whose id is the event's sequence number."""
    return f"id: {data.get('seq', '')}\ndata: {strictjson.dumps(data)}\n\n".encode()
