"""The opencode connections (engine/opencode/connections.py): their memory of the agent's project, and
which failures drop one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from engine.core.bus import EventBus
from engine.opencode.client import NoOpencode, OpencodeClient, OpencodeUnreachable
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


def test_a_late_answer_keeps_the_connection_and_a_refusal_drops_it() -> None:
    """A call opencode does not answer in time (busy, on a loaded machine) fails but keeps the
    connection; one where nothing listens drops it and the next connection is asked."""

    async def scenario() -> None:
        connections = Connections(EventBus())
        older = connections.connect("http://127.0.0.1:1", "/work/p", None, "server", "0.1.0")
        newer = connections.connect("http://127.0.0.1:2", "/work/p", None, "server", "0.1.0")
        asked: list[str] = []

        def answering(silent: set[str], refused: set[str]) -> Callable[[OpencodeClient], Awaitable[str]]:
            async def fn(client: OpencodeClient) -> str:
                asked.append(client.conn.id)
                if client.conn.id in silent:
                    raise OpencodeUnreachable("ReadTimeout: timed out")
                if client.conn.id in refused:
                    raise OpencodeUnreachable("ConnectError: refused", refused=True)
                return client.conn.id

            return fn

        # The newest is silent: the older answers, and both stay.
        assert await connections.call("status", answering({newer.id}, set())) == older.id
        assert asked == [newer.id, older.id]
        assert set(connections.clients) == {older.id, newer.id}
        # Both silent: the call fails as unreachable (not "none connected"), and both stay.
        asked.clear()
        with pytest.raises(OpencodeUnreachable) as silent:
            await connections.call("status", answering({older.id, newer.id}, set()))
        assert not isinstance(silent.value, NoOpencode) and "status: ReadTimeout" in str(silent.value)
        assert sorted(asked) == sorted([older.id, newer.id])
        assert set(connections.clients) == {older.id, newer.id}
        # Nothing listens at the newest: it is dropped, the older answers.
        assert await connections.call("status", answering(set(), {newer.id}), prefer=newer.id) == older.id
        assert set(connections.clients) == {older.id}
        with pytest.raises(NoOpencode):
            await connections.call("status", answering(set(), {older.id}))
        assert connections.clients == {}

    asyncio.run(scenario())
