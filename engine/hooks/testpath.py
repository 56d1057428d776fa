"""Where a hook's declared test runs, and the rule that keeps it in `tests/`.

A hook names its test in its `discover` answer, in one of three forms:

- a file name in `tests/` (`notes_test.py`, or `sub/notes_test.py`): opencode-evolve's form;
- a path relative to the workspace (`tests/hello_test.sh`): a command of one word, hcp's form;
- a command whose words are split as a shell splits them (`python3 tests/x.py`): hcp's form, a
  program (found on PATH, or an absolute path outside the workspace) and its arguments, one of
  which is the script; or the script itself first (`tests/run.sh --quick`).

Whatever the form, the script must resolve (links followed) inside `tests/` of the workspace, and
so must every argument that names a path (has a `/`): a test that leads out of it (`../../x.sh`,
`tests/../../x`, a link in `tests/` to a file elsewhere) is refused, before anything is made
executable or run.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path


class TestRefused(ValueError):
    """The declared test cannot be run: it leads out of `tests/`, or it names no script there."""


@dataclass(frozen=True)
class TestCommand:
    argv: list[str]  # what runs, with the workspace (or its copy) as the working directory
    script: Path  # the script in tests/ (absolute)
    runs_script: bool  # argv[0] is the script itself (it must be executable), not a program given it
    shown: str  # the script as the workspace names it, for messages: tests/<...>


def _inside(path: str, tests: str) -> bool:
    return path == tests or path.startswith(tests + os.sep)


def test_command(root: Path, test: str) -> TestCommand:
    """The test `test` of a hook, to run in the workspace (or the copy of it) at `root`. Raises
    TestRefused with the reason when it leads out of `tests/` or names no script in it. A script
    that does not exist is not refused here (running it says so)."""
    tests = os.path.realpath(root / "tests")
    real_root = os.path.realpath(root)

    def resolve(word: str, base: str) -> str:
        return os.path.realpath(os.path.join(base, word))

    def shown(path: str) -> str:
        return os.path.relpath(path, real_root)

    if not test.strip():
        raise TestRefused("the test is empty")
    if not any(c.isspace() for c in test):
        if "/" in test and not os.path.lexists(root / "tests" / test) and os.path.lexists(root / test):
            script = resolve(test, real_root)  # hcp's: relative to the workspace
        else:
            script = resolve(test, tests)  # opencode-evolve's: a file in tests/
        if not _inside(script, tests):
            raise TestRefused(f"the test {test!r} leads out of tests/ (to {script}): refused")
        return TestCommand([script], Path(script), True, shown(script))
    try:
        words = shlex.split(test)
    except ValueError as exc:
        raise TestRefused(f"the test command {test!r} does not parse: {exc}") from None
    if not words:
        raise TestRefused("the test is empty")
    program, args = words[0], words[1:]
    found: str | None = None
    runs_script = False
    if "/" in program:
        where = resolve(program, real_root)
        if os.path.isabs(program) and not _inside(where, real_root):
            pass  # a program of the system (an interpreter): its script must be among the arguments
        elif _inside(where, tests):
            found, runs_script = where, True
        else:
            raise TestRefused(f"the test command {test!r} runs {program}, which is not in tests/: refused")
    for arg in args:
        if "/" not in arg:
            continue
        path = resolve(arg, real_root)
        if not _inside(path, tests):
            raise TestRefused(f"the test command {test!r} names {arg}, which leads out of tests/: refused")
        if found is None and os.path.isfile(path):
            found = path
    if found is None:
        raise TestRefused(f"the test command {test!r} runs no script in tests/: refused")
    argv = [found if runs_script else program, *args]
    return TestCommand(argv, Path(found), runs_script, shown(found))
