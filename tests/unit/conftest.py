"""The fast tier: tests that start no process (no hook, no git, no engine, no opencode), run before
every commit with `./scripts/test.sh --fast`.

The tier is enforced, not promised: every test here runs with process creation refused (fork, exec,
spawn, subprocess, asyncio's subprocesses), and one that tries fails, naming the tier it belongs in.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tests.support.textual_env  # noqa: F401  (before Textual is imported)


class StartsAProcess(AssertionError):
    pass


def _refuse(what: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise StartsAProcess(
            f"a test in tests/unit started a process ({what}): the fast tier starts none; move the test "
            "to tests/engine, tests/console or tests/project"
        )

    return refused


@pytest.fixture(autouse=True)
def _no_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse("subprocess"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))
    yield
