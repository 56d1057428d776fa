"""A run's output as the engine keeps it: each pipe bounded (stdout past its limit fails the run,
stderr past its limit is cut), read from streams for a cold run, handed over by callbacks for a warm
one."""

from __future__ import annotations

import asyncio


class OutputTooLarge(Exception):
    """stdout went past its limit, with fail_over."""

    pass


class Capture:
    """Bytes read from one pipe, at most `limit` of them; what was read survives a cancelled reader."""

    def __init__(self, limit: int, fail_over: bool) -> None:
        self.limit = limit
        self.fail_over = fail_over
        self.data = bytearray()
        self.cut = False

    def add(self, chunk: bytes) -> bool:
        """Keep `chunk`, or what fits of it; False when it does not fit and `fail_over` is set
        (then nothing of it is kept)."""
        room = self.limit - len(self.data)
        if len(chunk) <= room:
            self.data += chunk
        elif self.fail_over:
            return False
        else:
            self.data += chunk[:room]
            self.cut = True
        return True

    async def read(self, stream: asyncio.StreamReader) -> None:
        """Read to EOF. Past the limit: raise with `fail_over`, else drain and drop the rest so the
        writer never blocks on a full pipe."""
        while chunk := await stream.read(65536):
            if not self.add(chunk):
                raise OutputTooLarge


class Outputs:
    """A warm run's stdout and stderr as its pipes deliver them (an engine.warm.process.OutputSink),
    each bounded as a Capture, with a way for the supervisor to sleep until something happens."""

    def __init__(self, stdout_limit: int, fail_over: bool, stderr_limit: int) -> None:
        self.out = Capture(stdout_limit, fail_over=fail_over)
        self.err = Capture(stderr_limit, fail_over=False)
        self.too_large = False  # stdout went past its limit with fail_over
        self.open = 2  # pipes not at their end yet
        self._waiter: asyncio.Future[None] | None = None

    def received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            if not self.too_large and not self.out.add(data):
                self.too_large = True
                self.wake()
        else:
            self.err.add(data)

    def closed(self, fd: int) -> None:
        self.open -= 1
        self.wake()

    def wake(self, *_: object) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def sleep(self, seconds: float) -> None:
        """Until wake() or `seconds` have passed."""
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        timer = loop.call_later(seconds, self.wake)
        try:
            await self._waiter
        finally:
            timer.cancel()
            self._waiter = None
