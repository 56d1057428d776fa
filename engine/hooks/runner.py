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
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.core import strictjson
from engine.protocol.records import HookRun

if TYPE_CHECKING:
    from engine.warm.starts import WarmProcess, WarmStarts

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
                raise _OutputTooLarge


class _Outputs:
    """A warm run's stdout and stderr as its pipes deliver them (an engine.warm.process.OutputSink),
    each bounded as a _Capture, with a way for the supervisor to sleep until something happens."""

    def __init__(self, stdout_limit: int, fail_over: bool, stderr_limit: int) -> None:
        self.out = _Capture(stdout_limit, fail_over=fail_over)
        self.err = _Capture(stderr_limit, fail_over=False)
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
    when one is (engine.warm.starts); otherwise, and whenever that fails, it starts as always.
    """
    done = Finished()
    tag = f"{os.getpid()}-{next(_run_numbers)}"
    if warm is not None and stdin is not None:
        # The ready interpreter is the one for the run's environment without its tag; the tag is
        # set in the forked hook, so that what it starts carries it.
        outputs = _Outputs(stdout_limit, stdout_fail_over, stderr_limit)
        warm_proc = await warm.spawn(
            argv, cwd=str(cwd), env=env, stdin=stdin, extra_env={RUN_TAG: tag}, output=outputs
        )
        if warm_proc is not None:
            try:
                await _unless_cancelled(
                    _supervise_warm(warm_proc, outputs, done, timeout_ms, stdout_limit, tag), warm_proc, tag
                )
            finally:
                warm_proc.close()  # the engine's ends of its pipes
            if warm_proc.lost and done.failure is None:
                done.failure = warm_proc.lost
            return done
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
    await _unless_cancelled(
        _supervise(proc, done, stdin, timeout_ms, stdout_limit, stdout_fail_over, stderr_limit, tag),
        proc,
        tag,
    )
    return done


async def _unless_cancelled(supervising: Awaitable[Finished], proc: Started, tag: str) -> None:
    """Await `supervising`; when the caller gives up (the engine is stopping), end the process
    group first: it must not outlive the run."""
    try:
        await supervising
    except asyncio.CancelledError:
        await asyncio.shield(terminate_group(proc, tag))
        raise


async def _feed(writer: asyncio.StreamWriter | None, data: bytes | None) -> None:
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


async def _supervise(
    proc: asyncio.subprocess.Process,
    done: Finished,
    stdin: bytes | None,
    timeout_ms: int,
    stdout_limit: int,
    stdout_fail_over: bool,
    stderr_limit: int,
    tag: str,
) -> Finished:
    assert proc.stdout and proc.stderr
    out = _Capture(stdout_limit, fail_over=stdout_fail_over)
    err = _Capture(stderr_limit, fail_over=False)
    out_task = asyncio.ensure_future(out.read(proc.stdout))
    err_task = asyncio.ensure_future(err.read(proc.stderr))
    feed_task = asyncio.ensure_future(_feed(proc.stdin, stdin))
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
        await terminate_group(proc, tag)
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


async def _supervise_warm(
    proc: WarmProcess, outputs: _Outputs, done: Finished, timeout_ms: int, stdout_limit: int, tag: str
) -> Finished:
    """_supervise for a hook forked warm, the same rules, driven by callbacks: its pipes hand their
    output to `outputs` and its server reports its exit, and this sleeps until one of them has
    news (no task per pipe, for the exit or for the input, unless the input did not fit its pipe)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    feed_task = asyncio.ensure_future(_feed(proc.stdin, proc.unsent_stdin)) if proc.stdin else None
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
        await terminate_group(proc, tag)
        # What is left is read to EOF (the group is dead now), so the pipes close here.
        grace_end = loop.time() + PIPE_GRACE_S
        while outputs.open and loop.time() < grace_end:
            await outputs.sleep(grace_end - loop.time())
    if feed_task is not None:
        feed_task.cancel()
        await asyncio.gather(feed_task, return_exceptions=True)
    return _ended(done, outputs.out, outputs.err, proc.returncode, failure, timed_out)


def _ended(
    done: Finished, out: _Capture, err: _Capture, returncode: int | None, failure: str | None, timed_out: bool
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


async def _exited(proc: asyncio.subprocess.Process) -> int | None:
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not waiter.done():
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
