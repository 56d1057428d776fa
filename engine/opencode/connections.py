"""The opencode processes connected to the engine through the shim, and how the engine reaches back
into opencode through them (notifications, actions, the heartbeat's sessions)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from engine.core.bus import EventBus
from engine.opencode.client import Connection, NoOpencode, OpencodeClient, OpencodeUnreachable
from engine.protocol.records import ConnectionInfo, OpencodeChanged, new_id

log = logging.getLogger("evolve.connections")
_T = TypeVar("_T")

LIVENESS_S = 2.0  # how often each connection is asked whether opencode is still there
MISSES_REFUSED = 2  # checks in a row that found nothing listening, before the connection is dropped
# Checks in a row without an answer in time (each waits LIVENESS_S), before it is dropped: ~30 s. An
# opencode that exited refuses at once (above); one that answers late is busy, not gone, and on a
# loaded machine it may stay silent for several seconds.
MISSES_SILENT = 8


class Connections:
    """The opencode processes connected through the shim. Each connection and each goodbye is an
    `opencode` event on the bus (the heartbeat's timer follows them)."""

    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self.clients: dict[str, OpencodeClient] = {}
        self._commands: dict[str, str | None] = {}  # every connection's opencode subcommand, also gone ones
        self._last_directory: str | None = None  # the project of the connection made last, also gone
        self._misses: dict[str, int] = {}
        self._offered: dict[str, list[dict[str, Any]]] = {}  # connection -> the tools opencode offers
        self._watching: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Check every connection every few seconds: an opencode killed without a goodbye (a crash,
        kill -9) is noticed within seconds, not at the next heartbeat."""
        if self._watching is None:
            self._watching = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(LIVENESS_S)
            await asyncio.gather(*(self._check(c) for c in list(self.clients.values())))

    async def _check(self, client: OpencodeClient) -> None:
        conn_id = client.conn.id
        try:
            await client.health(timeout=LIVENESS_S)
        except OpencodeUnreachable as exc:
            misses = self._misses.get(conn_id, 0) + 1
            self._misses[conn_id] = misses
            if misses >= (MISSES_REFUSED if exc.refused else MISSES_SILENT):
                log.info("opencode connection %s stopped answering: %s", conn_id, exc)
                await self.disconnect(conn_id, f"opencode stopped answering ({exc})")
        except Exception:  # an answer, even an error, means it is there
            self._misses.pop(conn_id, None)
        else:
            self._misses.pop(conn_id, None)

    def connect(
        self,
        url: str,
        directory: str,
        token: str | None,
        mode: str,
        shim_version: str | None,
        command: str | None = None,
    ) -> Connection:
        conn = Connection(
            id=new_id("oc"),
            url=url,
            directory=directory,
            token=token,
            mode=mode,
            shim_version=shim_version,
            command=command,
        )
        self.clients[conn.id] = OpencodeClient(conn)
        self._commands[conn.id] = command
        self._last_directory = directory
        self._bus.publish(OpencodeChanged("connected", conn.info()))
        return conn

    async def disconnect(self, conn_id: str, reason: str | None = None) -> None:
        client = self.clients.pop(conn_id, None)
        self._misses.pop(conn_id, None)
        self._offered.pop(conn_id, None)
        if client is not None:
            await client.close()
            self._bus.publish(OpencodeChanged("disconnected", client.conn.info(), reason))

    def offered(self, conn_id: str, tools: list[dict[str, Any]]) -> None:
        """The tools (opencode's own and evolve's) opencode offers the model through this connection."""
        if conn_id in self.clients:
            self._offered[conn_id] = tools

    def tools_offered(self, conn_id: str | None) -> list[dict[str, Any]] | None:
        """What that connection (else the newest one) offers; None when nobody said."""
        if conn_id in self._offered:
            return self._offered[conn_id]
        newest = self.client()
        return self._offered.get(newest.conn.id) if newest else None

    def project(self) -> str | None:
        """The agent's opencode project: the directory of the connection `client()` picks, else of
        the one made last. A connection dropped (opencode exited, or did not answer the liveness
        checks in time on a busy machine) still names the project the agent runs in."""
        client = self.client()
        return client.conn.directory if client is not None else self._last_directory

    def command(self, conn_id: str | None) -> str | None:
        """The opencode subcommand (run, serve; None for the TUI) of a connection, also of one that
        has gone away since."""
        return self._commands.get(conn_id) if conn_id else None

    def infos(self) -> list[ConnectionInfo]:
        return [c.conn.info() for c in self.clients.values()]

    def client(self) -> OpencodeClient | None:
        """The most recently connected opencode that has not failed since (or the newest one)."""
        clients = sorted(self.clients.values(), key=lambda c: c.conn.connected_at, reverse=True)
        for c in clients:
            if c.conn.last_error is None:
                return c
        return clients[0] if clients else None

    async def call(
        self, what: str, fn: Callable[[OpencodeClient], Awaitable[_T]], prefer: str | None = None
    ) -> _T:
        """`fn(client)` on a live connection (`prefer`'s first, when it is still there: the opencode a
        session lives in), else the next. One where nothing listens any more is dropped; one that
        did not answer in time is kept (the liveness checks drop it if it stays silent). Raises
        NoOpencode when none is connected, OpencodeUnreachable when none answered, OpencodeError
        when opencode answers with an error."""
        tried: set[str] = set()
        silent: OpencodeUnreachable | None = None
        while True:
            client = self.clients.get(prefer) if prefer and prefer not in tried else None
            client = client or self.client()
            if client is None or client.conn.id in tried:
                client = next((c for c in self.clients.values() if c.conn.id not in tried), None)
            if client is None:
                if silent is not None:
                    raise OpencodeUnreachable(f"{what}: {silent}") from silent
                raise NoOpencode(f"{what}: no opencode connected (start opencode with the evolve plugin)")
            tried.add(client.conn.id)
            try:
                return await fn(client)
            except OpencodeUnreachable as exc:
                if not exc.refused:
                    silent = exc
                    continue
                log.info("dropping opencode connection %s: %s", client.conn.id, exc)
                await self.disconnect(client.conn.id, str(exc))

    async def conversation(
        self, session: str, connection: str | None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """A session's record and its messages as the opencode it lives in keeps them (what `opencode
        export` writes); None when that opencode is no longer connected."""
        client = self.clients.get(connection) if connection else None
        if client is None:
            return None
        return await client.session(session), await client.messages(session)

    async def continue_session(
        self, session: str, text: str, agent: str | None, model: dict[str, str] | None, connection: str | None
    ) -> None:
        """A synthetic user message that starts a new turn in `session`, without waiting for it
        (`prompt_async`), through the opencode the session lives in."""
        await self.call(
            "continue",
            lambda c: c.prompt(session, text, agent=agent, model=model, wait=False),
            prefer=connection,
        )

    async def abort(self, session: str, connection: str | None) -> None:
        await self.call("abort", lambda c: c.abort(session), prefer=connection)

    async def reply_permission(
        self, request: str, reply: str, message: str | None, connection: str | None
    ) -> None:
        await self.call(
            "permission reply", lambda c: c.reply_permission(request, reply, message), prefer=connection
        )

    async def deliver(self, session: str, text: str, agent: str) -> None:
        """A user message that asks for no reply (a notification), in `session`."""
        await self.call("notification", lambda c: c.prompt(session, text, agent=agent, no_reply=True))

    async def close(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
        for conn_id in list(self.clients):
            await self.disconnect(conn_id, "the engine stopped")


class OpencodeSessions:
    """The heartbeat's view of opencode (heartbeat.Opencode), over the connections."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections

    async def busy_sessions(self) -> set[str]:
        status = await self._connections.call("session status", lambda c: c.status())
        return {
            sid for sid, st in (status or {}).items() if isinstance(st, dict) and st.get("type") != "idle"
        }

    async def create_session(self, title: str) -> str:
        created = await self._connections.call("create session", lambda c: c.create_session(title))
        return str(created["id"])

    async def session_tokens(self, session: str) -> int:
        """Input + output tokens of the session's messages since its last compaction summary."""
        messages: list[dict[str, Any]] = await self._connections.call(
            "messages", lambda c: c.messages(session)
        )
        total = 0
        for message in messages or []:
            info = message.get("info") or {}
            if info.get("summary") is True:
                total = 0
            tokens = info.get("tokens") or {}
            total += int(tokens.get("input") or 0) + int(tokens.get("output") or 0)
        return total

    async def summarize(self, session: str, model: dict[str, str]) -> None:
        await self._connections.call("summarize", lambda c: c.summarize(session, model, timeout=600.0))

    async def archive(self, session: str) -> None:
        await self._connections.call("archive", lambda c: c.archive(session))

    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None:
        await self._connections.call(
            "heartbeat prompt", lambda c: c.prompt(session, text, agent=agent, model=model, timeout=1800.0)
        )
