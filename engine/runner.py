"""Runs one hook script: argv = stage, one JSON document on stdin, JSONL on stdout.

The hook runs in its own process group so that a timeout kills everything it started, not just the
direct child; what it started in a new session (`setsid`, a daemon) is found by the tag every
process of a run inherits in its environment (`EVOLVE_RUN`) and killed with the group. stdout is bounded (a run that prints more fails cleanly), stderr is bounded and kept
with the run. Every failure gets a precise reason: a spawn error, a timeout, too much output, a
non-zero exit, a signal, or a stdout line that is not a JSON object.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from . import strictjson
from .protocol.records import HookRun

if TYPE_CHECKING:
    from .warmstart import WarmStarts

STDERR_LIMIT = 256 * 1024
# How long to keep reading a hook's pipes after it exited, when something it started still holds them.
PIPE_GRACE_S = 0.5
# Between SIGTERM to the group and SIGKILL, for hooks that clean up on SIGTERM.
KILL_GRACE_S = 1.0


RUN_TAG = "EVOLVE_RUN"
"""The environment variable that tags every process of one run (`<engine pid>-<n>`)."""
_run_numbers = itertools.count(1)


class _OutputTooLarge(Exception):
    pass


class Process(Protocol):
    """A started process as supervised here: an `asyncio.subprocess.Process`, or a hook forked
    warm (engine.warmstart.WarmProcess)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...
    @property
    def stdout(self) -> asyncio.StreamReader | None: ...
    @property
    def stderr(self) -> asyncio.StreamReader | None: ...
    async def wait(self) -> int | None: ...


