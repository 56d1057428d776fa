"""Validation of a candidate hook version against the hook's registered test script (docs/hooks.md, "Test scripts and validation").

The test runs against a temporary copy of the workspace with the candidate in place and
`OPENCODE_EVOLVE_WORKSPACE` pointing at the copy. The copy leaves out `.git` and `state/` (the run
journal), so validating in a workspace with a long history costs no more than in a new one.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.hooks.runner import run_process
from engine.workspace.layout import pid_alive
from engine.workspace.paths import PathRefused, safe_path

SKIP_TOP = frozenset({".git", "state"})
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


def _ignore_top(root: Path):  # type: ignore[no-untyped-def]
    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) == root:
            return {n for n in names if n in SKIP_TOP}
        return set()

    return ignore


def copy_workspace(root: Path, target: Path) -> None:
    """Copy the workspace without its git history and runtime state; symlinks stay links."""
    shutil.copytree(root, target, symlinks=True, ignore=_ignore_top(root), dirs_exist_ok=True)


async def validate(
    root: Path,
    hook_rel: str,
    candidate: str | bytes,
    test: str | None,
    timeout_ms: int,
    env: Mapping[str, str] | None = None,
) -> Validation:
    """Run `tests/<test>` against a copy of the workspace in which `hooks/<hook_rel>` is `candidate`
    (`hook_rel` is where the hook's content lives: a link resolved)."""
    if not test:
        return Validation(True, "no test registered")
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-"))
    try:
        await asyncio.to_thread(copy_workspace, root, tmp)
        target = tmp / "hooks" / hook_rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_bytes(candidate.encode("utf-8") if isinstance(candidate, str) else candidate)
        os.chmod(target, 0o755)
        test_path = test_file(tmp, test)
        if test_path is None:
            return Validation(
                False, f"test script tests/{test} not found (the hook registers it in discover)", 0.0, test
            )
        os.chmod(test_path, 0o755)
        test_env = {**(os.environ if env is None else env), "OPENCODE_EVOLVE_WORKSPACE": str(tmp)}
        ok, output, code = await _run_test(test_path, tmp, test_env, timeout_ms)
        return Validation(ok, output, (time.perf_counter() - started) * 1000, test, code)
    finally:
        await asyncio.to_thread(shutil.rmtree, tmp, True)


def test_file(root: Path, test: str) -> Path | None:
    """The test script a hook registers: `tests/<test>` (opencode-evolve names a file in tests/), else
    `<test>` relative to the workspace root (hcp names a command relative to `cwd`, the root), when
    that is a file inside the workspace; None when neither is."""
    found = root / "tests" / test
    if found.is_file():
        return found
    try:
        beside = safe_path(root, test, "test")
    except PathRefused:
        return None
    return beside if beside.is_file() else None


def remove_stale_copies(tmp: Path | None = None) -> list[Path]:
    """Remove the validation copies left in the temporary directory by engines that died during a
    validation (a crash, kill -9): those of this user whose engine is gone. Returns what was removed."""
    base = Path(tmp or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(COPY_PREFIX):
            continue
        pid = entry.name[len(COPY_PREFIX) :].split("-", 1)[0]
        try:
            if (
                not pid.isdigit()
                or pid_alive(int(pid))
                or entry.stat(follow_symlinks=False).st_uid != os.getuid()
            ):
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


async def _run_test(
    path: Path, cwd: Path, env: dict[str, str], timeout_ms: int
) -> tuple[bool, str, int | None]:
    """ok when the test exits 0; the output is stdout then stderr, with the reason appended when it
    could not finish; and its exit status."""
    done = await run_process(
        [str(path)],
        cwd=cwd,
        env=env,
        stdin=None,
        timeout_ms=timeout_ms,
        stdout_limit=OUTPUT_LIMIT,
        stdout_fail_over=False,
        stderr_limit=OUTPUT_LIMIT,
    )
    if done.spawn_error is not None:
        return False, f"cannot start tests/{path.name}: {done.spawn_error.strerror or done.spawn_error}", None
    output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
    if done.failure is not None:
        if done.timed_out:
            reason = f"timeout: tests/{path.name} ran longer than {timeout_ms} ms and was killed"
        else:
            reason = f"tests/{path.name}: {done.failure}"
        return False, output + ("\n" if output and not output.endswith("\n") else "") + reason, None
    if done.signal:
        return False, output + f"\ntests/{path.name} was killed by {done.signal}", None
    return done.returncode == 0, output, done.returncode
