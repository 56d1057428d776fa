"""One warm start server: a ready interpreter started through a hook's `#!` line (running
engine/warm/zygote.py), asked over a SEQPACKET socket to fork a child per run, and reporting how
each child starts and ends (the message format is in zygote.py's docstring).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.hooks.groups import RUN_TAG, TAG_PLACEHOLDER
from engine.warm.process import OutputSink, Pipe, WarmProcess

log = logging.getLogger("evolve")

READY_TIMEOUT_S = 60.0  # a server not ready by then is given up
START_TIMEOUT_S = 5.0  # a forked child not started by then: the server is given up, the run goes cold
UNWANTED_GRACE_S = 1.0  # between SIGTERM and SIGKILL to a child whose run was given up as it started
STOP_TIMEOUT_S = 3.0  # for a server to end its runs and exit once the engine closes its socket


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
        # Read by start(), unless the engine stopped while it waited: then nobody reads its error.
        self._hello.add_done_callback(lambda f: f.cancelled() or f.exception())
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
                # The run tag's placeholder, which each child overwrites with its run's tag.
                env={**env, RUN_TAG: TAG_PLACEHOLDER},
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
        proc = WarmProcess(run)
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
        # Every fd belongs to a Pipe from here on: closing one twice is harmless.
        files = [Pipe(stdin_r), Pipe(stdin_w)]
        why: str | None = "not started"
        sent = False
        try:
            for _ in range(2):
                read_end, write_end = os.pipe2(os.O_CLOEXEC)
                files += [Pipe(read_end), Pipe(write_end)]
            stdin_r_f, stdin_w_f, stdout_r_f, stdout_w_f, stderr_r_f, stderr_w_f = files
            self._runs[run] = proc
            # Connected before the request: once a child may run, nothing here may fail.
            await proc.connect(stdin, stdin_w_f, stdout_r_f, stderr_r_f, output)
            await self._send(
                b"R" + b"\0".join(fields), [f.fileno() for f in (stdin_r_f, stdout_w_f, stderr_w_f)]
            )
            sent = True
            for f in (stdin_r_f, stdout_w_f, stderr_w_f):
                f.close()  # the child has them now; their EOF must be the child's
            # A timer, not wait_for: wait_for would add a waiter future and its callbacks to every
            # run, for a timeout that almost never fires.
            timer = self._loop.call_later(START_TIMEOUT_S, self._not_started_in_time, proc)
            try:
                why = await asyncio.shield(proc.started)
            finally:
                timer.cancel()
        except OSError as exc:
            proc.report_not_started(f"cannot reach the server: {exc}")
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

    def _not_started_in_time(self, proc: WarmProcess) -> None:
        """No word from the server that the run's child started within START_TIMEOUT_S: the server
        is given up, which ends the run as not started (it goes cold)."""
        if proc.started.done():
            return
        why = f"no child started within {START_TIMEOUT_S:g} s"
        self.abandon(why)
        proc.report_not_started(why)  # nothing if giving the server up already said so

    def _forget(self, proc: WarmProcess, files: Sequence[Pipe]) -> None:
        self._runs.pop(proc.run, None)
        proc.close()
        for f in files:
            f.close()

    async def _end_unwanted(self, proc: WarmProcess, files: Sequence[Pipe]) -> None:
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
                proc.report_started(int(fields[1]))
            elif kind == b"X":
                del self._runs[fields[0]]
                proc.report_exit(int(fields[1]), int(fields[2]))
                self._maybe_retire()
            elif kind == b"F":
                del self._runs[fields[0]]
                proc.report_not_started(fields[1].decode("utf-8", "replace"))
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
            proc.report_lost(f"the warm start server died ({why})")

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
