"""The two versions of a change running for real, side by side, in their throwaway directory: each its
own engine (`evolve serve` on its copy, with its own `state/`), both in one headless opencode (`opencode
serve` on a loopback port, the cached release, an isolated HOME, XDG directories and TMPDIR), where each
version is a directory of its own, its project, whose configuration loads the evolve plugin for that
version's copy; each scenario is sent to a version as a new session.

    <scratch>/<version>/workspace/   the copy (engine/evals/copies.py); its engine's state/ inside
                        project/     its opencode project: opencode.json (engine/evals/project.py)
                        tmp/         TMPDIR of the copy's engine and its hooks
                        engine.log
             home/                   opencode's HOME, XDG directories and TMPDIR
             opencode.log, import.log

opencode keeps an instance per directory (its configuration, its plugins, its sessions): the versions
see nothing of each other, and one opencode instead of one per version halves what a check pays for
opencode's start. A recorded conversation is imported once per version, under identifiers of the
version's own: opencode runs a session in the directory it was imported into, forks included.

The copies' engines are started here, before opencode loads their plugins, with the settings that keep
them to themselves (no heartbeat, no behaviour checks of their own); each plugin finds its engine by its
announcement. Every process starts in a process group of its own, which `stop` ends (SIGTERM, then
SIGKILL), with any engine a plugin may have started in place of ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from engine.changes.gitstore import GitStore
from engine.core.threads import to_the_end
from engine.evals import transcript
from engine.evals.copies import VersionSpec, make_copy
from engine.evals.expectations import check_all
from engine.evals.processes import HarnessError, end, kill_groups, ms_since, spawn, tail
from engine.evals.project import write_config
from engine.evals.scenarios import Scenario
from engine.evals.server import OpencodeServer
from engine.evals.setup import STOP_GRACE_S, Setup
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
    """One version of the workspace: its project and engine started, connected in the check's opencode,
    scenarios run in it, stopped."""

    name: str  # before | after
    base: Path
    version: VersionSpec
    setup: Setup
    timings: dict[str, float] = field(default_factory=dict)
    engine: asyncio.subprocess.Process | None = None
    link: EngineLink | None = None
    client: OpencodeClient | None = None
    ids: dict[str, str] = field(default_factory=dict)  # an imported conversation's, renamed for it
    pids: set[int] = field(default_factory=set)  # every process started, for stop

    @property
    def workspace(self) -> Path:
        return self.base / "workspace"

    @property
    def project(self) -> Path:
        return self.base / "project"

    def _env(self) -> dict[str, str]:
        env = self.setup.copy_env()
        env["OPENCODE_EVOLVE_WORKSPACE"] = str(self.workspace)
        return env

    # ---- start ----------------------------------------------------------------------------------

    def copy(self, git: GitStore) -> None:
        """The version's files in `workspace/` (before `start`; scenarios are read from a copy)."""
        started = time.perf_counter()
        make_copy(git, self.version, self.workspace)
        self.timings["copy_ms"] = ms_since(started)

    async def start(self) -> None:
        """Its opencode project (the plugin for its copy), then its engine."""
        started = time.perf_counter()
        await to_the_end(self._prepare)
        await self._start_engine()
        self.timings["engine_start_ms"] = ms_since(started)

    def _prepare(self) -> None:
        (self.base / "tmp").mkdir(parents=True, exist_ok=True)
        write_config(self.project, self.setup.config)
        install_shim(self.project, self.workspace, [self.setup.python, "-m", "engine"])

    async def _start_engine(self) -> None:
        env = self._env()
        env["TMPDIR"] = str(self.base / "tmp")
        argv = [self.setup.python, "-m", "engine", "serve", "--workspace", str(self.workspace)]
        self.engine = proc = await spawn(argv, self.workspace, env, self.base / "engine.log", self.pids)
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

    async def connect(self, server: OpencodeServer) -> None:
        """Its project opened in `server`, whose plugin there connects to its engine: opencode loads a
        directory's plugins on the first request that names it."""
        started = time.perf_counter()
        self.client = OpencodeClient(
            Connection(id=f"eval-{self.name}", url=server.url, directory=str(self.project)), timeout=30.0
        )
        try:
            await self.client.status()
        except OpencodeError as exc:
            raise server.failed(f"failed its first request for the {self.name} version ({exc})") from exc
        assert self.link is not None
        deadline = time.monotonic() + self.setup.start_timeout_s
        while not (await self.link.send(calls.status())).opencode:
            if server.exited() is not None:
                raise server.failed(
                    f"exited {server.exited()} before the {self.name} version's plugin connected"
                )
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"the {self.name} version's plugin did not connect to its engine within "
                    f"{self.setup.start_timeout_s:.0f} s:\n" + tail(self.workspace / "state" / "shim.log")
                )
            await asyncio.sleep(0.1)
        self.timings["connect_ms"] = ms_since(started)

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
                imported, message = (self.ids.get(i, i) for i in fork)
                session = str((await self.client.fork(imported, message))["id"])
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
        run.duration_ms = ms_since(started)
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
        """Its engine (after opencode: the plugin says goodbye); whatever is still alive after the grace
        period is killed, and so is an engine the plugin started in place of ours."""
        started = time.perf_counter()
        try:
            if self.link is not None:
                with contextlib.suppress(httpx.HTTPError, ValueError, TypeError):
                    await self.link.send(calls.shutdown())
            await end(self.engine, STOP_GRACE_S * 2)
        finally:
            self.kill()
            for closing in (self.client, self.link):
                if closing is not None:
                    with contextlib.suppress(Exception):
                        await closing.close()
            self.timings["stop_ms"] = ms_since(started)

    def kill(self) -> None:
        """SIGKILL every process group this version started, and the engine its workspace announces
        (the plugin starts one, in a session of its own, when ours died). Idempotent, synchronous:
        it runs even when the eval is cancelled while stopping."""
        groups = set(self.pids)
        found = Announcement.read(self.workspace)
        if found is not None and found.pid not in groups and _serves(found.pid, self.workspace):
            groups.add(found.pid)  # the plugin starts an engine as the leader of a group of its own
        kill_groups(groups)


def _serves(pid: int, workspace: Path) -> bool:
    """Whether process `pid` is an engine of `workspace` (not some process that took a dead one's pid)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(str(workspace)) in argv
