"""One version of the workspace running for real, in its throwaway directory: its own engine (`evolve
serve` on the copy, with its own `state/`), one headless opencode (`opencode serve` on a loopback port,
the cached release, the evolve plugin, an isolated HOME, XDG directories and TMPDIR), and each
scenario sent to it as a new session.

    <scratch>/<version>/workspace/   the copy (engine/evals/copies.py); its engine's state/ inside
                        project/     opencode's project: opencode.json (engine/evals/project.py)
                        home/        opencode's HOME, XDG directories and TMPDIR
                        tmp/         TMPDIR of the copy's engine and its hooks
                        engine.log, opencode.log

The copy's engine is started here, before opencode, with the settings that keep it to itself (no
heartbeat, no behaviour checks of its own); the plugin finds it by its announcement. Every process
starts in a process group of its own, which `stop` ends (SIGTERM, then SIGKILL), with any engine
the plugin may have started in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from engine.changes.gitstore import GitStore
from engine.core.threads import to_the_end
from engine.evals import transcript
from engine.evals.copies import VersionSpec, make_copy
from engine.evals.expectations import check_all
from engine.evals.project import write_config
from engine.evals.scenarios import Scenario
from engine.opencode import setup as opencode_setup
from engine.opencode.client import Connection, OpencodeClient, OpencodeError
from engine.opencode.shim_install import install as install_shim
from engine.protocol import calls
from engine.protocol.announcement import Announcement
from engine.protocol.api import API_VERSION, API_VERSION_HEADER
from engine.protocol.calls import Call
from engine.protocol.records import HookUse, ScenarioRun
from engine.protocol.routes import A
from engine.protocol.tlsverify import verify_for

log = logging.getLogger("evolve.evals")

SETTINGS = ("EVOLVE_", "OPENCODE_")
# The copy's engine keeps to itself: no heartbeat of its own, no behaviour checks of its own (a
# scenario whose agent runs them would start opencode within opencode), no held change replayed.
COPY_SETTINGS: Mapping[str, str] = {
    "EVOLVE_HEARTBEAT_MS": "-1",
    "EVOLVE_EVALS_ON_REVIEW": "false",
    "EVOLVE_EVALS_AGENT_TOOLS": "false",
}
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
LOG_TAIL = 20  # lines of a log quoted in an error


class HarnessError(RuntimeError):
    """opencode or the copy's engine failed or hung; the message says which, with its log's tail."""


@dataclass
class Setup:
    """What every version's processes are given."""

    binary: Path  # opencode, the pinned release
    config: dict[str, Any]  # the throwaway project's opencode.json, before the plugin
    env: Mapping[str, str]  # the engine's environment (EVOLVE_* and OPENCODE_* are left out)
    python: str = sys.executable  # runs the copy's engine
    start_timeout_s: float = START_TIMEOUT_S


@dataclass
class Imported:
    """A recorded conversation given to opencode as a session before it starts (a re-asked turn's
    history): opencode's own export format, `{info, messages}`."""

    session: str
    data: dict[str, Any]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = LOG_TAIL) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    found = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"  | {line}" for line in found)


class EngineLink:
    """The copy's engine, reached through the contract's typed calls."""

    def __init__(self, found: Announcement) -> None:
        self.found = found
        self._http = httpx.AsyncClient(
            base_url=found.url,
            headers={"authorization": f"Bearer {found.token}", API_VERSION_HEADER: str(API_VERSION)},
            timeout=httpx.Timeout(10.0, connect=2.0),
            verify=verify_for(found.url),
        )

    async def send(self, call: Call[A]) -> A:
        resp = await self._http.request(call.method, call.path, params=call.query, json=call.body)
        resp.raise_for_status()
        return call.decode(resp.json())

    async def close(self) -> None:
        await self._http.aclose()


