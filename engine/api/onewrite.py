"""uvicorn's HTTP protocol (httptools) with what one step of the event loop writes on a connection
sent in one `send`: an answer's headers and its body leave together.

uvicorn writes a response's status line and headers as soon as the application starts the response,
then its body as a second write: two system calls per answer, each pushing a segment through the
loopback (the receiver's side of TCP is processed in the sender's system call), and, with Nagle's
algorithm on (the engine's listening socket does not set TCP_NODELAY), a body held back until the
client acknowledges the headers. Joined, an answer costs one of each.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class _Joined:
    """A transport whose writes made during one step of the event loop go out as one, at the end of
    that step (before anything else is read or written on the connection); closing sends what is
    pending first. Everything else is the real transport's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(d) for d in self._pending)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol over a `_Joined` transport (`uvicorn.Config(http=...)`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Joined(transport, self.loop))  # type: ignore[arg-type]
