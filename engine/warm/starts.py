"""Warm starts for Python hooks: a ready interpreter per `#!` line, forked for every run.

A hook whose `#!` line starts Python (`#!/usr/bin/python3 -S`, `#!/usr/bin/env python3`, a venv's
python, ...) runs in a child forked from a server process (engine/warm/zygote.py) that was started
exactly as the hook would be: the same `#!` line executed by the kernel, the same environment and
cwd. So the interpreter start-up (tens of milliseconds) is paid once per interpreter, not per run,
and the child is what a cold start of the hook would be (see docs/hooks.md, "Warm start").

A run never depends on it: whatever goes wrong (not Python, no server ready yet, a server that
died or cannot start, a changed interpreter) makes `spawn` return None, and the caller starts the
hook cold, as before; the engine log says why. The servers are stopped with the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import os
import re
import shutil
import signal
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("evolve")

ZYGOTE_SOURCE = Path(__file__).with_name("zygote.py")
LIMIT = 4  # interpreters kept ready at once; starting another stops the least recently used one
READY_TIMEOUT_S = 60.0  # a server not ready by then is given up
RETRY_AFTER_S = 60.0  # after a server could not start, its hooks start cold this long
START_TIMEOUT_S = 5.0  # a forked child not started by then: the server is given up, the run goes cold
CHECK_EVERY_S = 1.0  # how often a server's interpreter files are compared with what it loaded
REPROBE_EVERY_S = 10.0  # how often a `#!` line resolved through a script (a shim) is resolved again
UNWANTED_GRACE_S = 1.0  # between SIGTERM and SIGKILL to a child whose run was given up as it started
STOP_TIMEOUT_S = 3.0  # for a server to end its runs and exit once the engine closes its socket
HEADER_LIMIT = 256  # the kernel reads no more of a `#!` line
_PYTHON = re.compile(rb"python[0-9.]*")
# Variables whose relative values the interpreter resolves against its cwd at start-up.
_PATH_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX")


@dataclass(frozen=True)
class Interpreter:
    """How a `#!` line starts Python: the file the kernel runs and, for `#!/usr/bin/env python3`,
    the name env looks up on PATH."""

    line: bytes
    program: str
    lookup: str | None = None


def python_interpreter(line: bytes) -> Interpreter | None:
    """The Python a `#!` line starts, or None when it starts something else (or env with options
    that change the environment)."""
    if not line.startswith(b"#!"):
        return None
    command = line[2:].strip()
    words = command.split()
    if not words:
        return None
    program, argument = words[0], command[len(words[0]) :].strip()
    if _PYTHON.fullmatch(os.path.basename(program)):
        return Interpreter(line, os.fsdecode(program))
    if os.path.basename(program) != b"env":
        return None
    # The kernel passes everything after the interpreter as one argument: env takes it as a program
    # name, unless it starts with -S, which splits it into words.
    args = argument.split() if argument.startswith(b"-S ") else [argument]
    if args and args[0] == b"-S":
        args = args[1:]
    if not args or not _PYTHON.fullmatch(os.path.basename(args[0])) or b"=" in args[0]:
        return None
    if any(not a.startswith(b"-") for a in args[1:]):
        return None  # more than python's own options
    return Interpreter(line, os.fsdecode(program), os.fsdecode(args[0]))


def first_line(path: str) -> bytes | None:
    """The `#!` line of a file as the kernel reads it, or None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_LIMIT)
    except OSError:
        return None
    return head.split(b"\n", 1)[0]


def _signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size)


def _is_script(path: str | None) -> bool:
    if path is None:
        return False
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


class _Pipe:
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
    """Where a warm run's output goes as it arrives (engine.runner keeps it, bounded)."""

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

    def __init__(self, loop: asyncio.AbstractEventLoop, pipe: _Pipe, number: int, sink: OutputSink) -> None:
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


