"""Fixtures for the console's Pilot and snapshot tests: real workspaces, real engines, real git.

- `isolated_env`: the environment every engine and git command of these tests runs with (HOME in
  tmp, an empty global git config, no EVOLVE_*/OPENCODE_*/GIT_* variables of the developer).
- `workspace`: the example workspace made by `python -m engine init` (once per session, copied for
  each test, git history included).
- `start_engine`: starts `python -m engine serve` for a workspace (with extra environment), waits for
  state/engine.json and /v1/health, and stops every engine it started at teardown.
- `engine`: `start_engine(workspace)` for tests that need nothing special; `engine.target` is the
  console's Target (url, token, workspace).

The helpers below (wait_until, select_row, ...) are imported by the test modules; the engine process
itself is tests.support.engine_process.EngineProcess.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import subprocess
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.geometry import Region
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widget import Widget

import tests.support.textual_env  # noqa: F401  (before Textual is imported)
from evolve_console.app import EvolveConsole
from evolve_console.detail import DetailPane
from evolve_console.table import KeyedTable
from tests.support import environment
from tests.support.engine_process import START_TIMEOUT, EngineProcess
from tests.support.environment import EVOLVE, REPO


def make_isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of engines and git commands: nothing of the developer's leaks in."""
    return environment.isolated_env(home, PYTHONPATH=str(REPO), **extra)


def write_hook(workspace: Path, name: str, source: str) -> Path:
    """A hook script in hooks/, executable (mode 755)."""
    path = workspace / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    path.chmod(0o755)
    return path


# ---- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    return make_isolated_env(tmp_path / "home")


def init_workspace(root: Path, env: dict[str, str]) -> Path:
    proc = subprocess.run(
        [*EVOLVE, "init", str(root)], env=env, cwd=REPO, capture_output=True, text=True, timeout=60
    )
    if proc.returncode != 0:
        raise AssertionError(f"evolve init exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return root


@pytest.fixture(scope="session")
def example_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `evolve init` per session; tests get copies (init costs a second, a copy almost nothing)."""
    base = tmp_path_factory.mktemp("example")
    return init_workspace(base / "ws", make_isolated_env(base / "home"))


@pytest.fixture
def workspace(tmp_path: Path, example_workspace: Path) -> Path:
    """The example workspace as `evolve init` creates it (git history included), for this test only."""
    return Path(shutil.copytree(example_workspace, tmp_path / "ws", symlinks=True))


StartEngine = Callable[..., EngineProcess]


@pytest.fixture
def start_engine(tmp_path: Path, isolated_env: dict[str, str]) -> Iterator[StartEngine]:
    """`start_engine(workspace, EVOLVE_X="1", ...)` -> a running EngineProcess; all stopped at teardown."""
    started: list[EngineProcess] = []

    def start(workspace: Path, **env: str) -> EngineProcess:
        engine = EngineProcess(workspace, {**isolated_env, **env}, tmp_path / f"engine-{len(started)}.log")
        started.append(engine)
        return engine.start()

    yield start
    for engine in started:
        engine.stop()


@pytest.fixture
def engine(workspace: Path, start_engine: StartEngine) -> EngineProcess:
    """A running engine for the example workspace; `engine.target` is what the console attaches to."""
    return start_engine(workspace)


# ---- driving the console ----------------------------------------------------------------------------


async def wait_until(
    pilot: Pilot[Any],
    probe: Callable[[], Any],
    what: str | Callable[[], str],
    timeout: float = 10.0,
    interval: float = 0.05,
) -> Any:
    """Poll `probe` (sync or async) between screen updates until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {detail}")
        await pilot.pause(interval)


async def settle(pilot: Pilot[Any]) -> None:
    """Let every worker except the long-lived event-stream follower finish."""
    app = pilot.app
    for _ in range(50):
        await pilot.pause()
        busy = [w for w in app.workers if w.group != "engine-stream" and not w.is_finished]
        if not busy:
            return
        await app.workers.wait_for_complete(busy)
    raise AssertionError("the console's workers never settled")


async def connected(pilot: Pilot[Any], timeout: float = START_TIMEOUT) -> None:
    """Wait until the console has loaded everything from the engine once."""
    app = pilot.app
    assert isinstance(app, EvolveConsole)
    await wait_until(
        pilot,
        lambda: app.engine_connected and app.first_load.is_set(),
        lambda: f"the console to connect (connection bar: {connection_text(app)!r})",
        timeout,
    )
    await settle(pilot)


def text_of(widget: Widget) -> str:
    """The plain text a widget shows (a Static, a Label, or any widget rendering text)."""
    rendered = widget.render()
    return rendered.plain if isinstance(rendered, Text) else str(rendered)


def drawn(widget: Widget) -> str:
    """The lines a line-drawn widget (a table, a detail pane) draws now, as the screen gets them."""
    size = widget.outer_size
    return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, size.width, size.height)))


def connection_text(app: EvolveConsole) -> str:
    return text_of(app.query_one("#connection"))


def row_keys(table: KeyedTable) -> list[str]:
    return table.keys()


def cell_text(table: KeyedTable, key: str, column: str) -> str:
    return str(table.get_cell(key, column))


async def select_row(pilot: Pilot[Any], table: KeyedTable, key: str) -> None:
    """Move the table's cursor to the row `key` with the arrow keys, as an operator would."""
    table.focus()
    await pilot.pause()
    target = table.get_row_index(key)
    for _ in range(table.row_count + 1):
        if table.cursor_row == target:
            return
        await pilot.press("down" if table.cursor_row < target else "up")
    raise AssertionError(f"the cursor never reached row {key} (at {table.cursor_row}, want {target})")


# ---- driving the console against an engine ----------------------------------------------------

SIZE = (140, 40)
Scenario = Callable[[EvolveConsole, Pilot[Any], list[Message]], Coroutine[Any, Any, None]]


def drive(engine: EngineProcess, scenario: Scenario) -> list[Message]:
    """Run the console attached to `engine` and play `scenario` on it; returns the messages seen."""
    seen: list[Message] = []

    async def main() -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await connected(pilot)
            await scenario(app, pilot, seen)
            await settle(pilot)
        assert app.return_code in (None, 0), f"the console exited with {app.return_code}"

    asyncio.run(main())
    return seen


def notifications(seen: list[Message]) -> list[tuple[str, str, str]]:
    """(severity, title, message) of every notification the console raised."""
    return [
        (m.notification.severity, m.notification.title, m.notification.message)
        for m in seen
        if isinstance(m, Notify)
    ]


def errors_shown(seen: list[Message]) -> list[tuple[str, str, str]]:
    return [n for n in notifications(seen) if n[0] == "error"]


def detail_text(app: EvolveConsole, pane: str, part: str) -> str:
    """What a detail pane shows for one of its parts (cut and cleaned as on screen)."""
    return app.query_one(f"#{pane}", DetailPane).bodies.get(part, "")


def table(app: EvolveConsole, name: str) -> KeyedTable:
    return app.query_one(f"#{name}-table", KeyedTable)


def edit_prompt(
    engine: EngineProcess, old: str, new: str, prompt: str = "chat.md", **extra: Any
) -> dict[str, Any]:
    """evolve_prompt_edit through the API (as the operator unless `extra` says otherwise)."""
    extra.setdefault("origin", "operator")
    return engine.call_tool(
        "evolve_prompt_edit", {"prompt": prompt, "oldString": old, "newString": new}, **extra
    )