@dataclass
class Instance:
    """One version of the workspace, running: start it, run scenarios in it, stop it."""

    name: str  # before | after
    base: Path
    version: VersionSpec
    setup: Setup
    timings: dict[str, float] = field(default_factory=dict)
    engine: asyncio.subprocess.Process | None = None
    opencode: asyncio.subprocess.Process | None = None
    link: EngineLink | None = None
    client: OpencodeClient | None = None
    pids: set[int] = field(default_factory=set)  # every process started, for stop

    @property
    def workspace(self) -> Path:
        return self.base / "workspace"

    @property
    def project(self) -> Path:
        return self.base / "project"

    @property
    def home(self) -> Path:
        return self.base / "home"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in self.setup.env.items() if not k.startswith(SETTINGS)}
        env.update(COPY_SETTINGS)
        env["OPENCODE_EVOLVE_WORKSPACE"] = str(self.workspace)
        return env

    # ---- start ----------------------------------------------------------------------------------

    def copy(self, git: GitStore) -> None:
        """The version's files in `workspace/` (before `start`; scenarios are read from a copy)."""
        started = time.perf_counter()
        make_copy(git, self.version, self.workspace)
        self.timings["copy_ms"] = _ms(started)

    async def start(self, imports: list[Imported] | None = None) -> None:
        """Its engine, then its opencode (given `imports` before it starts), connected to each other."""
        started = time.perf_counter()
        seeded = await to_the_end(self._prepare)
        self.timings["home_ms"] = _ms(started)
        started = time.perf_counter()
        await self._start_engine()
        self.timings["engine_start_ms"] = _ms(started)
        started = time.perf_counter()
        for item in imports or []:
            await self._import(item)
        if imports:
            self.timings["import_ms"] = _ms(started)
        started = time.perf_counter()
        await self._start_opencode()
        self.timings["opencode_start_ms"] = _ms(started)
        if not seeded:  # opencode installed its plugin dependencies here: keep them for next time
            await to_the_end(opencode_setup.keep_seed, self.home)

    def _prepare(self) -> bool:
        (self.base / "tmp").mkdir(parents=True, exist_ok=True)
        seeded = opencode_setup.make_home(self.home, share_deps=True, env=self.setup.env)
        write_config(self.project, self.setup.config)
        install_shim(self.project, self.workspace, [self.setup.python, "-m", "engine"])
        return seeded

    async def _spawn(
        self, argv: list[str], cwd: Path, env: dict[str, str], log_name: str
    ) -> asyncio.subprocess.Process:
        with open(self.base / log_name, "ab") as out:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop ends it and whatever it started
            )
        self.pids.add(proc.pid)
        return proc

    async def _start_engine(self) -> None:
        env = self._env()
        env["TMPDIR"] = str(self.base / "tmp")
        argv = [self.setup.python, "-m", "engine", "serve", "--workspace", str(self.workspace)]
        self.engine = proc = await self._spawn(argv, self.workspace, env, "engine.log")
        deadline = time.monotonic() + self.setup.start_timeout_s
        while True:
            if proc.returncode is not None:
                raise HarnessError(
                    f"the {self.name} version's engine exited {proc.returncode} as it started:\n"
                    + tail(self.base / "engine.log")
                )
            found = Announcement.read(self.workspace)
            if found is not None and found.pid == proc.pid and await asyncio.to_thread(found.alive, 1.0):
                self.link = EngineLink(found)
                return
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"the {self.name} version's engine did not answer within "
                    f"{self.setup.start_timeout_s:.0f} s:\n" + tail(self.base / "engine.log")
                )
            await asyncio.sleep(0.05)

    def _opencode_env(self) -> dict[str, str]:
        # The copy's settings too: an engine the plugin starts in place of a dead one keeps to itself.
        return opencode_setup.opencode_env(self._env(), self.home, self.project)

    async def _import(self, item: Imported) -> None:
        """Give opencode a recorded conversation before it starts (`opencode import`)."""
        path = self.base / f"import-{item.session}.json"
        path.write_text(json.dumps(item.data, ensure_ascii=False), encoding="utf-8")
        argv = [str(self.setup.binary), "import", str(path)]
        proc = await self._spawn(argv, self.project, self._opencode_env(), "import.log")
        try:
            code = await asyncio.wait_for(proc.wait(), self.setup.start_timeout_s)
        except TimeoutError:
            raise HarnessError(
                f"opencode import did not finish within {self.setup.start_timeout_s:.0f} s:\n"
                + tail(self.base / "import.log")
            ) from None
        if code != 0:
            raise HarnessError(f"opencode import exited {code}:\n" + tail(self.base / "import.log"))

    async def _start_opencode(self) -> None:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [str(self.setup.binary), "serve", "--port", str(port), "--hostname", "127.0.0.1"]
        self.opencode = proc = await self._spawn(argv, self.project, self._opencode_env(), "opencode.log")
        self.client = OpencodeClient(
            Connection(id=f"eval-{self.name}", url=url, directory=str(self.project)), timeout=30.0
        )
        deadline = time.monotonic() + self.setup.start_timeout_s

        def failed(what: str) -> HarnessError:
            return HarnessError(
                f"the {self.name} version's opencode {what}:\n" + tail(self.base / "opencode.log")
            )

        while True:
            if proc.returncode is not None:
                raise failed(f"exited {proc.returncode} as it started")
            with contextlib.suppress(OpencodeError):
                await self.client.health(timeout=2.0)
                break
            if time.monotonic() > deadline:
                raise failed(f"did not answer within {self.setup.start_timeout_s:.0f} s")
            await asyncio.sleep(0.1)
        # opencode loads its plugins for a directory on the first request that names it.
        try:
            await self.client.status()
        except OpencodeError as exc:
            raise failed(f"failed its first request ({exc})") from exc
        assert self.link is not None
        while not (await self.link.send(calls.status())).opencode:
            if proc.returncode is not None:
                raise failed(f"exited {proc.returncode} before its evolve plugin connected")
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"the {self.name} version's opencode did not connect to its engine within "
                    f"{self.setup.start_timeout_s:.0f} s:\n" + tail(self.workspace / "state" / "shim.log")
                )
            await asyncio.sleep(0.1)

    # ---- runs -----------------------------------------------------------------------------------

    async def run(
        self,
        scenario: Scenario,
        attempt: int,
        timeout_s: float,
        *,
        fork: tuple[str, str] | None = None,
    ) -> ScenarioRun:
        """Send the scenario's messages, one after the other, in a new session (with `fork`, a
        session imported before and the message to fork it at: the run continues that conversation),
        and read what the agent did."""
        assert self.client is not None
        started = time.perf_counter()
        run = ScenarioRun(scenario=scenario.name, version=self.name, attempt=attempt)
        deadline = time.monotonic() + timeout_s
        session: str | None = None
        skip = 0
        try:
            if fork is not None:
                session = str((await self.client.fork(*fork))["id"])
                skip = run.history = len(await self.client.messages(session))
            else:
                created = await self.client.create_session(f"eval: {scenario.name} ({attempt})")
                session = str(created["id"])
            run.session = session
            for text in scenario.messages:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                await asyncio.wait_for(
                    self.client.prompt(
                        session, text, agent=scenario.agent, synthetic=False, wait=True, timeout=left + 5
                    ),
                    left,
                )
        except TimeoutError:
            run.state, run.error = "error", f"did not finish within {timeout_s:.0f} s"
            if session is not None:
                with contextlib.suppress(OpencodeError):
                    await self.client.abort(session)
        except OpencodeError as exc:
            run.state, run.error = "error", f"opencode failed: {exc}"
        if session is not None:
            with contextlib.suppress(OpencodeError):
                found = transcript.read(await self.client.messages(session), skip)
                run.answers, run.tools, run.steps = found.answers, found.tools, found.steps
                run.tokens, run.cost = found.tokens, found.cost
                if found.errors and run.state != "error":
                    run.state, run.error = "error", "the model failed: " + "; ".join(found.errors)
            run.hooks = await self._hooks(session)
        if run.state != "error":
            run.checks = check_all(scenario.expectations, run)
            run.state = "passed" if all(c.passed for c in run.checks) else "failed"
        run.duration_ms = _ms(started)
        return run

    async def _hooks(self, session: str) -> list[HookUse]:
        """The hook runs of the copy's engine in this session, once it has finished what opencode
        handed it (it takes finished responses in and works on them after answering)."""
        if self.link is None:
            return []
        with contextlib.suppress(httpx.HTTPError, ValueError, TypeError):
            deadline = time.monotonic() + 10
            while (await self.link.send(calls.status())).busy and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            runs = (await self.link.send(calls.runs(session=session, limit=500))).runs
            return [
                HookUse(r.hook, r.stage, r.ok, r.error, r.duration_ms)
                for r in sorted(runs, key=lambda r: r.started_at)
            ]
        return []

    # ---- stop -----------------------------------------------------------------------------------

    async def stop(self) -> None:
        """opencode first (its plugin says goodbye), then the engine; whatever is still alive after the
        grace period is killed, and so is an engine the plugin started in place of ours."""
        started = time.perf_counter()
        try:
            await _end(self.opencode, STOP_GRACE_S)
            if self.link is not None:
                with contextlib.suppress(httpx.HTTPError, ValueError, TypeError):
                    await self.link.send(calls.shutdown())
            await _end(self.engine, STOP_GRACE_S * 2)
        finally:
            self.kill()
            for closing in (self.client, self.link):
                if closing is not None:
                    with contextlib.suppress(Exception):
                        await closing.close()
            self.timings["stop_ms"] = _ms(started)

    def kill(self) -> None:
        """SIGKILL every process group this version started, and the engine its workspace announces
        (the plugin starts one, in a session of its own, when ours died). Idempotent, synchronous:
        it runs even when the eval is cancelled while stopping."""
        groups = set(self.pids)
        found = Announcement.read(self.workspace)
        if found is not None and found.pid not in groups and _serves(found.pid, self.workspace):
            groups.add(found.pid)  # the plugin starts an engine as the leader of a group of its own
        for pid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _serves(pid: int, workspace: Path) -> bool:
    """Whether process `pid` is an engine of `workspace` (not some process that took a dead one's pid)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(str(workspace)) in argv


async def _end(proc: asyncio.subprocess.Process | None, grace: float) -> None:
    if proc is None or proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
