"""Runs one hook script: argv = stage, one JSON document on stdin, JSONL on stdout.

The hook runs in its own process group so that a timeout kills everything it started, not just the
direct child; what it started in a new session (`setsid`, a daemon) is found by the tag every
process of a run inherits in its environment (`EVOLVE_RUN`) and killed with the group. What a run
leaves running when it ends by itself is ended the same way: no process of a run outlives it. stdout is
bounded (a run that prints more fails cleanly), stderr is bounded and kept with the run. Every
failure gets a precise reason: a spawn error, a timeout, too much output, a non-zero exit, a
signal, or a stdout line that is not a JSON object.

Here: starting a run (warm when it can, else cold) and turning how it ended into its `HookRun`. The
parts: `supervise` (a started run to its end, cold or warm), `capture` (its bounded output),
`groups` (ending its processes), `jsonl` (reading what it printed).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core import jsontext
from engine.hooks.capture import Outputs
from engine.hooks.groups import (
    KILL_GRACE_S,
    RUN_TAG,
    Started,
    end_remains,
    last_pid,
    new_tag,
    tagged,
    terminate_group,
)
from engine.hooks.jsonl import parse_jsonl
from engine.hooks.supervise import PIPE_GRACE_S, Finished, supervise, supervise_warm
from engine.protocol.records import HookRun

if TYPE_CHECKING:
    from engine.warm.starts import WarmStarts

# Names this module had before it was split, for those that import them from here.
__all__ = [
    "KILL_GRACE_S",
    "PIPE_GRACE_S",
    "RUN_TAG",
    "STDERR_LIMIT",
    "Finished",
    "Started",
    "execute",
    "parse_jsonl",
    "run_process",
    "tagged",
    "terminate_group",
]

STDERR_LIMIT = 256 * 1024


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
    owner: str | None = None,
) -> Finished:
    """Run `argv` in its own process group with bounded output and a timeout that kills the group.

    A process is judged by its own exit: when it exits but something it started still holds its
    pipes, those are given a moment and then killed, without turning the run into a timeout; what
    it leaves running otherwise is ended once it exited. With `warm`, a Python hook (`argv` = its
    path and the stage) is forked from a ready interpreter when one is (engine.warm.starts);
    otherwise, and whenever that fails, it starts as always. `owner`: whose run it is, the prefix of
    its tag (engine.hooks.groups.run_owner of the engine's workspace).
    """
    done = Finished()
    tag = new_tag(owner)
    since = last_pid()
    if warm is not None and stdin is not None:
        # The ready interpreter is the one for the run's environment without its tag; the tag is
        # set in the forked hook, so that what it starts carries it.
        outputs = Outputs(stdout_limit, stdout_fail_over, stderr_limit)
        warm_proc = await warm.spawn(
            argv, cwd=str(cwd), env=env, stdin=stdin, extra_env={RUN_TAG: tag}, output=outputs
        )
        if warm_proc is not None:
            try:
                await _unless_cancelled(
                    supervise_warm(warm_proc, outputs, done, timeout_ms, stdout_limit, tag, since),
                    warm_proc,
                    tag,
                    since,
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
        supervise(proc, done, stdin, timeout_ms, stdout_limit, stdout_fail_over, stderr_limit, tag, since),
        proc,
        tag,
        since,
    )
    return done


async def _unless_cancelled(
    supervising: Awaitable[Finished], proc: Started, tag: str, since: int | None
) -> None:
    """Await `supervising`, then end what the run left running; when the caller gives up (the
    engine is stopping), end the process group first: it must not outlive the run."""
    try:
        await supervising
    except asyncio.CancelledError:
        await asyncio.shield(terminate_group(proc, tag, since))
        raise
    await end_remains(proc, tag, since)


async def execute(
    run: HookRun,
    path: Path,
    *,
    cwd: Path,
    timeout_ms: int,
    stdout_limit: int,
    env: Mapping[str, str] | None = None,
    warm: WarmStarts | None = None,
    owner: str | None = None,
) -> HookRun:
    """Run the hook at `path` for `run.stage` with `run.input` on stdin; fill in and return `run`
    (forked from a ready interpreter if `warm` has one for it, see run_process; `owner` as there)."""
    started = time.perf_counter()
    # The prompts and the session's history in it are encoded once, not for every run (jsontext).
    stdin_data = b"" if run.input is None else jsontext.dumps(run.input).encode()
    done = await run_process(
        [str(path), run.stage],
        cwd=cwd,
        env=env,
        stdin=stdin_data,
        timeout_ms=timeout_ms,
        stdout_limit=stdout_limit,
        warm=warm,
        owner=owner,
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
