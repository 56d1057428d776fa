"""One engine the console follows, and all the console keeps of it: where the engine is and its
client, the model of what it told, and how fresh that is.

The app follows its event stream and reloads its parts; the views read its model and ask it for
what they show in detail. Everything per engine lives here, so that a console of several agents
is a list of these (with a screen of views for each), not state spread over the app.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from engine.protocol import HookRun, SessionInfo, calls
from engine.protocol.records import Health

from .alerts import Alerts
from .client import EngineClient, Target
from .format import session_label
from .model import ConsoleModel, Part
from .nextstep import Evolve


class Agent:
    """An engine: its address (`target`), its `client`, the `model` of what it told the console."""

    def __init__(self, target: Target, clock: Callable[[], float], evolve: Evolve | None = None) -> None:
        """`evolve`: how the operator's shell runs evolve, in the commands the console suggests."""
        self.target = target
        self.evolve = evolve or Evolve()
        self.client = EngineClient(target)
        self.clock = clock
        self.model = ConsoleModel()
        self.down_since: float | None = None  # when the engine stopped answering
        self.heard_at: float | None = None  # when it last answered
        self.first_load = asyncio.Event()  # set once everything was loaded from it
        self.alerts = Alerts()  # what the console told the operator of it, to be read again

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

    def set_connection(self, connected: bool, detail: str) -> None:
        if connected:
            self.down_since = None
        elif self.down_since is None:
            self.down_since = self.clock()
        self.model.set_connection(connected, detail)

    async def rediscover(self) -> None:
        """A restarted engine has a new address or token: read its announcement again."""
        found = Target.announced(self.target.workspace) if self.target.workspace else None
        if found is not None and found != self.target:
            await self.client.aclose()
            self.target = found
            self.client = EngineClient(found)

    async def aclose(self) -> None:
        await self.client.aclose()

    # ---- what the app and the views ask the engine directly ---------------------------------

    async def health(self, timeout: float | None = None) -> Health:
        """The engine's health check: its pid and the number of its newest event."""
        return await self.client.send(calls.health(), timeout)

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
