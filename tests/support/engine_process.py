"""A real engine (`evolve serve`) as a subprocess with a small synchronous client of its API, and
stopping whatever engine a workspace announces."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from engine.protocol.tlsverify import verify_for
from tests.support.environment import EVOLVE, REPO, run_git
from tests.support.processes import end, pid_alive, wait_gone

if TYPE_CHECKING:
    from evolve_console.client import Target

START_TIMEOUT = 20.0


def announcement(workspace: Path) -> dict[str, Any] | None:
    """`state/engine.json` of a workspace (the running engine's pid, url and token), or None."""
    try:
        data: dict[str, Any] = json.loads((workspace / "state" / "engine.json").read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return None


def stop_workspace_engine(
    workspace: Path, env: dict[str, str], command: Sequence[str] = EVOLVE, timeout: float = 5.0
) -> None:
    """`evolve stop`, then SIGKILL whatever engine is still announced or was announced before (after
    `timeout` seconds): no engine a test or benchmark caused outlives it."""
    pids = set()
    found = announcement(workspace)
    if found:
        pids.add(int(found["pid"]))
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        subprocess.run(
            [*command, "stop", "--workspace", str(workspace)],
            capture_output=True,
            timeout=20,
            cwd=REPO,
            env=env,
        )
    found = announcement(workspace)
    if found:
        pids.add(int(found["pid"]))
    wait_gone(*pids, timeout=timeout)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


class EngineProcess:
    """`evolve serve --workspace DIR` and a small synchronous client of its API.

    `command` is how evolve is run (this checkout's `python -m engine`, or an installed `evolve`);
    `cwd` defaults to the workspace; `own_session` starts the engine in a session of its own, so that
    a Ctrl-C in the terminal reaches only the caller, which then stops the engine itself.
    """

    def __init__(
        self,
        workspace: Path,
        env: dict[str, str],
        log: Path,
        *,
        command: Sequence[str] = EVOLVE,
        cwd: Path | None = None,
        own_session: bool = False,
    ) -> None:
        self.workspace = workspace
        self.env = env
        self.log = log
        self.command = list(command)
        self.cwd = cwd or workspace
        self.own_session = own_session
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.token = ""
        self.pid = 0

    @property
    def target(self) -> Target:
        """What the console attaches to: url, token, workspace."""
        from evolve_console.client import Target

        return Target(self.url, self.token, str(self.workspace))

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def start(
        self, port: int | None = None, timeout: float = START_TIMEOUT, args: Sequence[str] = ()
    ) -> EngineProcess:
        """Start the engine (`args`: more options of `evolve serve`) and wait until it announces
        itself and answers /v1/health."""
        cmd = [*self.command, "serve", "--workspace", str(self.workspace), *args]
        if port is not None:
            cmd += ["--port", str(port)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=self.own_session,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"the engine exited {self.proc.returncode} at start:\n{self.log_tail()}")
            data = announcement(self.workspace)
            with contextlib.suppress(KeyError, TypeError, httpx.HTTPError):
                if data is not None and data["pid"] == self.proc.pid:
                    self.url, self.token, self.pid = data["url"], data["token"], data["pid"]
                    if self.request("GET", "/v1/health", check=False).status_code == 200:
                        return self
            if time.monotonic() > deadline:
                raise AssertionError(f"the engine did not start in {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self, wait: float = 10.0) -> None:
        """POST /v1/shutdown; if it has not exited within `wait` seconds, SIGTERM, then SIGKILL."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self.url:
            with contextlib.suppress(httpx.HTTPError):
                self.request("POST", "/v1/shutdown", check=False, timeout=5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
            return
        end(proc)

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
        """`evolve ARGS --workspace WS` with the engine's environment."""
        proc = subprocess.run(
            [*self.command, *args, "--workspace", str(self.workspace)],
            env=self.env,
            cwd=self.cwd,
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

    def client(self, timeout: float = 30.0) -> httpx.Client:
        """An httpx client of the API (keep-alive), for many requests in a row."""
        return httpx.Client(
            base_url=self.url,
            headers={"authorization": f"Bearer {self.token}"},
            timeout=timeout,
            verify=verify_for(self.url),
        )

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
            verify=verify_for(self.url),
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
