"""uvicorn's HTTP protocol (httptools) with an answer's status line and headers sent in one `send`
with the first part of its body.

uvicorn writes a response's status line and headers as soon as the application starts the response,
then its body as a second write: with TCP_NODELAY on (engine.service sets it), two system calls and
two segments per answer, each pushed through the loopback in the sender's system call (the
receiver's side of TCP included) and each waking the client. Joined, an answer costs one of each.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _Joined:
    """A transport that holds a head (a write that starts with the status line and ends with the
    blank line) until the next write, which it goes out with, at once; a head with no write after it
    in the same step of the event loop (a stream's, whose first event is not there yet) goes out
    alone at the end of that step. Closing sends a held head first. Everything else is the real
    transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is not None:
            data, self._held = self._held + bytes(data), None
        elif data[:5] == b"HTTP/" and data[-4:] == b"\r\n\r\n":
            self._held = bytes(data)
            self._loop.call_soon(self._flush)
            return
        if data:
            self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `_Joined` transport (`uvicorn.Config(http=...)`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Joined(transport, self.loop))  # type: ignore[arg-type]
