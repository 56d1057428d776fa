"""Fixtures for the console's Pilot and snapshot tests: real workspaces, real engines, real git.

- `isolated_env`: the environment every engine and git command of these tests runs with (HOME in
  tmp, an empty global git config, no EVOLVE_*/OPENCODE_*/GIT_* variables of the developer).
- `workspace`: the example workspace made by `python -m engine init` (once per session, copied for
  each test, git history included).
- `start_engine`: starts `python -m engine serve` for a workspace (with extra environment), waits for
  state/engine.json and /v1/health, and stops every engine it started at teardown.
- `engine`: `start_engine(workspace)` for tests that need nothing special; `engine.target` is the
  console's Target (url, token, workspace).

The helpers below (EngineProcess, wait_until, select_row, ...) are imported by the test modules.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Textual reads TEXTUAL_* (theme, colour system, animations, dim factor...) when it is imported:
# drop the developer's settings before any test module imports it.
for _key in [k for k in os.environ if k.startswith("TEXTUAL_")] + ["NO_COLOR", "FORCE_COLOR"]:
    os.environ.pop(_key, None)

import httpx  # noqa: E402
import pytest  # noqa: E402
from rich.text import Text  # noqa: E402
from textual.pilot import Pilot  # noqa: E402
from textual.widget import Widget  # noqa: E402

from evolve_console.app import EvolveConsole  # noqa: E402
from evolve_console.client import Target  # noqa: E402
from evolve_console.table import KeyedTable  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EVOLVE = [sys.executable, "-m", "engine"]
START_TIMEOUT = 20.0


# ---- environment and git ---------------------------------------------------------------------------


def make_isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of engines and git commands: nothing of the developer's leaks in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EVOLVE_", "OPENCODE_", "GIT_", "TEXTUAL_", "XDG_"))
    }
    home.mkdir(parents=True, exist_ok=True)
    gitconfig = home / "empty.gitconfig"
    gitconfig.touch()
    env.update(
        HOME=str(home),
        GIT_CONFIG_GLOBAL=str(gitconfig),
        GIT_CONFIG_NOSYSTEM="1",
        XDG_CONFIG_HOME=str(home / ".config"),
        PYTHONPATH=str(REPO),
    )
    env.update(extra)
    return env


def run_git(cwd: Path, *args: str, env: dict[str, str], check: bool = True) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def write_hook(workspace: Path, name: str, source: str) -> Path:
    """A hook script in hooks/, executable (mode 755)."""
    path = workspace / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    path.chmod(0o755)
    return path


# ---- a real engine as a subprocess -----------------------------------------------------------------


class EngineProcess:
    """`python -m engine serve --workspace DIR` and a small synchronous client of its API."""

    def __init__(self, workspace: Path, env: dict[str, str], log: Path) -> None:
        self.workspace = workspace
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""
        self.pid = 0

    @property
    def target(self) -> Target:
        return Target(self.url, self.token, str(self.workspace))

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def start(self, port: int | None = None) -> EngineProcess:
        """Start the engine and wait until it announces itself and answers /v1/health."""
        announcement = self.workspace / "state" / "engine.json"
        cmd = [*EVOLVE, "serve", "--workspace", str(self.workspace)]
        if port is not None:
            cmd += ["--port", str(port)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=self.workspace, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"the engine exited {self.proc.returncode} at start:\n{self.log_tail()}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                data = json.loads(announcement.read_text(encoding="utf-8"))
                if data["pid"] == self.proc.pid:
                    self.url, self.token, self.pid = data["url"], data["token"], data["pid"]
                    with contextlib.suppress(httpx.HTTPError):
                        if self.request("GET", "/v1/health", check=False).status_code == 200:
                            return self
            if time.monotonic() > deadline:
                raise AssertionError(f"the engine did not start in {START_TIMEOUT:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """POST /v1/shutdown, then kill it if it has not exited within 10 s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(httpx.HTTPError):
            self.request("POST", "/v1/shutdown", check=False, timeout=5)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def kill(self) -> None:
        """SIGKILL: the engine dies as in a crash, without its shutdown."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def wait_exit(self, timeout: float) -> None:
        """Wait for the engine process to end by itself (after `evolve stop`)."""
        if self.proc is not None:
            self.proc.wait(timeout)
            self.proc = None

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`python -m engine ARGS --workspace WS` with the engine's environment."""
        proc = subprocess.run(
            [*EVOLVE, *args, "--workspace", str(self.workspace)],
            env=self.env,
            cwd=self.workspace,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0:
            raise AssertionError(f"evolve {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no engine log)"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        check: bool = True,
        timeout: float = 60,
    ) -> httpx.Response:
        resp = httpx.request(
            method,
            self.url + path,
            json=body,
            params=params,
            headers={"authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )
        if check and resp.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {resp.status_code}: {resp.text[:2000]}")
        return resp

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body if body is not None else {}).json()

    def stage(self, stage: str, context: dict[str, Any], session: str | None = None) -> dict[str, Any]:
        """Dispatch a stage; `with_runs` makes the engine flush its journal before it answers, so
        the runs are readable at once."""
        body = {"context": context, "session": session, "with_runs": True}
        result: dict[str, Any] = self.post(f"/v1/stages/{stage}", body)
        return result

    def call_tool(self, name: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """A tool call through the API, as the shim makes it (origin "tool" unless given)."""
        result: dict[str, Any] = self.post(f"/v1/tools/{name}/call", {"args": args, **extra})
        return result

    def git(self, *args: str, check: bool = True) -> str:
        return run_git(self.workspace, *args, env=self.env, check=check)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()


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