def _preview(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def parse_jsonl(stdout: bytes) -> tuple[list[str], list[Any], dict[str, Any], str | None]:
    """Split stdout into lines and fold them into one result (docs/hooks.md, "What a hook prints").

    Returns (lines, logs, result, error). A line whose `log` is truthy goes to `logs` and is dropped
    from the result, as in the original host; other object lines are merged with later keys winning.
    A line that is not UTF-8, not JSON (`NaN`, `Infinity` and numbers too large for a float are not),
    nested deeper than `strictjson.MAX_DEPTH`, or not an object makes `error` name it.
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
            value = strictjson.loads(decoded)
        except strictjson.NotJSON:
            error = f"stdout line {number} is not JSON: {_preview(decoded)}"
            continue
        except strictjson.Rejected as exc:  # NaN, a number too large, nested too deeply
            error = f"stdout line {number}: {exc}: {_preview(decoded)}"
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


async def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None,
    stdin: bytes | None,
    timeout_ms: int,
    stdout_limit: int,
    stdout_fail_over: bool = True,
    stderr_limit: int = STDERR_LIMIT,
    warm: WarmStarts | None = None,
) -> Finished:
    """Run `argv` in its own process group with bounded output and a timeout that kills the group.

    A process is judged by its own exit: when it exits but something it started still holds its
    pipes, those are given a moment and then killed, without turning the run into a timeout.
    With `warm`, a Python hook (`argv` = its path and the stage) is forked from a ready interpreter
    when one is (engine.warmstart); otherwise, and whenever that fails, it starts as always.
    """
    done = Finished()
    tag = f"{os.getpid()}-{next(_run_numbers)}"
    proc: Process | None = None
    if warm is not None and stdin is not None:
        # The ready interpreter is the one for the run's environment without its tag; the tag is
        # set in the forked hook, so that what it starts carries it.
        warm_proc = await warm.spawn(argv, cwd=str(cwd), env=env, stdin=stdin, extra_env={RUN_TAG: tag})
        if warm_proc is not None:
            proc, stdin = warm_proc, warm_proc.unsent_stdin  # the rest is already in its pipe
    if proc is None:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(cwd),
                env={**(os.environ if env is None else env), RUN_TAG: tag},
                # Its own process group (so a timeout kills everything it started), but not its own
                # session: a new session costs up to milliseconds per start where the kernel gives
                # each session its own scheduling group.
                process_group=0,
            )
        except OSError as exc:
            done.spawn_error = exc
            return done

    try:
        await _supervise(proc, done, stdin, timeout_ms, stdout_limit, stdout_fail_over, stderr_limit, tag)
    except asyncio.CancelledError:
        # The caller gave up (the engine is stopping): the process group must not outlive it.
        await asyncio.shield(terminate_group(proc, tag))
        raise
    finally:
        close = getattr(proc, "close", None)  # a warm process's pipes are the engine's to close
        if close is not None:
            close()
    lost = getattr(proc, "lost", None)
    if lost and done.failure is None:
        done.failure = lost
    return done


async def _supervise(
    proc: Process,
    done: Finished,
    stdin: bytes | None,
    timeout_ms: int,
    stdout_limit: int,
    stdout_fail_over: bool,
    stderr_limit: int,
    tag: str,
) -> Finished:
    assert proc.stdout and proc.stderr

    async def feed() -> None:
        if proc.stdin is None or stdin is None:
            return
        try:
            proc.stdin.write(stdin)
            await proc.stdin.drain()
            proc.stdin.close()
            await proc.stdin.wait_closed()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process exited without reading its input: not an error (EPIPE is success)

    out = _Capture(stdout_limit, fail_over=stdout_fail_over)
    err = _Capture(stderr_limit, fail_over=False)
    out_task = asyncio.ensure_future(out.read(proc.stdout))
    err_task = asyncio.ensure_future(err.read(proc.stderr))
    # A warm run's input is usually in its pipe before it starts: then there is nothing to feed.
    feed_task = asyncio.ensure_future(feed()) if proc.stdin is not None and stdin is not None else None
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
        if out_task in finished and isinstance(out_task.exception(), _OutputTooLarge):
            failure = f"stdout exceeded {stdout_limit} bytes (process group killed)"
        elif not finished:
            failure = f"timeout after {timeout_ms} ms (process group killed)"
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
        await terminate_group(proc, tag)
    tasks = [t for t in (out_task, err_task, feed_task, wait_task) if t is not None]
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if killed:
        # Read what is left to EOF (the group is dead now), so the pipes close here, not in the GC.
        await asyncio.wait(
            {asyncio.ensure_future(_drain(proc.stdout)), asyncio.ensure_future(_drain(proc.stderr))},
            timeout=PIPE_GRACE_S,
        )
    done.stdout, done.stdout_truncated = bytes(out.data), out.cut
    done.stderr, done.stderr_truncated = bytes(err.data), err.cut
    done.returncode = proc.returncode
    done.failure = failure
    done.timed_out = timed_out
    return done


async def execute(
    run: HookRun,
    path: Path,
    *,
    cwd: Path,
    timeout_ms: int,
    stdout_limit: int,
    env: Mapping[str, str] | None = None,
    warm: WarmStarts | None = None,
) -> HookRun:
    """Run the hook at `path` for `run.stage` with `run.input` on stdin; fill in and return `run`
    (forked from a ready interpreter if `warm` has one for it, see run_process)."""
    started = time.perf_counter()
    stdin_data = b"" if run.input is None else strictjson.dumps(run.input).encode()
    done = await run_process(
        [str(path), run.stage],
        cwd=cwd,
        env=env,
        stdin=stdin_data,
        timeout_ms=timeout_ms,
        stdout_limit=stdout_limit,
        warm=warm,
    )
    if done.spawn_error is not None:
        exc = done.spawn_error
        hint = " (does the script start with a #! line?)" if exc.errno == 8 else ""
        run.error = f"cannot start hooks/{run.hook}: {exc.strerror or exc}{hint}"
        run.duration_ms = (time.perf_counter() - started) * 1000
        return run
    run.stderr = done.stderr.decode("utf-8", errors="replace")
    run.stderr_truncated = done.stderr_truncated
    run.stdout_lines, run.logs, result, parse_error = parse_jsonl(done.stdout)
    run.signal = done.signal
    if run.signal is None:
        run.exit_code = done.returncode
    failure = done.failure
    if failure is None:
        if run.signal:
            failure = f"exit {run.signal}"
        elif done.returncode:
            failure = f"exit {done.returncode}"
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


async def _exited(proc: Process) -> int | None:
    exited = getattr(proc, "exited", None)  # a warm process's: done when its exit status is known
    if exited is not None:
        await asyncio.shield(exited)
        return proc.returncode
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not waiter.done():  # a lost warm process has none
            await asyncio.wait({waiter}, timeout=0.02)
        return proc.returncode
    finally:
        waiter.cancel()


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


async def terminate_group(proc: Process, tag: str | None = None) -> None:
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
