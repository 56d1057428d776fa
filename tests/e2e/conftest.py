"""Fixtures for end-to-end tests against the real opencode binary (see README.md beside this file).

- `opencode_bin` (session): installs opencode-ai@1.18.33 into .cache/ with npm (evolve_demo.opencode_setup),
  unless it is there; skipped when it is not and npm is missing.
- `oc_home` (session): one isolated HOME/XDG_* tree for every opencode started by these tests, so that
  opencode's one-time npm install of @opencode-ai/plugin into $XDG_CONFIG_HOME/opencode is paid once.
- `mock` (test): the scripted model (evolve_demo.scripted_model.MockLLM), which records what opencode
  sends and answers from a script.
- `make_project` / `project` (test): a git-initialised opencode project directory whose opencode.json
  points at the mock and loads the evolve shim, plus an evolve workspace made by `evolve init`.
  Teardown stops every `opencode serve` the test started, then the engine the shim started.
- `shared_opencode` (session): one `opencode serve` per worker, started on first use, that
  `project.serve()` hands each test's project as a directory of its own (opencode keeps an instance
  with its own configuration and plugin per directory, as its web and desktop clients use it). A
  start costs opencode ~2 CPU-s and its first prompt in a process another ~1.5: most of an e2e
  test's CPU. `project.serve(own=True)` starts a server of the test's own, for the tests that stop,
  kill or restart opencode.

Set E2E_PRINT_LOGS=1 to run opencode with --print-logs (its log then lands in the captured stderr).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from engine.journal.store import Journal
from evolve_demo import opencode_setup
from evolve_demo.scripted_model import MockLLM, Request
from tests.support.engine_process import announcement, stop_workspace_engine
from tests.support.environment import EVOLVE, REPO, without_settings
from tests.support.opencode import install_opencode, keep_seed, make_home, mock_provider, opencode_env
from tests.support.processes import end, free_port
from tests.support.waiting import wait_for

RUN_TIMEOUT = float(os.environ.get("E2E_RUN_TIMEOUT", "120"))
PRINT_LOGS = os.environ.get("E2E_PRINT_LOGS", "") not in ("", "0")

T = TypeVar("T")
HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end test against the real opencode binary (slow)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test in this directory is marked `e2e`, so `pytest -m "not e2e"` skips them all."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


# ---- helpers ---------------------------------------------------------------------------------------


def evolve(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the evolve CLI of this checkout (the same command the shim is configured with)."""
    proc = subprocess.run(
        [*EVOLVE, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=without_settings()
    )
    if check and proc.returncode != 0:
        pytest.fail(f"evolve {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def evolve_here(*args: str) -> str:
    """`evolve ARGS` run in this process, through the command line's own parser and command function
    (what `python -m engine ARGS` runs, without a new Python importing the engine: ~0.5 s of CPU a
    call); its output. For the set-up of a test's project, which no test here is about
    (tests/engine/test_cli.py runs these commands as processes)."""
    from engine.cli.parser import build_parser

    parsed = build_parser().parse_args(list(args))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = parsed.func(parsed)
    if code != 0:
        pytest.fail(f"evolve {' '.join(args)} exited {code}:\n{out.getvalue()}\n{err.getvalue()}")
    return out.getvalue()


def describe(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str]) -> str:
    out = getattr(proc, "stdout", "")
    err = getattr(proc, "stderr", "")
    return f"exit {proc.returncode}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"


# ---- reading what the mock LLM received ---------------------------------------------------------------


def hook_system(project: Project) -> list[str]:
    """The system prompt the example hook composes (mutate_request), computed before the run."""
    result = project.stage("mutate_request", {"session": {"id": "x"}, "system": ["s"]})
    system = result.get("system")
    assert isinstance(system, list) and len(system) == 1 and system[0].strip(), result
    return system


def tool_results(req: Request) -> dict[str, str]:
    """Tool call id -> the tool result text opencode sent in this request."""
    return {
        str(m.get("tool_call_id")): m["content"]
        if isinstance(m["content"], str)
        else json.dumps(m["content"])
        for m in req.messages
        if m.get("role") == "tool"
    }


def tool_call_ids(req: Request, name: str) -> list[str]:
    """Ids of the calls of tool `name` made by assistant messages in this request's history."""
    return [
        str(c["id"])
        for m in req.messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
        if c.get("function", {}).get("name") == name
    ]


def last_user_text(req: Request) -> str:
    users = [m for m in req.messages if m.get("role") == "user"]
    assert users, req.messages
    content = users[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def trailers(commit: str) -> dict[str, str]:
    out = {}
    for line in commit.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Evolve-"):
            out[key] = value
    return out


def session_of(req: Request) -> str:
    sid = req.session
    assert sid and sid.startswith("ses_"), req.headers
    return sid


# ---- opencode, its home and the mock LLM -------------------------------------------------------------


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    if shutil.which("npm") is None and opencode_setup.installed_binary() is None:
        pytest.skip("npm is needed to install opencode for the end-to-end tests (apt-get install npm)")
    try:
        return install_opencode()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def oc_home(tmp_path_factory: pytest.TempPathFactory, opencode_bin: Path) -> Iterator[Path]:
    """One isolated HOME for the whole session, so that opencode's one-time install of
    @opencode-ai/plugin is paid once (and, through the seed it leaves in .cache/, once per machine)."""
    # The seed is made once, under a lock, before any opencode starts: in a parallel run on a clean
    # machine every worker's first opencode would otherwise install the plugin itself, all at once.
    with contextlib.suppress(opencode_setup.SetupError):
        opencode_setup.prepare_seed(quiet=True)
    home = tmp_path_factory.mktemp("opencode-home")
    make_home(home)
    yield home
    keep_seed(home)


@pytest.fixture
def mock() -> Iterator[MockLLM]:
    llm = MockLLM()
    try:
        yield llm
    finally:
        llm.close()


# ---- a project with the shim installed ------------------------------------------------------------


def start_serve(bin: Path, port: int, log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`opencode serve --port PORT` in `cwd`, its output in `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(bin), "serve", "--port", str(port), "--hostname", "127.0.0.1"]
            + (["--print-logs"] if PRINT_LOGS else []),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def log_tail(log: Path, lines: int = 60) -> str:
    """The last `lines` of an `opencode serve` log, headed, for a failure's message."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "--- opencode serve log (tail) ---\n" + "\n".join(text.splitlines()[-lines:])


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    def healthy() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"opencode serve exited {proc.returncode}\n{log_tail(log)}")
        try:  # short per-request timeouts: the first requests after start-up can hang
            return httpx.get(f"{url}/global/health", timeout=2.0, verify=False).json().get("healthy") is True
        except (httpx.HTTPError, ValueError):
            return False

    wait_for("opencode serve to answer /global/health", healthy, timeout=60, interval=0.2)


class SharedOpencode:
    """The worker's `opencode serve`, started on first use (again if it died) in a directory of its
    own; each project reaches it with its own x-opencode-directory. It stops once no test has used
    it for IDLE_STOP seconds: with a dozen instances it takes ~0.1 of a core while idle, and a
    worker's e2e tests run before its other tests (SLOW_FIRST in tests/conftest.py)."""

    IDLE_STOP = 15.0

    def __init__(self, bin: Path, home: Path, base: Path) -> None:
        self.bin = bin
        self.home = home
        self.base = base
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = base / "serve.log"
        self.lock = threading.Lock()
        self.idle: threading.Timer | None = None
        self.users = 0

    def running(self) -> tuple[subprocess.Popen[bytes], int, Path]:
        with self.lock:
            if self.idle is not None:
                self.idle.cancel()
                self.idle = None
            if self.proc is None or self.proc.poll() is not None:
                self.port = free_port()
                self.log = self.base / f"serve-{self.port}.log"
                env = opencode_env(without_settings(), self.home, self.base)
                self.proc = start_serve(self.bin, self.port, self.log, self.base, env)
                wait_healthy(self.proc, f"http://127.0.0.1:{self.port}", self.log)
            self.users += 1
            return self.proc, self.port, self.log

    def released(self) -> None:
        """A test is done with the server: stop it unless another uses it within IDLE_STOP seconds."""
        with self.lock:
            self.users -= 1
            if self.idle is not None:
                self.idle.cancel()
            self.idle = threading.Timer(self.IDLE_STOP, self.close, kwargs={"unless_used": True})
            self.idle.daemon = True
            self.idle.start()

    def close(self, unless_used: bool = False) -> None:
        with self.lock:
            if unless_used and self.users > 0:
                return
            if self.idle is not None:
                self.idle.cancel()
                self.idle = None
            if self.proc is not None:
                end(self.proc)


@pytest.fixture(scope="session")
def shared_opencode(
    tmp_path_factory: pytest.TempPathFactory, oc_home: Path, opencode_bin: Path
) -> Iterator[SharedOpencode]:
    shared = SharedOpencode(opencode_bin, oc_home, tmp_path_factory.mktemp("shared-opencode"))
    try:
        yield shared
    finally:
        shared.close()


class Serve:
    """A running `opencode serve --port N` for one project, driven over HTTP with httpx. `shared`:
    the worker's server (SharedOpencode), which this project uses as one directory among others;
    stopping it disposes of the project's instance and leaves the server running."""

    def __init__(
        self,
        project: Project,
        proc: subprocess.Popen[bytes],
        port: int,
        log: Path,
        shared: SharedOpencode | None = None,
    ) -> None:
        self.project = project
        self.proc = proc
        self.port = port
        self.log = log
        self.shared = shared
        self.stopped = False
        self.url = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(
            base_url=self.url,
            headers={"x-opencode-directory": str(project.dir)},
            timeout=httpx.Timeout(RUN_TIMEOUT, connect=3.0),
            verify=False,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp = self.http.request(method, path, **kwargs)
        if resp.status_code >= 400:
            pytest.fail(
                f"opencode {method} {path}: HTTP {resp.status_code}: {resp.text[:2000]}\n{self.tail()}"
            )
        return resp.json() if resp.content else None

    def create_session(self, title: str = "e2e") -> str:
        """A session with a title, so that opencode makes no title LLM call."""
        return str(self.request("POST", "/session", json={"title": title})["id"])

    def prompt(self, session: str, *text: str, **extra: Any) -> dict[str, Any]:
        """Send a user message and wait for the assistant's answer (the synchronous endpoint)."""
        body = {"parts": [{"type": "text", "text": " ".join(text)}], **extra}
        result: dict[str, Any] = self.request("POST", f"/session/{session}/message", json=body)
        return result

    def messages(self, session: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", f"/session/{session}/message")
        return result

    def quiet(self) -> None:
        """Wait until the engine has done what opencode handed it and no session of the project is
        busy: work of either that reaches the directory after its instance is disposed of makes
        opencode create the instance again."""
        self.project.settle()
        wait_for(
            "the project's sessions idle",
            lambda: not self.http.get("/session/status", timeout=5).json(),
            timeout=30,
            interval=0.1,
        )

    def tail(self, lines: int = 60) -> str:
        return log_tail(self.log, lines)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.shared is not None:
            # opencode disposes of the directory's instance: the shim says goodbye to its engine, as
            # it does when a server of its own exits. Nothing may reach this directory afterwards:
            # a request would load the shim again, and the shim starts an engine when none runs.
            with contextlib.suppress(httpx.HTTPError):
                self.quiet()
                # opencode reads the directory's configuration again right after disposing of its
                # instance, and a shim it loaded then would start the project's engine anew.
                self.project.unplug()
                self.http.post("/instance/dispose", timeout=30)
            self.http.close()
            self.shared.released()
            return
        self.http.close()
        end(self.proc)


@dataclass
class Project:
    dir: Path
    ws: Path
    mock: MockLLM
    home: Path
    bin: Path
    shared: SharedOpencode | None = None
    serves: list[Serve] = field(default_factory=list)
    unplugged: str | None = None  # opencode.json as it was before unplug()

    # ---- opencode ----------------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        return opencode_env(without_settings(), self.home, self.dir)

    def run_argv(self, words: tuple[str, ...]) -> list[str]:
        # Words as separate argv items: a single argument with spaces reaches the LLM in quotes.
        return [str(self.bin), "run", *(["--print-logs"] if PRINT_LOGS else []), *words]

    def run(
        self, *words: str, timeout: float = RUN_TIMEOUT, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """`opencode run <words…>` in the project directory; fails the test on a non-zero exit."""
        try:
            proc = subprocess.run(
                self.run_argv(words),
                cwd=self.dir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(
                f"opencode run {' '.join(words)} did not finish in {timeout:.0f} s\n"
                f"--- stdout ---\n{exc.stdout!r}\n--- stderr ---\n{exc.stderr!r}\n{self.shim_log()}"
            )
        if check and proc.returncode != 0:
            pytest.fail(f"opencode run {' '.join(words)}: {describe(proc)}\n{self.shim_log()}")
        self.settle()
        return proc

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the engine has finished what opencode handed it (it accepts finished responses,
        tool calls and events at once and works on them after opencode moved on, or exited) and its
        journal holds it."""
        if self.announcement() is None:
            return

        def idle() -> bool:
            try:
                return self.engine_api("/v1/status")["busy"] is False
            except (httpx.HTTPError, AssertionError):
                return True  # no engine answers: nothing is pending there

        wait_for("the engine to finish what opencode handed it", idle, timeout=timeout, interval=0.05)
        with contextlib.suppress(httpx.HTTPError, AssertionError):
            self.engine_api("/v1/dispatches?limit=1")  # returns once the journal holds what came before

    def start_run(self, *words: str) -> subprocess.Popen[str]:
        """`opencode run <words…>` in the background (read its output with communicate())."""
        return subprocess.Popen(
            self.run_argv(words),
            cwd=self.dir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @contextlib.contextmanager
    def serve(self, own: bool = False) -> Iterator[Serve]:
        """opencode's HTTP API for the project directory, healthy before it is yielded: the worker's
        shared `opencode serve`, or with `own` one started in the project directory for this test."""
        if self.unplugged is not None:
            (self.dir / "opencode.json").write_text(self.unplugged)
            self.unplugged = None
        if self.shared is not None and not own:
            proc, port, log = self.shared.running()
            server = Serve(self, proc, port, log, shared=self.shared)
        else:
            port = free_port()
            log = self.dir.parent / f"serve-{port}.log"
            proc = start_serve(self.bin, port, log, self.dir, self.env)
            server = Serve(self, proc, port, log)
            wait_healthy(proc, server.url, log)
        self.serves.append(server)
        try:
            yield server
        finally:
            server.stop()

    def unplug(self) -> None:
        """Take the shim out of the project's opencode.json (serve() puts it back)."""
        path = self.dir / "opencode.json"
        text = path.read_text()
        config = json.loads(text)
        config.pop("plugin", None)
        path.write_text(json.dumps(config, indent=2))
        self.unplugged = text

    # ---- the engine and its workspace ---------------------------------------------------------------

    def announcement(self) -> dict[str, Any] | None:
        return announcement(self.ws)

    def engine_api(self, path: str, method: str = "GET", **kwargs: Any) -> Any:
        found = self.announcement()
        assert found is not None, "no engine announced in state/engine.json"
        resp = httpx.request(
            method,
            found["url"] + path,
            headers={"authorization": f"Bearer {found['token']}"},
            timeout=10,
            **kwargs,
            verify=False,
        )
        resp.raise_for_status()
        return resp.json()

    @contextlib.contextmanager
    def journal(self) -> Iterator[Journal]:
        journal = Journal(self.ws / "state" / "journal.sqlite3")
        try:
            yield journal
        finally:
            journal.close()

    def poll_journal(self, what: str, probe: Callable[[Journal], T | None], timeout: float = 15.0) -> T:
        """Wait until `probe(journal)` is truthy: the engine writes its journal in the background."""
        with self.journal() as journal:
            return wait_for(what, lambda: probe(journal), timeout=timeout)

    def tools(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = json.loads(
            evolve("tools", "--json", "--workspace", str(self.ws)).stdout
        )
        return result

    def stage(self, stage: str, context: dict[str, Any]) -> dict[str, Any]:
        out = evolve("stage", stage, "--workspace", str(self.ws), "--input", json.dumps(context)).stdout
        result: dict[str, Any] = json.loads(out)
        return result

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.ws), *args], capture_output=True, text=True, check=True
        ).stdout

    def commits(self) -> list[str]:
        """Full messages of the workspace's commits, newest first."""
        out = self.git("log", "--format=%H%n%B%x00")
        return [c.strip() for c in out.split("\0") if c.strip()]

    def notes(self) -> list[dict[str, Any]] | None:
        path = self.ws / "notes" / "notes.json"
        if not path.is_file():
            return None
        notes: list[dict[str, Any]] = json.loads(path.read_text())["notes"]
        return notes

    def shim_log(self) -> str:
        parts = []
        for name in ("shim.log", "engine.log"):
            path = self.ws / "state" / name
            if path.is_file():
                lines = path.read_text(errors="replace").splitlines()[-30:]
                parts.append(f"--- {name} (tail) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop_engine(self) -> None:
        """`evolve stop`, then SIGKILL whatever engine is still announced or was announced before."""
        stop_workspace_engine(self.ws, without_settings())


@pytest.fixture
def make_project(
    tmp_path: Path, mock: MockLLM, oc_home: Path, opencode_bin: Path, shared_opencode: SharedOpencode
) -> Iterator[Callable[..., Project]]:
    """`make_project(config=None, name="project")`: `config` is merged into the project's opencode.json."""
    made: list[Project] = []

    def make(config: dict[str, Any] | None = None, name: str = "project") -> Project:
        base = tmp_path / name
        proj, ws = base / "proj", base / "ws"
        proj.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
        evolve_here("init", str(ws))
        (proj / "opencode.json").write_text(
            json.dumps({**mock_provider(mock.url), **(config or {})}, indent=2)
        )
        command = " ".join(EVOLVE)
        evolve_here("shim", "install", "--workspace", str(ws), "--project", str(proj), "--command", command)
        project = Project(proj, ws, mock, oc_home, opencode_bin, shared_opencode)
        made.append(project)
        return project

    try:
        yield make
    finally:
        for project in made:
            for server in project.serves:
                server.stop()
        for project in made:
            project.stop_engine()


@pytest.fixture
def project(make_project: Callable[..., Project]) -> Project:
    return make_project()
