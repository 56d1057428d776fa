"""The console's client on a connection lost as it is reused: a server that answers once, keeps the
connection, and closes it when the next request arrives without answering it (what a server does whose
keep-alive time ends as the request is on its way). A read is asked again on a new connection; a
command is not (it may have been done), and its failure says so."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from engine.protocol import API_VERSION, calls
from engine.protocol.records import ChangeList, Health
from evolve_console.client import EngineClient, EngineGone, Target, refusal

# A health check's answer; a listing of changes reads it as an empty one (unknown fields are ignored).
BODY = b'{"ok": true, "version": "1.0", "api": 1, "workspace": "/ws", "pid": 7, "seq": 3}'
# With the API version every engine's answer carries (without it, the client says that what answers
# is no evolve engine).
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-evolve-api: %d\r\nContent-Length: %d\r\n\r\n%s"
    % (
        API_VERSION,
        len(BODY),
        BODY,
    )
)


class ClosingServer:
    """Each connection: the first request answered and kept alive, the second dropped unanswered."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(h.split(b":")[1])
                        for h in head.split(b"\r\n")
                        if h.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.requests.append(head.split(b"\r\n")[0])
                if answered:
                    break
                writer.write(ANSWER)
                await writer.drain()
                answered += 1
        except asyncio.IncompleteReadError:
            pass
        writer.close()


def test_a_read_on_a_connection_closed_as_it_was_reused_is_asked_again() -> None:
    async def main() -> None:
        closing = ClosingServer()
        listening = await asyncio.start_server(closing.serve, "127.0.0.1", 0)
        port = listening.sockets[0].getsockname()[1]
        client = EngineClient(Target(f"http://127.0.0.1:{port}", "token"))
        try:
            assert await client.send(calls.health()) == Health(True, "1.0", 1, "/ws", 7, 3)
            assert await client.send(calls.changes()) == ChangeList()
            assert closing.connections == 2, "asked again on a new connection"
            assert closing.requests == [
                b"GET /v1/health HTTP/1.1",
                b"GET /v1/changes HTTP/1.1",
                b"GET /v1/changes HTTP/1.1",
            ]

            with pytest.raises(EngineGone, match="does not answer"):
                await client.send(calls.heartbeat_fire())
            assert closing.requests[-1] == b"POST /v1/heartbeat/fire HTTP/1.1"
            assert closing.requests.count(b"POST /v1/heartbeat/fire HTTP/1.1") == 1, "a command is sent once"
        finally:
            await client.aclose()
            listening.close()
            await listening.wait_closed()

    asyncio.run(main())


def test_a_refusal_is_said_plainly_a_wrong_token_another_version_or_no_engine_at_all() -> None:
    url = "https://server:8765"
    ours = httpx.Headers({"x-evolve-api": str(API_VERSION)})
    assert "refused the token" in str(refusal(url, 401, None, ours))
    older = httpx.Headers({"x-evolve-api": "1"})
    said = refusal(url, 409, None, older)
    assert said is not None and f"speaks evolve API 1, this console API {API_VERSION}" in said
    assert refusal(url, 404, {"error": "no such change"}, ours) is None, "the engine's own words stand"
    stranger = refusal(url, 200, None, httpx.Headers({"content-type": "text/html"}))
    assert stranger is not None and "is not an evolve engine" in stranger