class WarmProcess:
    """A hook process forked by a server: `pid`, `returncode`, `stdin` and `wait()` as an
    `asyncio.subprocess.Process` has them, with the exit status reported by the server that reaps
    it (`exited` is done then); its stdout and stderr go to the OutputSink it was started with."""

    def __init__(self, zygote: Zygote, run: bytes) -> None:
        self._zygote = zygote
        self.run = run
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

    def _started(self, pid: int) -> None:
        self.pid = pid
        if not self.started.done():
            self.started.set_result(None)

    def _not_started(self, why: str) -> None:
        if not self.started.done():
            self.started.set_result(why)
        self._end()

    def _ended(self, status: int, cpu_us: int) -> None:
        if not self.started.done():  # it died before the hook's code could run
            self._not_started(f"the forked child exited during set-up ({_describe(status)})")
            return
        self.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_ms = cpu_us / 1000
        self._end()

    def _lose(self, why: str) -> None:
        if not self.started.done():
            self._not_started(why)
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


def _describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"exit {code}" if code >= 0 else f"killed by signal {-code}"


class ZygoteError(Exception):
    """A server could not be started or did not answer as it should."""


@dataclass
class Handshake:
    version: str
    pid: int
    refusal: str
    path0: str
    comm: bytes
    identity: bytes
    watch: list[str]


