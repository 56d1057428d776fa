"""A test run leaves nothing behind in HOME or the temporary directory: a check after the last test
that fails the run naming what was left (a pytest plugin, loaded by tests/conftest.py).

- **The temporary directory.** Every test of the run, and every process a test starts (engines,
  hooks, git, opencode, the demo), gets a temporary directory of the run's own as TMPDIR, inside the
  run's `evolve-tests-*` directory: what is still in it after the last test was left by a test (the
  system's /tmp is shared with everything else on the machine, so only this one says whose it is).
- **HOME.** What is new after the last test, at the top of HOME and one level into its XDG
  directories (`~/.config`, `~/.cache`, `~/.local/share`, `~/.local/state`), was left by a test
  (another program writing there at the same moment would be named too); npm's and pip's caches are
  theirs to fill (README, "What is kept where").

The check runs after a run whose tests all passed (a failed one keeps its files to be looked at): as
an error at the teardown of the last test, which names each path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

XDG = (".config", ".cache", ".local", ".local/share", ".local/state")
TOOL_CACHES = (".npm", ".cache/pip")
"""What npm and pip keep in HOME when a test runs them: theirs (README, "What is kept where")."""


def home_entries(home: Path) -> set[str]:
    """The top of HOME and one level into its XDG directories, as paths relative to HOME."""
    found: set[str] = set()
    for folder in ("", *XDG):
        try:
            names = os.listdir(home / folder)
        except OSError:
            continue
        found.update(f"{folder}/{name}" if folder else name for name in names)
    return found


def left_in_home(before: set[str], home: Path) -> list[str]:
    """What is new in HOME since `before`, but the tool caches and directories made only to hold one."""
    new = home_entries(home) - before

    def theirs(entry: str) -> bool:
        if any(entry == cache or entry.startswith(f"{cache}/") for cache in TOOL_CACHES):
            return True
        holds_a_cache = any(cache.startswith(f"{entry}/") for cache in TOOL_CACHES)
        return holds_a_cache and all(theirs(inner) for inner in new if inner.startswith(f"{entry}/"))

    return sorted(f"~/{entry}" for entry in new if not theirs(entry))


def left_in(directory: Path) -> list[str]:
    """Everything in `directory`, a path for each entry at its top."""
    try:
        return sorted(str(directory / name) for name in os.listdir(directory))
    except OSError:
        return []


def report(in_home: list[str], in_temp: list[str]) -> str:
    lines = ["the test run left files behind (a test must remove what it makes, and stop what it starts):"]
    lines += [f"  in HOME: {path}" for path in in_home]
    lines += [f"  in the temporary directory: {path}" for path in in_temp]
    return "\n".join(lines)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    home = Path.home()
    before = home_entries(home)
    temp = tmp_path_factory.mktemp("TMPDIR", numbered=False)
    previous = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = str(temp)
    tempfile.tempdir = str(temp)
    try:
        yield
    finally:
        if previous[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous[0]
        tempfile.tempdir = previous[1]
    if request.session.testsfailed:
        return
    in_home, in_temp = left_in_home(before, home), left_in(temp)
    if in_home or in_temp:
        pytest.fail(report(in_home, in_temp), pytrace=False)
