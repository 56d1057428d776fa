"""The workspace write lock: one change at a time, across tasks and across processes.

An engine, a command line call and a test script may change the same workspace at once; each
read-modify-write-commit happens under this lock, so no write is lost and git never sees a half-done
change of another process. The cross-process part is `flock` on `state/write.lock`.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path
from types import TracebackType


class WorkspaceLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = asyncio.Lock()
        self._fd: int | None = None

    def locked(self) -> bool:
        return self._local.locked()

    def _acquire_file(self) -> int:
        self.path.parent.mkdir(exist_ok=True)  # not its parents: a deleted workspace stays deleted
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    async def __aenter__(self) -> WorkspaceLock:
        await self._local.acquire()
        try:
            fd = None
            try:
                # Uncontended (the usual case) costs no thread hop.
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
            except BlockingIOError:
                if fd is not None:
                    os.close(fd)
                self._fd = await asyncio.to_thread(self._acquire_file)
            except FileNotFoundError:
                self._fd = await asyncio.to_thread(self._acquire_file)
        except BaseException:
            self._local.release()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        fd, self._fd = self._fd, None
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        finally:
            self._local.release()