class Zygote:
    """One server process: started through a hook's `#!` line, talking over a SEQPACKET socket."""

    def __init__(self, script: Path, proc: asyncio.subprocess.Process, sock: socket.socket) -> None:
        self.script = script
        self.proc = proc
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._runs: dict[bytes, WarmProcess] = {}
        self._ids = itertools.count(1)
        self._hello: asyncio.Future[Handshake] = self._loop.create_future()
        self.info: Handshake | None = None
        self.alive = True
        self.retiring = False  # takes no new runs; stops once its runs are done
        self.stopped: asyncio.Future[None] = self._loop.create_future()  # done once it is reaped
        self.inserts_path0 = False
        self.comm_is_script = False
        self._stopped: asyncio.Task[None] | None = None
        self._ending: set[asyncio.Task[None]] = set()
        self._loop.add_reader(sock.fileno(), self._readable)
        self._output = [
            asyncio.ensure_future(self._log_output(stream, name))
            for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))
            if stream is not None
        ]

    @classmethod
    async def start(cls, script: Path, cwd: str, env: Mapping[str, str]) -> Zygote:
        """Start the server at `script` (a `#!` line and engine/warm/zygote.py) and wait for its handshake."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = await asyncio.create_subprocess_exec(
                str(script),
                str(theirs.fileno()),
                stdin=asyncio.subprocess.PIPE,  # pipes, as every hook gets (sys.stdin & co. are made for them)
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                pass_fds=(theirs.fileno(),),
                process_group=0,  # like a hook: a Ctrl-C meant for the engine does not reach it
            )
        except OSError as exc:
            ours.close()
            raise ZygoteError(f"cannot start {script}: {exc.strerror or exc}") from exc
        finally:
            theirs.close()
        assert proc.stdin is not None
        proc.stdin.close()
        ours.setblocking(False)
        zygote = cls(script, proc, ours)
        try:
            info = await asyncio.wait_for(asyncio.shield(zygote._hello), READY_TIMEOUT_S)
        except TimeoutError:
            await zygote.stop()
            raise ZygoteError(f"no answer within {READY_TIMEOUT_S:g} s") from None
        except BaseException:  # its own error, or the engine stopping meanwhile
            await zygote.stop()
            raise
        if info.refusal:
            await zygote.stop()
            raise ZygoteError(info.refusal)
        zygote.info = info
        real_dir = os.path.dirname(os.path.realpath(script))
        zygote.inserts_path0 = info.path0 == real_dir
        zygote.comm_is_script = info.comm == os.fsencode(script.name)[:15]
        return zygote

    @property
    def busy(self) -> bool:
        return bool(self._runs)

    # ---- runs -------------------------------------------------------------------------------------

    async def spawn(
        self,
        path: str,
        stage: str,
        cwd: str,
        stdin: bytes,
        line: bytes,
        extra_env: Mapping[str, str] | None = None,
        *,
        output: OutputSink,
    ) -> WarmProcess | None:
        """Fork a child that runs the hook at `path`, with `extra_env` set in its environment; None
        (and the reason logged) if it did not start, in which case no code of the hook ran. As much
        of `stdin` as the pipe holds is in it before the child starts (the rest is in
        `unsent_stdin`), so the hook need not wait for it. Its stdout and stderr go to `output`."""
        if not self.alive or self.retiring:
            return None
        run = str(next(self._ids)).encode()
        proc = WarmProcess(self, run)
        path0 = os.path.dirname(os.path.realpath(path)) if self.inserts_path0 else ""
        comm = os.fsencode(os.path.basename(path))[:15] if self.comm_is_script else b""
        # The `#!` line this run was sent warm for: if the file has another one when the server
        # reads it (rewritten meanwhile), the server starts nothing and the run goes cold.
        fields = [
            run,
            os.fsencode(path),
            os.fsencode(stage),
            os.fsencode(cwd),
            os.fsencode(path0),
            comm,
            line,
            b"\n".join(os.fsencode(f"{k}={v}") for k, v in (extra_env or {}).items()),
        ]
        if any(b"\0" in f for f in fields):
            return None
        try:
            stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
        except OSError as exc:
            log.warning("hooks: warm start of %s failed (%s); started cold", path, exc)
            return None
        # Every fd belongs to a _Pipe from here on: closing one twice is harmless.
        files = [_Pipe(stdin_r), _Pipe(stdin_w)]
        why: str | None = "not started"
        sent = False
        try:
            for _ in range(2):
                read_end, write_end = os.pipe2(os.O_CLOEXEC)
                files += [_Pipe(read_end), _Pipe(write_end)]
            stdin_r_f, stdin_w_f, stdout_r_f, stdout_w_f, stderr_r_f, stderr_w_f = files
            os.set_blocking(stdin_w_f.fileno(), False)
            try:
                written = os.write(stdin_w_f.fileno(), stdin) if stdin else 0
            except BlockingIOError:
                written = 0
            proc.unsent_stdin = stdin[written:]
            if not proc.unsent_stdin:
                stdin_w_f.close()  # all of it is in the pipe: the hook reads it to the end
            self._runs[run] = proc
            # Connected before the request: once a child may run, nothing here may fail.
            await self._connect(proc, None if stdin_w_f.closed else stdin_w_f, stdout_r_f, stderr_r_f, output)
            await self._send(
                b"R" + b"\0".join(fields), [f.fileno() for f in (stdin_r_f, stdout_w_f, stderr_w_f)]
            )
            sent = True
            for f in (stdin_r_f, stdout_w_f, stderr_w_f):
                f.close()  # the child has them now; their EOF must be the child's
            why = await asyncio.wait_for(asyncio.shield(proc.started), START_TIMEOUT_S)
        except TimeoutError:
            self.abandon(f"no child started within {START_TIMEOUT_S:g} s")
            why = proc.started.result() if proc.started.done() else "not started"
        except OSError as exc:
            proc._not_started(f"cannot reach the server: {exc}")
            why = f"cannot reach the server: {exc}"
        except asyncio.CancelledError:
            if sent:
                # Given up (the engine stopping, a heartbeat stopped) after the server was asked: its
                # child may be starting, and must not run on unsupervised. The task cleans up.
                ending = asyncio.ensure_future(self._end_unwanted(proc, files))
                self._ending.add(ending)  # held: the loop keeps only a weak reference to a task
                ending.add_done_callback(self._ending.discard)
                why = None
            raise
        finally:
            if why is not None:
                self._forget(proc, files)
        if why is not None:
            log.warning("hooks: warm start of %s failed (%s); started cold", path, why)
            return None
        return proc

    def _forget(self, proc: WarmProcess, files: Sequence[_Pipe]) -> None:
        self._runs.pop(proc.run, None)
        proc.close()
        for f in files:
            f.close()

    async def _end_unwanted(self, proc: WarmProcess, files: Sequence[_Pipe]) -> None:
        """End the child of a run given up before it was known to start, as the runner ends a run it
        gives up: SIGTERM to its process group, SIGKILL after a grace period."""
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.started), START_TIMEOUT_S)
            if not proc.started.done():
                self.abandon(f"no child started within {START_TIMEOUT_S:g} s")
            if proc.started.done() and proc.started.result() is None and proc.pid:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(proc.wait(), UNWANTED_GRACE_S)
                        break
        finally:
            self._forget(proc, files)

    async def _connect(
        self, proc: WarmProcess, stdin: Any, stdout: _Pipe, stderr: _Pipe, output: OutputSink
    ) -> None:
        loop = self._loop
        proc._pipes = [_OutputPipe(loop, stdout, 1, output), _OutputPipe(loop, stderr, 2, output)]
        if stdin is None:
            return
        # A StreamReaderProtocol also for the writer: it gives StreamWriter.wait_closed its waiter.
        unused = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(unused, loop=loop)
        writing, _ = await loop.connect_write_pipe(lambda: protocol, stdin)
        proc._transport = writing
        proc.stdin = asyncio.StreamWriter(writing, protocol, unused, loop)

    async def _send(self, message: bytes, fds: Sequence[int]) -> None:
        while True:
            if not self.alive:
                raise OSError("the server is gone")
            try:
                socket.send_fds(self._sock, [message], list(fds))
                return
            except BlockingIOError:
                writable = self._loop.create_future()
                self._loop.add_writer(self._sock.fileno(), writable.set_result, None)
                try:
                    await writable
                finally:
                    self._loop.remove_writer(self._sock.fileno())

    # ---- messages ---------------------------------------------------------------------------------

    def _readable(self) -> None:
        while self.alive:
            try:
                data = self._sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._gone(f"its socket failed: {exc}")
                return
            if not data:
                self._gone("it exited")
                return
            self._message(data)

    def _message(self, data: bytes) -> None:
        kind, fields = data[:1], data[1:].split(b"\0")
        try:
            if kind == b"H":
                version, pid, refusal, path0, comm, identity, *watch = fields
                hello = Handshake(
                    version.decode(),
                    int(pid),
                    refusal.decode("utf-8", "replace"),
                    os.fsdecode(path0),
                    comm,
                    identity,
                    [os.fsdecode(w) for w in watch],
                )
                if not self._hello.done():
                    self._hello.set_result(hello)
                return
            proc = self._runs.get(fields[0])
            if proc is None:
                return
            if kind == b"S":
                proc._started(int(fields[1]))
            elif kind == b"X":
                del self._runs[fields[0]]
                proc._ended(int(fields[1]), int(fields[2]))
                self._maybe_retire()
            elif kind == b"F":
                del self._runs[fields[0]]
                proc._not_started(fields[1].decode("utf-8", "replace"))
        except (ValueError, IndexError):
            log.warning(
                "hooks: warm start server %s sent a malformed message %r", self.script.name, data[:80]
            )

    def _gone(self, why: str) -> None:
        """The server is dead or given up: runs not started go cold, started ones are lost."""
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._stopping()
        if not self._hello.done():
            self._hello.set_exception(ZygoteError(self._exit_text(why)))
        runs, self._runs = self._runs, {}
        for proc in runs.values():
            proc._lose(f"the warm start server died ({why})")

    def _exit_text(self, why: str) -> str:
        code = self.proc.returncode
        return why if code is None else f"{why} with status {code}"

    # ---- life cycle -------------------------------------------------------------------------------

    def abandon(self, why: str) -> None:
        """Give this server up at once: whatever it already started is read first, no child can
        start after this (its "started" message would fail: it exits without running the hook)."""
        if not self.alive:
            return
        log.warning("hooks: warm start server %s given up: %s", self.script.name, why)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RD)
        self._readable()
        self._gone(why)
        self._stopping()

    def retire(self) -> None:
        """Take no new runs; stop once the runs under way are done."""
        self.retiring = True
        self._maybe_retire()

    def _maybe_retire(self) -> None:
        if self.retiring and not self._runs and self.alive:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RD)
            self._readable()
            self._gone("retired")
            self._stopping()

    def _stopping(self) -> asyncio.Task[None]:
        if self._stopped is None:
            self._stopped = asyncio.ensure_future(self._reap())
        return self._stopped

    async def _reap(self) -> None:
        """Wait for the process to exit (it ends its runs when its socket closes), killing it if it
        does not."""
        try:
            await asyncio.wait_for(self.proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        await asyncio.gather(*self._output, return_exceptions=True)
        if not self.stopped.done():
            self.stopped.set_result(None)

    async def stop(self) -> None:
        """Close the socket (the server ends the runs still under way and exits) and reap it."""
        if self.alive:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RD)
            self._readable()
            self._gone("stopped")
        await self._stopping()

    async def _log_output(self, stream: asyncio.StreamReader, name: str) -> None:
        """A server prints nothing itself; what its interpreter prints (a site hook) goes to the log."""
        while line := await stream.readline():
            log.warning(
                "hooks: warm start server %s %s: %s",
                self.script.name,
                name,
                line.decode("utf-8", "replace").rstrip(),
            )


@dataclass
class _Slot:
    """One interpreter: a `#!` line in an environment (and a cwd, when that changes the interpreter)."""

    interpreter: Interpreter
    env: Mapping[str, str]
    cwd: str
    zygote: Zygote | None = None
    starting: asyncio.Task[None] | None = None
    retry_at: float = 0.0
    used_at: float = 0.0
    checked_at: float = 0.0
    probed_at: float = 0.0
    probing: asyncio.Task[None] | None = None
    resolved: str | None = None  # the file the `#!` line leads to (python, or a shim)
    dynamic: bool = False  # resolved through a script: may lead elsewhere at any time
    files: dict[str, tuple[int, int, int, int] | None] = field(default_factory=dict)


class WarmStarts:
    """The ready interpreters of one engine. `spawn` returns a running hook or None (start it cold)."""

    def __init__(self, scratch: Path, limit: int = LIMIT) -> None:
        self.scratch = scratch
        self.limit = limit
        self._slots: dict[tuple[Any, ...], _Slot] = {}
        self._closed = False
        self._source: bytes | None = None
        self._retired: set[Zygote] = set()
        self.warm_runs = 0  # runs started warm, for tests and benchmarks

    async def ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait (at most `timeout` seconds) for the servers being started: the next runs of their
        hooks start warm."""
        starting = [s.starting for s in self._slots.values() if s.starting is not None]
        if starting:
            await asyncio.wait(starting, timeout=timeout)

    def zygote_pids(self) -> list[int]:
        return [s.zygote.proc.pid for s in self._slots.values() if s.zygote is not None and s.zygote.alive]

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str] | None,
        stdin: bytes,
        extra_env: Mapping[str, str] | None = None,
        output: OutputSink,
    ) -> WarmProcess | None:
        """Start `argv` (a hook and its stage) warm with `stdin`, or return None for a cold start.
        `extra_env`: variables of this run alone (the server is chosen by `env`), set in the hook;
        `output` gets its stdout and stderr."""
        if len(argv) != 2:
            return None
        path, stage = argv
        slot = self._hook_slot(path, cwd, env)
        if slot is None:
            return None
        now = time.monotonic()
        zygote = slot.zygote
        if zygote is None:
            return None
        if now - slot.checked_at >= CHECK_EVERY_S:
            slot.checked_at = now
            changed = self._changed(slot)
            if changed:
                log.warning(
                    "hooks: %s changed since its warm start server started; starting a new one", changed
                )
                self._retire(slot)
                slot.starting = asyncio.ensure_future(self._start(slot))
                return None
        if slot.dynamic and slot.probing is None and now - slot.probed_at >= REPROBE_EVERY_S:
            slot.probed_at = now
            slot.probing = asyncio.ensure_future(self._reprobe(slot, zygote))
        proc = await zygote.spawn(path, stage, cwd, stdin, slot.interpreter.line, extra_env, output=output)
        if proc is not None:
            self.warm_runs += 1
        return proc

    async def prepare(self, path: str, *, cwd: str, env: Mapping[str, str] | None) -> bool:
        """Start the server for the hook at `path` if there is none and wait for it: whether its
        next run starts warm."""
        slot = self._hook_slot(path, cwd, env)
        if slot is None:
            return False
        if slot.starting is not None:
            await asyncio.wait({slot.starting})
        return slot.zygote is not None and slot.zygote.alive

    def _hook_slot(self, path: str, cwd: str, env: Mapping[str, str] | None) -> _Slot | None:
        """The slot of the hook's interpreter (its server started if it has none, or is gone), or
        None when the hook is not one to start warm."""
        if self._closed:
            return None
        line = first_line(path)
        interpreter = python_interpreter(line) if line is not None else None
        if interpreter is None or not os.access(path, os.X_OK) or not os.path.isdir(cwd):
            return None  # not Python, or a cold start fails in its own words
        slot = self._slot(interpreter, os.environ if env is None else env, cwd)
        now = time.monotonic()
        slot.used_at = now
        zygote = slot.zygote
        if zygote is not None and not zygote.alive:
            log.warning(
                "hooks: the warm start server for %r is gone; starting a new one", _shown(interpreter)
            )
            slot.zygote = None
            slot.retry_at = 0.0
        if slot.zygote is None and slot.starting is None and now >= slot.retry_at:
            slot.starting = asyncio.ensure_future(self._start(slot))
        return slot

    def _slot(self, interpreter: Interpreter, env: Mapping[str, str], cwd: str) -> _Slot:
        shared = (interpreter.line, tuple(sorted(env.items())))
        slot = self._slots.get(shared)
        if slot is not None:  # only a slot whose interpreter does not depend on the cwd is shared
            slot.cwd = cwd  # where its next server starts (an earlier cwd may be gone)
            return slot
        key = (*shared, cwd)
        slot = self._slots.get(key)
        if slot is None:
            resolved = self._resolve(interpreter, env, cwd)
            dynamic = _is_script(resolved) or self._relative(interpreter, env)
            slot = _Slot(interpreter, dict(env), cwd, resolved=resolved, dynamic=dynamic)
            # Only an interpreter that can change with the cwd gets one server per cwd.
            self._slots[key if dynamic else shared] = slot
        return slot

    @staticmethod
    def _resolve(interpreter: Interpreter, env: Mapping[str, str], cwd: str) -> str | None:
        if interpreter.lookup is None:
            return interpreter.program
        if "/" in interpreter.lookup:
            return os.path.join(cwd, interpreter.lookup)
        path = os.pathsep.join(os.path.join(cwd, p) for p in env.get("PATH", os.defpath).split(os.pathsep))
        return shutil.which(interpreter.lookup, path=path)

    @staticmethod
    def _relative(interpreter: Interpreter, env: Mapping[str, str]) -> bool:
        """Whether the interpreter's start-up depends on the cwd (relative PATH or Python paths)."""
        values = [env.get(v, "") for v in _PATH_VARIABLES]
        if interpreter.lookup is not None:
            values.append(env.get("PATH", os.defpath))
        return any(p and not os.path.isabs(p) for v in values for p in v.split(os.pathsep))

    def _script(self, interpreter: Interpreter) -> Path:
        """The server's file: the hook's `#!` line over engine/warm/zygote.py (one per `#!` line)."""
        if self._source is None:
            self._source = ZYGOTE_SOURCE.read_bytes()
        content = interpreter.line + b"\n" + self._source
        name = "evolve-warm-" + hashlib.sha256(content).hexdigest()[:12] + ".py"
        script = self.scratch / name
        try:
            if script.read_bytes() == content:
                return script
        except OSError:
            pass
        self.scratch.mkdir(parents=True, exist_ok=True)
        partial = script.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(content)
        partial.chmod(0o755)
        partial.replace(script)
        return script

    async def _start(self, slot: _Slot) -> None:
        started = time.perf_counter()
        shown = _shown(slot.interpreter)
        try:
            self._make_room(slot)
            script = await asyncio.to_thread(self._script, slot.interpreter)
            zygote = await Zygote.start(script, slot.cwd, slot.env)
        except (ZygoteError, OSError) as exc:
            slot.retry_at = time.monotonic() + RETRY_AFTER_S
            log.warning(
                "hooks: no warm start for %r (%s); its hooks start cold (trying again in %g s)",
                shown,
                exc,
                RETRY_AFTER_S,
            )
            return
        finally:
            slot.starting = None
        assert zygote.info is not None
        if self._closed:
            await zygote.stop()
            return
        slot.zygote = zygote
        slot.resolved = self._resolve(slot.interpreter, slot.env, slot.cwd)
        slot.files = {p: _signature(p) for p in self._watched(slot, zygote.info)}
        now = time.monotonic()
        slot.checked_at = slot.probed_at = now
        log.info(
            "hooks: warm start ready for %r: Python %s, pid %d, %.0f ms",
            shown,
            zygote.info.version,
            zygote.info.pid,
            (time.perf_counter() - started) * 1000,
        )

    @staticmethod
    def _watched(slot: _Slot, info: Handshake) -> list[str]:
        return [p for p in (slot.resolved, *info.watch) if p]

    def _changed(self, slot: _Slot) -> str | None:
        """What changed since the slot's server started (so a cold start would differ), or None."""
        resolved = self._resolve(slot.interpreter, slot.env, slot.cwd)
        if resolved != slot.resolved:
            return f"{slot.interpreter.lookup} on PATH (now {resolved})"
        for path, before in slot.files.items():
            if _signature(path) != before:
                return path
        return None

    async def _reprobe(self, slot: _Slot, zygote: Zygote) -> None:
        """Start the `#!` line afresh and compare what it runs with the server's interpreter."""
        try:
            proc = await asyncio.create_subprocess_exec(
                str(zygote.script),
                "probe",
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                cwd=slot.cwd,
                env=dict(slot.env),
                process_group=0,
            )
        except OSError:
            slot.probing = None
            return
        try:
            identity, _ = await asyncio.wait_for(proc.communicate(), READY_TIMEOUT_S)
        except BaseException as exc:  # a timeout, or the engine stopping
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            if not isinstance(exc, TimeoutError):
                raise
            identity = b""
        finally:
            slot.probing = None
        if zygote.alive and zygote.info is not None and identity != zygote.info.identity:
            log.warning(
                "hooks: %r now starts another interpreter; starting a new warm start server",
                _shown(slot.interpreter),
            )
            if slot.zygote is zygote:
                self._retire(slot)

    def _retire(self, slot: _Slot) -> None:
        zygote, slot.zygote = slot.zygote, None
        if zygote is not None:
            self._retired.add(zygote)
            zygote.retire()
            zygote.stopped.add_done_callback(lambda _: self._retired.discard(zygote))

    def _make_room(self, slot: _Slot) -> None:
        """Keep at most `limit` servers: retire the least recently used other one."""
        now = time.monotonic()
        for key, other in list(self._slots.items()):
            idle = other.zygote is None and other.starting is None and other.probing is None
            if idle and other is not slot and now - other.used_at > 600:
                del self._slots[key]
        live = [s for s in self._slots.values() if s.zygote is not None and s is not slot]
        while len(live) >= self.limit:
            oldest = min(live, key=lambda s: s.used_at)
            live.remove(oldest)
            self._retire(oldest)

    def suspend(self) -> None:
        """Stop the servers (each once its runs are done); a later spawn starts them again."""
        for slot in self._slots.values():
            self._retire(slot)

    async def close(self) -> None:
        """Stop every server (each ends the runs it still has) and reap them."""
        self._closed = True
        pending = [s.starting for s in self._slots.values() if s.starting is not None]
        pending += [s.probing for s in self._slots.values() if s.probing is not None]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        zygotes = [s.zygote for s in self._slots.values() if s.zygote is not None] + list(self._retired)
        self._slots.clear()
        await asyncio.gather(*(z.stop() for z in zygotes), return_exceptions=True)


def _shown(interpreter: Interpreter) -> str:
    return interpreter.line.decode("utf-8", "replace")
