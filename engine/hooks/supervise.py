"""Supervising a started run to its end by the same rules, cold or warm: its input fed, its output
bounded, its timeout (which kills the process group), and a moment's grace for what it started and
still holds its pipes after it exited."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.hooks.capture import Capture, Outputs, OutputTooLarge
from engine.hooks.groups import terminate_group

if TYPE_CHECKING:
    from engine.warm.process import WarmProcess

# How long to keep reading a hook's pipes after it exited, when something it started still holds them.
PIPE_GRACE_S = 0.5


@dataclass
class Finished:
    """How a process run ended. `failure` is set for what is not an exit status: a spawn error, a
    timeout, too much output."""

    stdout: bytes = b""
    stderr: bytes = b""
    stderr_truncated: bool = False
    stdout_truncated: bool = False
    returncode: int | None = None
    failure: str | None = None
    timed_out: bool = False  # the failure is the timeout
    spawn_error: OSError | None = None

    @property
    def signal(self) -> str | None:
        code = self.returncode
        if code is None or code >= 0:
            return None
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"


async def feed(writer: asyncio.StreamWriter | None, data: bytes | None) -> None:
    """Write a process's input and close its stdin."""
    if writer is None or data is None:
        return
    try:
        writer.write(data)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the process exited without reading its input: not an error (EPIPE is success)


async def supervise(
    proc: asyncio.subprocess.Process,
    done: Finished,
    stdin: bytes | None,
    timeout_ms: int,
    stdout_limit: int,
    stdout_fail_over: bool,
    stderr_limit: int,
    tag: str,
    since: int | None = None,
) -> Finished:
    assert proc.stdout and proc.stderr
    out = Capture(stdout_limit, fail_over=stdout_fail_over)
    err = Capture(stderr_limit, fail_over=False)
    out_task = asyncio.ensure_future(out.read(proc.stdout))
    err_task = asyncio.ensure_future(err.read(proc.stderr))
    feed_task = asyncio.ensure_future(feed(proc.stdin, stdin))
    # proc.wait() also waits for the pipes to close, so it never returns while something the process
    # started holds stdout; the return code itself is set as soon as the process exits.
    wait_task = asyncio.ensure_future(_exited(proc))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    failure: str | None = None
    timed_out = False
    pending = {wait_task, out_task}
    while pending and failure is None:
        finished, pending = await asyncio.wait(
            pending, timeout=max(deadline - loop.time(), 0), return_when=asyncio.FIRST_COMPLETED
        )
        if out_task in finished and isinstance(out_task.exception(), OutputTooLarge):
            failure = _too_large(stdout_limit)
        elif not finished:
            failure = _timeout(timeout_ms)
            timed_out = True
        elif wait_task.done() and pending:
            # It exited; give whatever it started a moment to release stdout, then stop.
            deadline = min(deadline, loop.time() + PIPE_GRACE_S)
    if timed_out and wait_task.done():
        failure, timed_out = None, False  # only leftovers of a finished process held the pipe
    if failure is None and not err_task.done():
        await asyncio.wait({err_task}, timeout=min(PIPE_GRACE_S, max(deadline - loop.time(), 0)))
    killed = failure is not None or not (out_task.done() and err_task.done())
    if killed:
        await terminate_group(proc, tag, since)
    for task in (out_task, err_task, feed_task, wait_task):
        if not task.done():
            task.cancel()
    await asyncio.gather(out_task, err_task, feed_task, wait_task, return_exceptions=True)
    if killed:
        # Read what is left to EOF (the group is dead now), so the pipes close here, not in the GC.
        await asyncio.wait(
            {asyncio.ensure_future(_drain(proc.stdout)), asyncio.ensure_future(_drain(proc.stderr))},
            timeout=PIPE_GRACE_S,
        )
    return _ended(done, out, err, proc.returncode, failure, timed_out)


async def supervise_warm(
    proc: WarmProcess,
    outputs: Outputs,
    done: Finished,
    timeout_ms: int,
    stdout_limit: int,
    tag: str,
    since: int | None = None,
) -> Finished:
    """supervise for a hook forked warm, the same rules, driven by callbacks: its pipes hand their
    output to `outputs` and its server reports its exit, and this sleeps until one of them has
    news (no task per pipe, for the exit or for the input, unless the input did not fit its pipe)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    feed_task = asyncio.ensure_future(feed(proc.stdin, proc.unsent_stdin)) if proc.stdin else None
    proc.exited.add_done_callback(outputs.wake)
    failure: str | None = None
    timed_out = False
    grace_from: float | None = None
    while True:
        if outputs.too_large:
            failure = _too_large(stdout_limit)
            break
        if proc.exited.done():
            if not outputs.open:
                break
            if grace_from is None:
                # It exited; give whatever it started a moment to release its pipes, then stop.
                grace_from = loop.time()
                deadline = min(deadline, grace_from + PIPE_GRACE_S)
        remaining = deadline - loop.time()
        if remaining <= 0:
            if not proc.exited.done():
                failure, timed_out = _timeout(timeout_ms), True
            break  # else only leftovers of a finished process hold a pipe
        await outputs.sleep(remaining)
    killed = failure is not None or outputs.open > 0
    if killed:
        await terminate_group(proc, tag, since)
        # What is left is read to EOF (the group is dead now), so the pipes close here.
        grace_end = loop.time() + PIPE_GRACE_S
        while outputs.open and loop.time() < grace_end:
            await outputs.sleep(grace_end - loop.time())
    if feed_task is not None:
        feed_task.cancel()
        await asyncio.gather(feed_task, return_exceptions=True)
    return _ended(done, outputs.out, outputs.err, proc.returncode, failure, timed_out)


def _ended(
    done: Finished, out: Capture, err: Capture, returncode: int | None, failure: str | None, timed_out: bool
) -> Finished:
    """`done` filled in with what a supervised run captured and how it ended."""
    done.stdout, done.stdout_truncated = bytes(out.data), out.cut
    done.stderr, done.stderr_truncated = bytes(err.data), err.cut
    done.returncode = returncode
    done.failure = failure
    done.timed_out = timed_out
    return done


def _too_large(limit: int) -> str:
    return f"stdout exceeded {limit} bytes (process group killed)"


def _timeout(timeout_ms: int) -> str:
    return f"timeout after {timeout_ms} ms (process group killed)"


async def _drain(stream: asyncio.StreamReader) -> None:
    with contextlib.suppress(Exception):
        while await stream.read(65536):
            pass


async def _exited(proc: asyncio.subprocess.Process) -> int | None:
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not waiter.done():
            await asyncio.wait({waiter}, timeout=0.02)
        return proc.returncode
    finally:
        waiter.cancel()
