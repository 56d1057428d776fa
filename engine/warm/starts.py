"""Warm starts for Python hooks: a ready interpreter per `#!` line, forked for every run.

A hook whose `#!` line starts Python (`#!/usr/bin/python3 -S`, `#!/usr/bin/env python3`, a venv's
python, ...) runs in a child forked from a server process (engine/warm/zygote.py) that was started
exactly as the hook would be: the same `#!` line executed by the kernel, the same environment and
cwd. So the interpreter start-up (tens of milliseconds) is paid once per interpreter, not per run,
and the child is what a cold start of the hook would be (see docs/hooks.md, "Warm start").

A run never depends on it: whatever goes wrong (not Python, no server ready yet, a server that
died or cannot start, a changed interpreter) makes `spawn` return None, and the caller starts the
hook cold, as before; the engine log says why. The servers are stopped with the engine.

`WarmStarts` (here) keeps the ready interpreters, one slot per `#!` line and environment: which
to start, when one is stale, which to retire. The parts: `interpreter` (which Python a `#!` line
starts), `server` (`Zygote`, one server process and its socket), `process` (`WarmProcess`, one
forked run, its pipes).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.warm.interpreter import (
    Interpreter,
    first_line,
    is_script,
    python_interpreter,
    relative,
    resolve,
    shown,
    signature,
)
from engine.warm.process import OutputSink, WarmProcess
from engine.warm.server import READY_TIMEOUT_S, Handshake, Zygote, ZygoteError

# Public names of this module before it was split, for those that import them from here.
__all__ = [
    "Interpreter",
    "OutputSink",
    "WarmProcess",
    "WarmStarts",
    "Zygote",
    "ZygoteError",
    "python_interpreter",
]

log = logging.getLogger("evolve")

ZYGOTE_SOURCE = Path(__file__).with_name("zygote.py")
LIMIT = 4  # interpreters kept ready at once; starting another stops the least recently used one
RETRY_AFTER_S = 60.0  # after a server could not start, its hooks start cold this long
CHECK_EVERY_S = 1.0  # how often a server's interpreter files are compared with what it loaded
REPROBE_EVERY_S = 10.0  # how often a `#!` line resolved through a script (a shim) is resolved again
SHEBANGS_KEPT = 256  # hook files whose `#!` line is remembered (hooks are few; renamed ones leave entries)

_Signature = tuple[int, int, int, int]


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
        # Per hook file, its `#!` line's interpreter as read when the file had this signature: a run
        # of an unchanged hook costs a stat, not an open, a read and a parse. A file rewritten
        # without its signature changing still cannot run under another interpreter: the server
        # compares the line it was sent with the file's when it starts the run (zygote.py).
        self._shebangs: dict[str, tuple[_Signature, Interpreter | None]] = {}
        # The last environment a slot was looked up for, a copy of it and its key: the runner
        # passes the same dict every run, so the key is not sorted and built again unless it changed.
        self._env_key: tuple[Mapping[str, str], dict[str, str], tuple[tuple[str, str], ...]] | None = None
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
        interpreter = self._interpreter(path)
        if interpreter is None or not os.access(path, os.X_OK) or not os.path.isdir(cwd):
            return None  # not Python, or a cold start fails in its own words
        slot = self._slot(interpreter, os.environ if env is None else env, cwd)
        now = time.monotonic()
        slot.used_at = now
        zygote = slot.zygote
        if zygote is not None and not zygote.alive:
            log.warning("hooks: the warm start server for %r is gone; starting a new one", shown(interpreter))
            slot.zygote = None
            slot.retry_at = 0.0
        if slot.zygote is None and slot.starting is None and now >= slot.retry_at:
            slot.starting = asyncio.ensure_future(self._start(slot))
        return slot

    def _interpreter(self, path: str) -> Interpreter | None:
        """The Python the `#!` line of the file at `path` starts (None: not Python, or unreadable),
        read again whenever the file's signature changed."""
        now = signature(path)
        if now is None:
            return None
        known = self._shebangs.get(path)
        if known is not None and known[0] == now:
            return known[1]
        line = first_line(path)
        interpreter = python_interpreter(line) if line is not None else None
        if len(self._shebangs) >= SHEBANGS_KEPT:
            self._shebangs.clear()
        self._shebangs[path] = (now, interpreter)
        return interpreter

    def _environment_key(self, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """`env` as part of a slot's key: its items, sorted. Comparing a dict with the copy kept of
        it is a fraction of sorting it; any other mapping (os.environ) is sorted every time."""
        known = self._env_key
        if known is not None and known[0] is env and env == known[1]:
            return known[2]
        key = tuple(sorted(env.items()))
        if type(env) is dict:
            self._env_key = (env, dict(env), key)
        return key

    def _slot(self, interpreter: Interpreter, env: Mapping[str, str], cwd: str) -> _Slot:
        shared = (interpreter.line, self._environment_key(env))
        slot = self._slots.get(shared)
        if slot is not None:  # only a slot whose interpreter does not depend on the cwd is shared
            slot.cwd = cwd  # where its next server starts (an earlier cwd may be gone)
            return slot
        key = (*shared, cwd)
        slot = self._slots.get(key)
        if slot is None:
            resolved = resolve(interpreter, env, cwd)
            dynamic = is_script(resolved) or relative(interpreter, env)
            slot = _Slot(interpreter, dict(env), cwd, resolved=resolved, dynamic=dynamic)
            # Only an interpreter that can change with the cwd gets one server per cwd.
            self._slots[key if dynamic else shared] = slot
        return slot

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
        self.scratch.mkdir(exist_ok=True)  # not its parents: a deleted workspace stays deleted
        partial = script.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(content)
        partial.chmod(0o755)
        partial.replace(script)
        return script

    async def _start(self, slot: _Slot) -> None:
        started = time.perf_counter()
        line = shown(slot.interpreter)
        try:
            self._make_room(slot)
            script = await asyncio.to_thread(self._script, slot.interpreter)
            zygote = await Zygote.start(script, slot.cwd, slot.env)
        except (ZygoteError, OSError) as exc:
            slot.retry_at = time.monotonic() + RETRY_AFTER_S
            log.warning(
                "hooks: no warm start for %r (%s); its hooks start cold (trying again in %g s)",
                line,
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
        slot.resolved = resolve(slot.interpreter, slot.env, slot.cwd)
        slot.files = {p: signature(p) for p in self._watched(slot, zygote.info)}
        now = time.monotonic()
        slot.checked_at = slot.probed_at = now
        log.info(
            "hooks: warm start ready for %r: Python %s, pid %d, %.0f ms",
            line,
            zygote.info.version,
            zygote.info.pid,
            (time.perf_counter() - started) * 1000,
        )

    @staticmethod
    def _watched(slot: _Slot, info: Handshake) -> list[str]:
        return [p for p in (slot.resolved, *info.watch) if p]

    def _changed(self, slot: _Slot) -> str | None:
        """What changed since the slot's server started (so a cold start would differ), or None."""
        resolved = resolve(slot.interpreter, slot.env, slot.cwd)
        if resolved != slot.resolved:
            return f"{slot.interpreter.lookup} on PATH (now {resolved})"
        for path, before in slot.files.items():
            if signature(path) != before:
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
                shown(slot.interpreter),
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
