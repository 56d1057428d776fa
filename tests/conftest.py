"""Every test's temporary files live in one directory of this run (`evolve-tests-*` in the system temp
directory), removed when the run passes: a green run leaves nothing behind (pytest itself would keep
the last three runs' files, a few hundred MB with the end-to-end tests). A failed run keeps it and
says where. `--basetemp=DIR` puts the tests' files in DIR and keeps them. Under pytest-xdist the first
process makes the directory and each worker has its own part of it (basetemp/gw0, ...).

Nothing is written into the checkout: Python's compiled modules (of this process, of the xdist workers
and of every engine and command the tests start, which inherit PYTHONPYCACHEPREFIX) go into the run's
directory, and a run that created anything in the checkout fails, naming it (tests/support/checkout.py).

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
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before anything of the checkout is imported (the imports below compile it). An xdist worker, or a
# pytest a test starts, finds the run's directory in the environment it inherited.
RUN_VARIABLE = "EVOLVE_TESTS_RUN_DIR"
_OWN_RUN = RUN_VARIABLE not in os.environ
if _OWN_RUN:
    os.environ[RUN_VARIABLE] = tempfile.mkdtemp(prefix="evolve-tests-")
RUN_DIR = Path(os.environ[RUN_VARIABLE])
# scripts/test.sh gives its passes one directory for them (EVOLVE_TESTS_PYCACHE): the second pass, and
# the first one's workers after a collection beside mypy, then start with everything compiled.
PYCACHE = os.environ.get("EVOLVE_TESTS_PYCACHE") or str(RUN_DIR / "pycache")
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"] = PYCACHE
# Compiled modules are written there, whatever the environment says: with PYTHONDONTWRITEBYTECODE (or
# `python -B`) and a prefix, every process the run starts (the workers, each engine, console and
# command) would compile all it imports, its libraries too, anew: 1.8 s of CPU for an engine instead of
# 0.5 s.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from tests.support.checkout import created, listing  # noqa: E402
from tests.support.environment import REPO, drop_shims  # noqa: E402
from tests.support.warm import VARIABLE, WarmLoop, warm_enabled  # noqa: E402

# Hooks start as `#!/usr/bin/env python3`: through a version manager's shim (pyenv's is a shell script
# that runs a dozen more) each start costs ~90 ms more CPU, paid thousands of times in a run. Every
# process of the run gets PATH without the shims, when a python3 remains on it.
_PATH = os.environ.get("PATH", "")
if drop_shims(os.environ) == "?":
    os.environ["PATH"] = _PATH
HOOK_PYTHON = shutil.which("python3") or "none on PATH"

pytest_plugins = [
    "tests.support.leftovers",  # after the last test: nothing left in HOME or TMPDIR
    "tests.support.tiers",  # after the run: the time each tier took
    "tests.support.groups",  # under xdist: the tests of an xdist_group in one worker
]

_FAILED = pytest.StashKey[bool]()
_OWN_BASETEMP = pytest.StashKey[bool]()
_CHECKOUT = pytest.StashKey[set[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--warm-start",
        choices=("on", "off"),
        default="on",
        help="run the tests with warm starts of Python hooks on (default, as in production) or off",
    )


def _first_process(config: pytest.Config) -> bool:
    """This process runs the session (alone, or as xdist's controller), not an xdist worker."""
    return not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    os.environ[VARIABLE] = "1" if config.getoption("--warm-start") == "on" else "0"
    if config.option.basetemp is None and _first_process(config):
        config.option.basetemp = str(RUN_DIR / "tmp")
        config.stash[_OWN_BASETEMP] = True


# Under pytest-xdist the run lasts as long as its last test to end: the slowest start first (the demo in a
# terminal alone takes minutes, and the end-to-end tests each tens of seconds), the quick ones fill in.
SLOW_FIRST = (
    "tests/e2e/test_demo.py",
    "tests/e2e/",
    "tests/project/test_docs.py",
    "tests/project/test_packaging.py",
    "tests/engine/test_cli.py",
    "tests/console/",
    "tests/engine/",
    "tests/project/",
)


def _rank(item: pytest.Item) -> int:
    path = Path(str(item.path)).resolve()
    if not path.is_relative_to(REPO):
        return len(SLOW_FIRST)
    rel = path.relative_to(REPO).as_posix()
    return next((i for i, prefix in enumerate(SLOW_FIRST) if rel.startswith(prefix)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _first_process(config):  # every worker sorts alike: xdist needs one order
        items.sort(key=_rank)


def pytest_sessionstart(session: pytest.Session) -> None:
    if _first_process(session.config):
        session.config.stash[_CHECKOUT] = listing()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_CHECKOUT, None)
    if before is not None:
        new = created(before, listing())
        if new:
            session.config.get_terminal_writer().line(
                "\nthe test run created these in the checkout (tests must write only in their temporary "
                "directories):\n  " + "\n  ".join(new),
                red=True,
            )
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    status = session.exitstatus
    session.config.stash[_FAILED] = status not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not (_OWN_RUN and _first_process(config)):
        return
    if config.stash.get(_FAILED, False) and config.stash.get(_OWN_BASETEMP, False):
        print(f"\nthe temporary files of this run are kept in {RUN_DIR}")
    else:
        shutil.rmtree(RUN_DIR, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    return f"warm starts of Python hooks: {config.getoption('--warm-start')}; python3 on PATH: {HOOK_PYTHON}"


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
