"""Validation of a candidate hook version against the hook's registered test script (docs/hooks.md, "Test scripts and validation").

The test runs against a temporary copy of the workspace with the candidate in place and
`OPENCODE_EVOLVE_WORKSPACE` pointing at the copy. The copy leaves out `.git` and `state/` (the run
journal), so validating in a workspace with a long history costs no more than in a new one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.hooks.groups import run_owner
from engine.hooks.runner import run_process
from engine.hooks.testpath import TestCommand, TestRefused, test_command
from engine.workspace.copies import SKIP_TOP, copy_workspace, new_copy_dir, remove_stale_copies

# Names this module had before copies moved to engine.workspace.copies, for those that import them.
__all__ = [
    "COPY_PREFIX",
    "OUTPUT_LIMIT",
    "SKIP_TOP",
    "Validation",
    "copy_workspace",
    "remove_stale_copies",
    "validate",
]

OUTPUT_LIMIT = 256 * 1024
COPY_PREFIX = "evolve-validate-"
"""Validation copies are `<tmp>/evolve-validate-<pid of the engine>-<random>`."""


@dataclass(frozen=True)
class Validation:
    ok: bool
    output: str
    duration_ms: float = 0.0
    test: str | None = None  # None when the hook has no registered test
    exit_code: int | None = None  # the test's exit status, when it exited


async def validate(
    root: Path,
    hook_rel: str,
    candidate: str | bytes,
    test: str | None,
    timeout_ms: int,
    env: Mapping[str, str] | None = None,
    slots: asyncio.Semaphore | None = None,
) -> Validation:
    """Run `tests/<test>` against a copy of the workspace in which `hooks/<hook_rel>` is `candidate`
    (`hook_rel` is where the hook's content lives: a link resolved). `slots`: the validations that
    may run at once (this one waits for one, before it copies anything)."""
    if not test:
        return Validation(True, "no test registered")
    try:
        test_command(root, test)  # refused before anything is copied, made executable or run
    except TestRefused as exc:
        return Validation(False, f"{exc}; a hook's test must be a script in tests/", 0.0, test)
    if slots is None:
        return await _validate(root, hook_rel, candidate, test, timeout_ms, env)
    async with slots:
        return await _validate(root, hook_rel, candidate, test, timeout_ms, env)


async def _validate(
    root: Path,
    hook_rel: str,
    candidate: str | bytes,
    test: str,
    timeout_ms: int,
    env: Mapping[str, str] | None,
) -> Validation:
    started = time.perf_counter()
    tmp = new_copy_dir("validate")
    try:
        copied = await asyncio.to_thread(copy_workspace, root, tmp)
        target = tmp / "hooks" / hook_rel
        if os.path.commonpath([os.path.realpath(tmp), os.path.realpath(target.parent)]) != os.path.realpath(
            tmp
        ):
            return Validation(False, f"hooks/{hook_rel} leads out of the workspace: refused", 0.0, test)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_bytes(candidate.encode("utf-8") if isinstance(candidate, str) else candidate)
        os.chmod(target, 0o755)
        try:
            command = test_command(tmp, test)  # again in the copy: what runs is what was checked
        except TestRefused as exc:
            return Validation(False, f"{exc}; a hook's test must be a script in tests/", 0.0, test)
        if not command.script.is_file():
            return Validation(
                False,
                f"test script {command.shown} not found (the hook registers it in discover)",
                0.0,
                test,
            )
        if command.runs_script:
            os.chmod(command.script, 0o755)  # a regular file inside the copy's tests/ (checked above)
        test_env = {**(os.environ if env is None else env), "OPENCODE_EVOLVE_WORKSPACE": str(tmp)}
        ok, output, code = await _run_test(command, tmp, test_env, timeout_ms, run_owner(root))
        if copied.left_out and not ok:  # what may explain the failure; a pass needs no note
            sep = "" if not output or output.endswith("\n") else "\n"
            output += sep + "".join(f"note: not in the validation's copy: {n}\n" for n in copied.notes())
        return Validation(ok, output, (time.perf_counter() - started) * 1000, test, code)
    finally:
        await asyncio.to_thread(shutil.rmtree, tmp, True)


async def _run_test(
    command: TestCommand, cwd: Path, env: dict[str, str], timeout_ms: int, owner: str
) -> tuple[bool, str, int | None]:
    """ok when the test exits 0; the output is stdout then stderr, with the reason appended when it
    could not finish; and its exit status."""
    name = command.shown
    done = await run_process(
        command.argv,
        cwd=cwd,
        env=env,
        stdin=None,
        timeout_ms=timeout_ms,
        stdout_limit=OUTPUT_LIMIT,
        stdout_fail_over=False,
        stderr_limit=OUTPUT_LIMIT,
        owner=owner,
    )
    if done.spawn_error is not None:
        return False, f"cannot start {name}: {done.spawn_error.strerror or done.spawn_error}", None
    output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    if done.failure is not None:
        if done.timed_out:
            reason = f"timeout: {name} ran longer than {timeout_ms} ms and was killed"
        else:
            reason = f"{name}: {done.failure}"
        return False, output + ("\n" if output and not output.endswith("\n") else "") + reason, None
    if done.signal:
        return False, output + f"\n{name} was killed by {done.signal}", None
    return done.returncode == 0, output, done.returncode
