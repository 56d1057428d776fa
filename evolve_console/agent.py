"""One engine the console follows, and all the console keeps of it: where the engine is and its
client, the model of what it told, and how fresh that is.

The app follows its event stream and reloads its parts; the views read its model and ask it for
what they show in detail. Everything per engine lives here, so that a console of several agents
is a list of these (with a screen of views for each), not state spread over the app.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from engine.protocol import API_VERSION, HookRun, SessionInfo, calls
from engine.protocol.records import Health

from .alerts import Alerts
from .client import EngineClient, EngineError, Target
from .format import session_label
from .model import ConsoleModel, Part
from .nextstep import Evolve


@dataclass(frozen=True)
class Seen:
    """What the operator had seen of an agent when they last looked at it: its failed runs so far
    (a count) and the changes then waiting for a decision or a review (their keys)."""

    failed: int = 0
    changes: frozenset[str] = frozenset()


def target_name(target: Target) -> str:
    """A name for an agent nobody named: its workspace's directory name, else its host and port."""
    if target.workspace:
        return os.path.basename(os.path.normpath(target.workspace)) or "agent"
    return re.sub(r"^https?://", "", target.url).rstrip("/") or "agent"


def _same_path(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


class Agent:
    """An engine: its `name`, address (`target`), `client`, the `model` of what it told the console,
    and how it answers (when it last did, since when it has not)."""

    def __init__(
        self, target: Target, clock: Callable[[], float], name: str = "", evolve: Evolve | None = None
    ) -> None:
        """`evolve`: how the operator's shell runs evolve, in the commands the console suggests."""
        self.name = name or target_name(target)
        self.target = target
        self.evolve = evolve or Evolve()
        self.client = EngineClient(target)
        self.clock = clock
        self.model = ConsoleModel()
        self.down_since: float | None = None  # when the engine stopped answering
        self.heard_at: float | None = None  # when it last answered
        self.slow_since: float | None = None  # when a check of it began that has no answer yet
        self.first_load = asyncio.Event()  # set once everything was loaded from it
        self.alerts = Alerts()  # what the console told the operator of it, to be read again
        self.identity: str | None = None  # the workspace its engine said it serves, once it answered
        self.seen = Seen()  # what the operator had seen of it when they last looked

    def looked(self) -> None:
        """The operator is looking at this agent now: its failures and changes so far are seen."""
        self.seen = Seen(self.model.failed_total, frozenset(self.model.waiting_changes()))

    @property
    def failed_since_looked(self) -> int:
        return max(self.model.failed_total - self.seen.failed, 0)

    @property
    def changes_since_looked(self) -> int:
        """Changes pending or unreviewed that came since the operator last looked at the agent."""
        return len(self.model.waiting_changes() - self.seen.changes)

    def verify(self, health: Health) -> None:
        """The engine answering is the one this agent is: an evolve engine of this API version, for
        the workspace named (a local agent's), or the same as the first time (an engine by URL)."""
        if health.api != API_VERSION:
            raise EngineError(
                f"the engine at {self.target.url} speaks evolve API {health.api} ({health.version}), this console "
                f"API {API_VERSION}: install the same evolve release on both sides"
            )
        expected = self.target.workspace or self.identity
        if expected is not None and not _same_path(expected, health.workspace):
            raise EngineError(
                f"the engine at {self.target.url} serves {health.workspace}, not {expected}: another engine took "
                "that address; check the agent's url (or restart its engine)"
            )
        self.identity = health.workspace

    @property
    def workspace(self) -> str | None:
        """The workspace the console was started for (None: attached to an address only)."""
        return self.target.workspace

    def name_session(self, session: str | None) -> str:
        """A session as the tables name it: its title, else the end of its id."""
        found = self.model.sessions.get(session) if session else None
        return session_label(session, found.title if found else None)

    def heard(self) -> None:
        """The engine answered just now."""
        self.heard_at = self.clock()
        self.slow_since = None

    def set_connection(self, connected: bool, detail: str) -> None:
        if connected:
            self.down_since = None
        elif self.down_since is None:
            self.down_since = self.clock()
        self.model.set_connection(connected, detail)

    async def rediscover(self) -> None:
        """A restarted engine has a new address or token: read its announcement again."""
        found = Target.announced(self.target.workspace) if self.target.workspace else None
        if found is not None and found.url and found != self.target:
            await self.client.aclose()
            self.target = found
            self.client = EngineClient(found)

    async def aclose(self) -> None:
        await self.client.aclose()

    # ---- what the app and the views ask the engine directly ---------------------------------

    async def health(self, timeout: float | None = None) -> Health:
        """The engine's health check: its pid and the number of its newest event."""
        answer = await self.client.send(calls.health(), timeout)
        self.heard()
        return answer

    async def fetch(self, part: Part) -> bool:
        """`part` from the engine into the model; False when the answer was older than the model."""
        since = self.model.applied_seq
        answer = await self.client.send(self.model.query(part))
        self.heard()
        return self.model.apply_reload(part, answer, since=since)

    async def run(self, run_id: str) -> HookRun:
        """A hook run in full (a table holds only its brief fields)."""
        return await self.client.send(calls.run(run_id))

    async def session(self, session_id: str) -> SessionInfo:
        """A session with its history (the table holds only its summary)."""
        return await self.client.send(calls.session(session_id))
