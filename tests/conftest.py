"""Every test's temporary files live in one directory of this run (`evolve-tests-*` in the system temp
directory), removed when the run passes: a green run leaves nothing behind (pytest itself would keep
the last three runs' files, a few hundred MB with the end-to-end tests). A failed run keeps it and
says where. `--basetemp=DIR` puts them in DIR and keeps them.

The test run's switch for warm starts of Python hooks (docs/hooks.md, "Warm start").

`pytest --warm-start=off` runs every test with warm starts off; `on`, the default, with them on, as
in production. The option sets EVOLVE_HOOK_WARM_START for the whole run: every engine a test starts
reads it, in this process or as a subprocess (tests/support/environment.py passes it on), and the
tests that run hooks through engine.runner directly ask tests/support/warm.py. With warm starts on,
an engine started in this process waits after its start for the interpreters its discovery asked
for, so that the hooks of the test run warm rather than cold while one is starting.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.warm import VARIABLE, WarmLoop, warm_enabled

pytest_plugins = ["tests.support.leftovers"]  # after the last test: nothing left in HOME or TMPDIR

_OWN_BASETEMP = pytest.StashKey[str]()
_FAILED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--warm-start",
        choices=("on", "off"),
        default="on",
        help="run the tests with warm starts of Python hooks on (default, as in production) or off",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    os.environ[VARIABLE] = "1" if config.getoption("--warm-start") == "on" else "0"
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        base = tempfile.mkdtemp(prefix="evolve-tests-")
        config.option.basetemp = base
        config.stash[_OWN_BASETEMP] = base


def pytest_unconfigure(config: pytest.Config) -> None:
    base = config.stash.get(_OWN_BASETEMP, None)
    if base is None:
        return
    if config.stash.get(_FAILED, False):
        print(f"\nthe temporary files of this run are kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_FAILED] = exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)


def pytest_report_header(config: pytest.Config) -> str:
    return f"warm starts of Python hooks: {config.getoption('--warm-start')}"


@pytest.fixture(scope="session", autouse=True)
def _engines_wait_for_their_warm_starts() -> Iterator[None]:
    if not warm_enabled():
        yield
        return
    from engine.runtime import Engine

    start = Engine.start

    async def start_then_wait(self: Engine, watch: bool = False, heartbeat: bool = False) -> None:
        await start(self, watch=watch, heartbeat=heartbeat)
        if self.warm is not None:
            await self.warm.ready()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Engine, "start", start_then_wait)
        yield


@pytest.fixture(scope="session")
def warm_loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmLoop | None]:
    """Ready interpreters shared by the tests that run hooks through engine.runner directly, or None
    when the run has warm starts off."""
    if not warm_enabled():
        yield None
        return
    loop = WarmLoop(Path(tmp_path_factory.mktemp("warm")))
    try:
        yield loop
    finally:
        loop.close()
