"""The processes of a behaviour check (the copies' engines, opencode, its imports): each started in a
process group of its own with its output in a log, ended with SIGTERM then SIGKILL, and quoted by its
log's tail when it fails."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable
from pathlib import Path

LOG_TAIL = 20  # lines of a log quoted in an error


class HarnessError(RuntimeError):
    """opencode or the copy's engine failed or hung; the message says which, with its log's tail."""


async def spawn(
    argv: list[str], cwd: Path, env: dict[str, str], log: Path, pids: set[int]
) -> asyncio.subprocess.Process:
    """`argv` in `cwd`, its output appended to `log`, its pid added to `pids` (for a kill)."""
    with open(log, "ab") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a stop ends it and whatever it started
        )
    pids.add(proc.pid)
    return proc


async def end(proc: asyncio.subprocess.Process | None, grace: float) -> None:
    """SIGTERM to `proc`'s group, SIGKILL after `grace` seconds."""
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)


def kill_groups(pids: set[int]) -> None:
    """SIGKILL each process group; idempotent and synchronous, for a check cancelled while stopping."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = LOG_TAIL) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    found = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"  | {line}" for line in found)


def ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


async def together(*steps: Awaitable[object]) -> None:
    """`steps` side by side. The first to fail cancels the others and is raised once they have ended:
    no step goes on starting a process after the check has begun to stop."""
    try:
        async with asyncio.TaskGroup() as group:
            for step in steps:
                group.create_task(step)  # type: ignore[arg-type]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
