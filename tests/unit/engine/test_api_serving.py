"""How the API serves a request: a route without path parameters found by method and path (the
others, HEAD and unknown paths left to Starlette, answered as before), and each answer written in
one write over a real uvicorn server on loopback."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, JSONResponse, Router
from engine.api.onewrite import OneWriteHttpTools, _Joined
from engine.protocol.routes import Route

PLAIN: Route[Any] = Route("POST", "/v1/test/plain", dict, doc="a route without parameters")
LISTED: Route[Any] = Route("GET", "/v1/test/things", dict, doc="a GET route without parameters")
ONE: Route[Any] = Route("GET", "/v1/test/things/{id}", dict, doc="a route with a parameter")


def _router() -> Router:
    router = Router()

    @router.serve(PLAIN)
    async def plain(request: Request) -> Response:
        data = await request.json()
        if data.get("fail"):
            raise ApiError(418, "asked to fail")
        if data.get("crash"):
            raise RuntimeError("boom")
        return JSONResponse({"got": data, "path_params": dict(request.path_params)})

    @router.serve(LISTED)
    async def listed(request: Request) -> Response:
        return JSONResponse({"things": [1, 2]})

    @router.serve(ONE)
    async def one(request: Request) -> Response:
        return JSONResponse({"id": request.path_params["id"]})

    return router


async def _call(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if given:
            return {"type": "http.disconnect"}
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], content


def test_routes_answer_as_starlette_would_with_or_without_parameters() -> None:
    app = _router().app()

    async def scenario() -> None:
        assert await _call(app, "POST", "/v1/test/plain", b'{"a":1}') == (
            200,
            b'{"got":{"a":1},"path_params":{}}',
        )
        assert await _call(app, "POST", "/v1/test/plain", b'{"fail":true}') == (
            418,
            b'{"error":"asked to fail"}',
        )
        status, content = await _call(app, "POST", "/v1/test/plain", b'{"crash":true}')
        assert (status, content) == (500, b'{"error":"internal error: RuntimeError: boom"}')
        assert await _call(app, "GET", "/v1/test/things") == (200, b'{"things":[1,2]}')
        # A parameter, HEAD of a GET route, a wrong method and an unknown path: Starlette's router.
        assert await _call(app, "GET", "/v1/test/things/x7") == (200, b'{"id":"x7"}')
        assert (await _call(app, "HEAD", "/v1/test/things"))[0] == 200
        assert (await _call(app, "GET", "/v1/test/plain"))[0] == 405
        assert (await _call(app, "GET", "/v1/test/nothing"))[0] == 404

    asyncio.run(scenario())
    assert [r.path for r in app.routes] == ["/v1/test/plain", "/v1/test/things", "/v1/test/things/{id}"]


class _Recording:
    """A transport that keeps what is written to it, in the calls it came in."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 9) if name == "peername" else default


def test_a_head_goes_out_with_the_body_at_once_and_alone_at_the_end_of_the_step() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"

    async def scenario() -> None:
        real = _Recording()
        joined = _Joined(real, asyncio.get_running_loop())  # type: ignore[arg-type]
        joined.write(head)
        assert real.writes == []  # held for its body
        joined.write(b"{}")
        assert real.writes == [head + b"{}"]  # at once, in one write
        await asyncio.sleep(0)
        assert real.writes == [head + b"{}"]  # nothing written twice
        # A stream's head, with no body yet: alone, at the end of the step; its events as they come.
        joined.write(head)
        await asyncio.sleep(0)
        assert real.writes[1:] == [head]
        joined.write(b"data: 1\n\n")
        assert real.writes[2:] == [b"data: 1\n\n"]
        assert joined.get_extra_info("peername") == ("127.0.0.1", 9)  # the rest is the transport's
        joined.write(head)
        joined.close()  # a held head goes first
        assert real.writes[3:] == [head] and real.closed
        await asyncio.sleep(0)
        assert len(real.writes) == 4

    asyncio.run(scenario())


def test_a_real_server_answers_every_request_of_a_kept_alive_connection_whole() -> None:
    app = _router().app()

    async def scenario() -> list[bytes]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, http=OneWriteHttpTools, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []
        for n in range(3):
            body = b'{"n":%d}' % n
            writer.write(
                b"POST /v1/test/plain HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(
                next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1]
            )
            answers.append(head.split(b"\r\n")[0] + b" " + await reader.readexactly(length))
        writer.close()
        server.should_exit = True
        await serving
        return answers

    assert asyncio.run(scenario()) == [
        b'HTTP/1.1 200 OK {"got":{"n":%d},"path_params":{}}' % n for n in range(3)
    ]
