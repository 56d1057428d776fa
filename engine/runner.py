"""Runs one hook script: argv = stage, one JSON document on stdin, JSONL on stdout.

The hook runs in its own process group so that a timeout kills everything it started, not just the
direct child. stdout is bounded (a run that prints more fails cleanly), stderr is bounded and kept
with the run. Every failure gets a precise reason: a spawn error, a timeout, too much output, a
non-zero exit, a signal, or a stdout line that is not a JSON object.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .records import HookRun

STDERR_LIMIT = 256 * 1024
# How long to keep reading a hook's pipes after it exited, when something it started still holds them.
PIPE_GRACE_S = 0.5
# Between SIGTERM to the group and SIGKILL, for hooks that clean up on SIGTERM.
KILL_GRACE_S = 1.0


class _OutputTooLarge(Exception):
    pass


def _preview(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def parse_jsonl(stdout: bytes) -> tuple[list[str], list[Any], dict[str, Any], str | None]:
    """Split stdout into lines and fold them into one result (§51-§56 with SPEC A.10).

    Returns (lines, logs, result, error). A line whose `log` is truthy goes to `logs` and is dropped
    from the result, as in the original host; other object lines are merged with later keys winning.
    A line that is not UTF-8, not JSON, or not an object makes `error` name it.
    """
    lines: list[str] = []
    logs: list[Any] = []
    result: dict[str, Any] = {}
    error: str | None = None
    for number, raw in enumerate(stdout.split(b"\n"), start=1):
        text = raw.decode("utf-8", errors="replace")
        if raw.strip():
            lines.append(text)
        if error is not None or not raw.strip():
            continue
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            error = f"stdout line {number} is not valid UTF-8: {_preview(text)}"
            continue
        try:
            value = json.loads(decoded)
        except ValueError:
            error = f"stdout line {number} is not JSON: {_preview(decoded)}"
            continue
        if not isinstance(value, dict):
            error = f"stdout line {number} is not a JSON object: {_preview(decoded)}"
            continue
        if value.get("log"):
            logs.append(value["log"])
            continue
        result.update(value)
    return lines, logs, result, error


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _Capture:
    """Bytes read from one pipe, at most `limit` of them; what was read survives a cancelled reader."""

    def __init__(self, limit: int, fail_over: bool) -> None:
        self.limit = limit
        self.fail_over = fail_over
        self.data = bytearray()
        self.cut = False

    async def read(self, stream: asyncio.StreamReader) -> None:
        """Read to EOF. Past the limit: raise with `fail_over`, else drain and drop the rest so the
        writer never blocks on a full pipe."""
        while chunk := await stream.read(65536):
            room = self.limit - len(self.data)
            if len(chunk) > room:
                if self.fail_over:
                    raise _OutputTooLarge
                self.data += chunk[:room]
                self.cut = True
            else:
                self.data += chunk


async def execute(
    run: HookRun,
    path: Path,
    *,
    cwd: Path,
    timeout_ms: int,
    stdout_limit: int,
    env: Mapping[str, str] | None = None,
) -> HookRun:
    """Run the hook at `path` for `run.stage` with `run.input` on stdin; fill in and return `run`."""
    started = time.perf_counter()
    stdin_data = b"" if run.input is None else json.dumps(run.input, ensure_ascii=False).encode()
    try:
        proc = await asyncio.create_subprocess_exec(
            str(path),
            run.stage,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except OSError as exc:
        hint = " (does the script start with a #! line?)" if exc.errno == 8 else ""
        run.error = f"cannot start hooks/{run.hook}: {exc.strerror or exc}{hint}"
        run.duration_ms = (time.perf_counter() - started) * 1000
        return run

    assert proc.stdin and proc.stdout and proc.stderr

    async def feed() -> None:
        assert proc.stdin
        try:
            proc.stdin.write(stdin_data)
            await proc.stdin.drain()
            proc.stdin.close()
            await proc.stdin.wait_closed()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the hook exited without reading its input: not an error (HCP: EPIPE is success)

    out = _Capture(stdout_limit, fail_over=True)
    err = _Capture(STDERR_LIMIT, fail_over=False)
    out_task = asyncio.ensure_future(out.read(proc.stdout))
    err_task = asyncio.ensure_future(err.read(proc.stderr))
    feed_task = asyncio.ensure_future(feed())
    # proc.wait() also waits for the pipes to close, so it never returns while something the hook
    # started holds stdout; the return code itself is set as soon as the hook exits.
    wait_task = asyncio.ensure_future(_exited(proc))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    failure: str | None = None
    pending = {wait_task, out_task}
    while pending and failure is None:
        done, pending = await asyncio.wait(
            pending, timeout=max(deadline - loop.time(), 0), return_when=asyncio.FIRST_COMPLETED
        )
        if out_task in done and isinstance(out_task.exception(), _OutputTooLarge):
            failure = f"stdout exceeded {stdout_limit} bytes (process group killed)"
        elif not done:
            failure = f"timeout after {timeout_ms} ms (process group killed)"
        elif wait_task.done() and pending:
            # The hook exited; give whatever it started a moment to release stdout, then stop.
            deadline = min(deadline, loop.time() + PIPE_GRACE_S)
    if failure is not None and failure.startswith("timeout") and wait_task.done():
        failure = None  # only leftovers of a finished hook held the pipe; judge the hook by its exit
    if failure is None and not err_task.done():
        await asyncio.wait({err_task}, timeout=min(PIPE_GRACE_S, max(deadline - loop.time(), 0)))
    killed = failure is not None or not (out_task.done() and err_task.done())
    if killed:
        await terminate_group(proc)
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

    stdout = bytes(out.data)
    run.stderr = err.data.decode("utf-8", errors="replace")
    run.stderr_truncated = err.cut
    run.stdout_lines, run.logs, result, parse_error = parse_jsonl(stdout)
    code = proc.returncode
    if code is not None and code < 0:
        try:
            run.signal = signal.Signals(-code).name
        except ValueError:
            run.signal = f"signal {-code}"
    else:
        run.exit_code = code
    if failure is None:
        if run.signal:
            failure = f"exit {run.signal}"
        elif code:
            failure = f"exit {code}"
        elif parse_error:
            failure = parse_error
    run.error = failure
    run.result = result if failure is None else None
    run.duration_ms = (time.perf_counter() - started) * 1000
    return run


async def _drain(stream: asyncio.StreamReader) -> None:
    with contextlib.suppress(Exception):
        while await stream.read(65536):
            pass


async def _exited(proc: asyncio.subprocess.Process) -> int:
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None:
            await asyncio.wait({waiter}, timeout=0.02)
        return proc.returncode
    finally:
        waiter.cancel()


async def terminate_group(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the whole process group, then SIGKILL it after a grace period."""
    _kill_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    # Grandchildren may ignore SIGTERM or outlive the leader: always finish the group off.
    _kill_group(proc.pid, signal.SIGKILL)
    await proc.wait()
