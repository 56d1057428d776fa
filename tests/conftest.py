"""The test run's switch for warm starts of Python hooks (docs/hooks.md, "Warm start").

`pytest --warm-start=off` runs every test with warm starts off; `on`, the default, with them on, as
in production. The option sets EVOLVE_HOOK_WARM_START for the whole run: every engine a test starts
reads it, in this process or as a subprocess (tests/support/environment.py passes it on), and the
tests that run hooks through engine.runner directly ask tests/support/warm.py. With warm starts on,
an engine started in this process waits after its start for the interpreters its discovery asked
for, so that the hooks of the test run warm rather than cold while one is starting.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.warm import VARIABLE, WarmLoop, warm_enabled


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--warm-start",
        choices=("on", "off"),
        default="on",
        help="run the tests with warm starts of Python hooks on (default, as in production) or off",
    )


def pytest_configure(config: pytest.Config) -> None:
    os.environ[VARIABLE] = "1" if config.getoption("--warm-start") == "on" else "0"


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
