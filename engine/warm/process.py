"""A hook run forked warm, as the engine holds it: `WarmProcess`, its pipes, and where its output goes.

The server that forked the run reports on it (`report_started`, `report_exit`, ...): the process
itself is not the engine's child, so its exit status comes from the server that reaps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Protocol


class Pipe:
    """One end of a pipe as asyncio's pipe transports take it (fileno, close): no file object."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


class OutputSink(Protocol):
    """Where a warm run's output goes as it arrives (engine.hooks.runner keeps it, bounded)."""

    def received(self, fd: int, data: bytes) -> None:
        """`data` read from the hook's stdout (fd 1) or stderr (fd 2)."""

    def closed(self, fd: int) -> None:
        """The hook's stdout or stderr reached its end (or the engine closed its end)."""


class _OutputPipe:
    """The engine's end of a hook's stdout or stderr, read by a callback of the event loop and
    handed to an OutputSink: none of the transport, protocol, stream reader and reading task per
    pipe that `loop.connect_read_pipe` and a StreamReader would take for every run (a few loop
    iterations and a dozen callbacks). The sink takes in what arrives at once (keeps it or drops
    it), so there is nothing to pause."""

    __slots__ = ("_loop", "_number", "_pipe", "_sink")
    MAX_READ = 256 * 1024  # as asyncio's pipe transport

    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: Pipe, number: int, sink: OutputSink) -> None:
        self._loop = loop
        self._pipe = pipe
        self._number = number
        self._sink = sink
        os.set_blocking(pipe.fd, False)
        loop.add_reader(pipe.fd, self._ready)

    def _ready(self) -> None:
        try:
            data = os.read(self._pipe.fd, self.MAX_READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""  # the pipe failed: its output ends here
        if data:
            self._sink.received(self._number, data)
        else:
            self.close()

    def close(self) -> None:
        """Stop reading and close the pipe; the sink learns that it ended (once)."""
        if self._pipe.closed:
            return
        self._loop.remove_reader(self._pipe.fd)
        self._pipe.close()
        self._sink.closed(self._number)


def describe(status: int) -> str:
    """A wait status in words."""
    code = os.waitstatus_to_exitcode(status)
    return f"exit {code}" if code >= 0 else f"killed by signal {-code}"


class WarmProcess:
    """A hook process forked by a server: `pid`, `returncode`, `stdin` and `wait()` as an
    `asyncio.subprocess.Process` has them, with the exit status reported by the server that reaps
    it (`exited` is done then); its stdout and stderr go to the OutputSink it was started with."""

    def __init__(self, run: bytes) -> None:
        self.run = run  # the server's name for it
        self.pid = 0
        self.returncode: int | None = None
        self.cpu_ms: float | None = None  # of the hook process, as its server reaped it
        self.lost: str | None = None  # why the exit status is unknown
        self.unsent_stdin = b""  # what did not fit into the stdin pipe before the child started
        self.stdin: asyncio.StreamWriter | None = None
        self._pipes: list[_OutputPipe] = []
        self._transport: asyncio.BaseTransport | None = None  # of stdin, when not all of it fitted
        loop = asyncio.get_running_loop()
        self.started: asyncio.Future[str | None] = loop.create_future()  # None, or why it did not start
        self.exited: asyncio.Future[None] = loop.create_future()

    async def connect(self, data: bytes, stdin: Pipe, stdout: Pipe, stderr: Pipe, output: OutputSink) -> None:
        """Take the engine's ends of the run's pipes before the child starts: as much of `data` as
        the stdin pipe holds goes in now (so the hook need not wait for it; the rest is kept in
        `unsent_stdin` and `stdin` writes it), stdout and stderr go to `output` as they arrive."""
        loop = asyncio.get_running_loop()
        os.set_blocking(stdin.fileno(), False)
        try:
            written = os.write(stdin.fileno(), data) if data else 0
        except BlockingIOError:
            written = 0
        self.unsent_stdin = data[written:]
        if not self.unsent_stdin:
            stdin.close()  # all of it is in the pipe: the hook reads it to the end
        self._pipes = [_OutputPipe(loop, stdout, 1, output), _OutputPipe(loop, stderr, 2, output)]
        if stdin.closed:
            return
        # A StreamReaderProtocol also for the writer: it gives StreamWriter.wait_closed its waiter.
        unused = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(unused, loop=loop)
        writing, _ = await loop.connect_write_pipe(lambda: protocol, stdin)
        self._transport = writing
        self.stdin = asyncio.StreamWriter(writing, protocol, unused, loop)

    async def wait(self) -> int | None:
        await asyncio.shield(self.exited)
        return self.returncode

    def close(self) -> None:
        """Close the engine's ends of the pipes (after the run)."""
        for pipe in self._pipes:
            pipe.close()
        if self._transport is not None:
            self._transport.close()

    # ---- what the server reports ------------------------------------------------------------------

    def report_started(self, pid: int) -> None:
        """The child runs as `pid`, about to run the hook's code."""
        self.pid = pid
        if not self.started.done():
            self.started.set_result(None)

    def report_not_started(self, why: str) -> None:
        """No code of the hook ran, and none will (the run goes cold)."""
        if not self.started.done():
            self.started.set_result(why)
        self._end()

    def report_exit(self, status: int, cpu_us: int) -> None:
        """The server reaped the child with this wait status and CPU time."""
        if not self.started.done():  # it died before the hook's code could run
            self.report_not_started(f"the forked child exited during set-up ({describe(status)})")
            return
        self.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_ms = cpu_us / 1000
        self._end()

    def report_lost(self, why: str) -> None:
        """The server is gone: a run not started goes cold, a started one is ended and marked lost."""
        if not self.started.done():
            self.report_not_started(why)
            return
        # Running, but nobody can tell its exit status any more: end it rather than let it run
        # unsupervised, and say so.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.lost = f"{why}; the hook's process group was killed"
        self._end()

    def _end(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
