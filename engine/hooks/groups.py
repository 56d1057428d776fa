"""Ending a run's processes: its process group, and what left the group (a new session, a daemon)
found by the tag every process of a run inherits in its environment (`EVOLVE_RUN`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Protocol

# Between SIGTERM to the group and SIGKILL, for hooks that clean up on SIGTERM.
KILL_GRACE_S = 1.0

RUN_TAG = "EVOLVE_RUN"
"""The environment variable that tags every process of one run (`<engine pid>-<n>`)."""


class Started(Protocol):
    """A started process, as ended here: an `asyncio.subprocess.Process`, or a hook forked warm
    (engine.warm.process.WarmProcess)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...
    async def wait(self) -> int | None: ...


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def tagged(tag: str) -> list[int]:
    """The processes (of this user) whose environment carries `EVOLVE_RUN=<tag>`: everything a run
    started, also in another process group or session, unless it cleared its environment."""
    needle = f"\0{RUN_TAG}={tag}\0".encode()
    found: list[int] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as fh:
                    environ = fh.read()
            except OSError:
                continue
            if needle in b"\0" + environ:
                found.append(int(entry.name))
    return found


def _kill_tagged(tag: str | None, sig: int) -> None:
    if tag is None:
        return
    for pid in tagged(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


async def terminate_group(proc: Started, tag: str | None = None) -> None:
    """SIGTERM the whole process group (and the processes tagged `tag` that left it), then SIGKILL
    them after a grace period."""
    _kill_group(proc.pid, signal.SIGTERM)
    await asyncio.to_thread(_kill_tagged, tag, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    # Grandchildren may ignore SIGTERM or outlive the leader: always finish the group off.
    _kill_group(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(_kill_tagged, tag, signal.SIGKILL)
    await proc.wait()
