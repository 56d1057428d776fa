"""The opencode connections' memory of the agent's project (engine/opencode/connections.py)."""

from __future__ import annotations

import asyncio

from engine.core.bus import EventBus
from engine.opencode.connections import Connections


def test_a_dropped_connection_still_names_the_agents_project() -> None:
    """The behaviour checks run the agent's own project: a connection dropped because opencode
    exited, or answered its liveness checks too late on a busy machine, does not make it unknown."""

    async def scenario() -> None:
        connections = Connections(EventBus())
        assert connections.project() is None  # never connected: nothing to name
        first = connections.connect("http://127.0.0.1:1", "/work/first", None, "server", "0.1.0")
        assert connections.project() == "/work/first"
        second = connections.connect("http://127.0.0.1:2", "/work/second", None, "server", "0.1.0")
        assert connections.project() == "/work/second"  # the live one made last
        await connections.disconnect(second.id, "opencode stopped answering")
        assert connections.project() == "/work/first"  # a live one first
        await connections.disconnect(first.id, "opencode stopped answering")
        assert connections.client() is None
        assert connections.project() == "/work/second"  # then the one made last

    asyncio.run(scenario())
