"""The one headless opencode a check's two versions share: `opencode serve` on a loopback port, the
pinned release, an isolated HOME, XDG directories and TMPDIR (the plugin dependencies linked from the
cache's seed). Each version is a directory of its own in it (engine/evals/harness.py connects it).

A recorded conversation is imported into each version's directory (`opencode import` runs the session
in the directory it was imported into, its forks too), under identifiers of the version's own: the
same session imported twice into one opencode would be one session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import string
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.threads import to_the_end
from engine.evals.processes import HarnessError, end, free_port, kill_groups, ms_since, spawn, tail
from engine.evals.setup import STOP_GRACE_S, Imported, Setup
from engine.opencode import setup as opencode_setup
from engine.opencode.client import Connection, OpencodeClient, OpencodeError

# opencode's identifiers (`ses_…`, `msg_…`, `prt_…`) start with their time and end with random
# characters of this alphabet.
ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase


def as_version(data: dict[str, Any], shift: int) -> tuple[dict[str, Any], dict[str, str]]:
    """An export (`{info, messages}`) with the identifiers of its session, messages and parts made a
    version's own: the last character of each moved `shift` places along the alphabet, wherever the
    identifier appears (a message's session, a part's message, an answer's parent). Their order is
    kept: it is their time's. Returns the export and the identifiers it renamed (old to new)."""
    found = [str((data.get("info") or {}).get("id") or "")]
    for message in data.get("messages") or []:
        found.append(str((message.get("info") or {}).get("id") or ""))
        found += [str(part.get("id") or "") for part in message.get("parts") or []]
    renamed = {
        old: old[:-1] + ALPHABET[(ALPHABET.index(old[-1]) + shift) % len(ALPHABET)]
        for old in found
        if old and old[-1] in ALPHABET and shift % len(ALPHABET)
    }

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return renamed.get(value, value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(data), renamed


@dataclass
class OpencodeServer:
    """Prepare its home, import conversations, start it, stop it."""

    base: Path  # the check's scratch directory
    setup: Setup
    timings: dict[str, float] = field(default_factory=dict)
    process: asyncio.subprocess.Process | None = None
    url: str = ""
    seeded: bool = False  # its home started from the cache's seed
    pids: set[int] = field(default_factory=set)

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def log(self) -> Path:
        return self.base / "opencode.log"

    def env(self, directory: Path) -> dict[str, str]:
        return opencode_setup.opencode_env(self.setup.copy_env(), self.home, directory)

    def failed(self, what: str) -> HarnessError:
        return HarnessError(f"opencode {what}:\n" + tail(self.log))

    async def prepare(self) -> None:
        started = time.perf_counter()
        # share_deps: the plugin's dependencies linked from the seed, not copied
        self.seeded = await to_the_end(opencode_setup.make_home, self.home, True, self.setup.env)
        self.timings["home_ms"] = ms_since(started)

    async def give(self, project: Path, version: str, shift: int, item: Imported) -> dict[str, str]:
        """`item` imported for the version whose opencode project is `project` (before the server
        starts); returns the identifiers it has there."""
        started = time.perf_counter()
        data, renamed = as_version(item.data, shift)
        path = self.base / f"import-{version}-{item.session}.json"
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        log = self.base / "import.log"
        argv = [str(self.setup.binary), "import", str(path)]
        proc = await spawn(argv, project, self.env(project), log, self.pids)
        try:
            code = await asyncio.wait_for(proc.wait(), self.setup.start_timeout_s)
        except TimeoutError:
            raise HarnessError(
                f"opencode import did not finish within {self.setup.start_timeout_s:.0f} s:\n" + tail(log)
            ) from None
        if code != 0:
            raise HarnessError(f"opencode import exited {code}:\n" + tail(log))
        self.timings["import_ms"] = self.timings.get("import_ms", 0.0) + ms_since(started)
        return renamed

    async def start(self) -> None:
        """`opencode serve`, answering (it loads a directory's plugins on the first request for it)."""
        started = time.perf_counter()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [str(self.setup.binary), "serve", "--port", str(port), "--hostname", "127.0.0.1"]
        self.process = proc = await spawn(argv, self.base, self.env(self.base), self.log, self.pids)
        probe = OpencodeClient(Connection(id="eval", url=self.url, directory=str(self.base)), timeout=30.0)
        deadline = time.monotonic() + self.setup.start_timeout_s
        try:
            while True:
                if proc.returncode is not None:
                    raise self.failed(f"exited {proc.returncode} as it started")
                with contextlib.suppress(OpencodeError):
                    await probe.health(timeout=2.0)
                    break
                if time.monotonic() > deadline:
                    raise self.failed(f"did not answer within {self.setup.start_timeout_s:.0f} s")
                await asyncio.sleep(0.1)
        finally:
            await probe.close()
        self.timings["start_ms"] = ms_since(started)

    def exited(self) -> int | None:
        return None if self.process is None else self.process.returncode

    async def loaded(self) -> None:
        """Once the plugins have loaded: when the home did not start from the seed, opencode installed
        the plugin's dependencies into it; kept as the seed for next time."""
        if not self.seeded:
            await to_the_end(opencode_setup.keep_seed, self.home)

    async def stop(self) -> None:
        """opencode first, before the engines (each plugin says goodbye to its own)."""
        if self.process is None:
            return
        started = time.perf_counter()
        try:
            await end(self.process, STOP_GRACE_S)
        finally:
            self.kill()
            self.timings["stop_ms"] = ms_since(started)

    def kill(self) -> None:
        kill_groups(self.pids)
