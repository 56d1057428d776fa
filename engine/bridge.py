"""What happens in the engine when opencode (through the shim) reports something or asks for
something: system prompts, history, finished assistant responses, tool calls, compaction, sessions.

The shim forwards; this module decides. It is also how the engine reaches back into opencode
(notifications, actions), through the connections the shim announces.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .opencode import Connection, OpencodeClient, OpencodeError
from .records import new_id

if TYPE_CHECKING:
    from .runtime import Engine

log = logging.getLogger("evolve.bridge")

# opencode's own LLM calls that are not the agent's chat: they keep opencode's system prompt (SPEC A.6).
OWN_CALL_PREFIXES = {
    "title": "You are a title generator",
    "compaction": "You are a context summarization agent",
}


OWN_AGENTS = frozenset({"compaction", "title", "summary"})


def own_call_kind(system: list[str]) -> str | None:
    first = system[0] if system and isinstance(system[0], str) else ""
    for kind, prefix in OWN_CALL_PREFIXES.items():
        if first.startswith(prefix):
            return kind
    return None


def history_entry(message: dict[str, Any]) -> dict[str, Any]:
    """`{role, agent, parts}` from opencode's `{info, parts}` (§40)."""
    info = message.get("info") or {}
    return {"role": info.get("role"), "agent": info.get("agent"), "parts": message.get("parts") or []}


def response_context(parts: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """thinking, tool calls and answer of one assistant response (SPEC A.7)."""
    thinking = "\n".join(p.get("text", "") for p in parts if p.get("type") == "reasoning" and p.get("text"))
    calls = [p for p in parts if p.get("type") == "tool"]
    answer = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text" and p.get("text"))
    return thinking, calls, answer


class Bridge:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.connections: dict[str, OpencodeClient] = {}
        self.busy: dict[str, bool] = {}  # session id -> busy, from session.status events
        self.titles: dict[str, str] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._observed: set[str] = set()  # assistant message ids already handled

    # ---- connections ------------------------------------------------------------------------

    def connect(
        self, url: str, directory: str, token: str | None, mode: str, shim_version: str | None
    ) -> Connection:
        conn = Connection(
            id=new_id("oc"), url=url, directory=directory, token=token, mode=mode, shim_version=shim_version
        )
        self.connections[conn.id] = OpencodeClient(conn)
        self.engine.bus.publish("opencode", {"event": "connected", **conn.to_dict()})
        return conn

    async def disconnect(self, conn_id: str) -> None:
        client = self.connections.pop(conn_id, None)
        if client is not None:
            await client.close()
            self.engine.bus.publish("opencode", {"event": "disconnected", **client.conn.to_dict()})

    def client(self) -> OpencodeClient | None:
        """The most recently connected opencode that has not failed since (or the newest one)."""
        clients = sorted(self.connections.values(), key=lambda c: c.conn.connected_at, reverse=True)
        for c in clients:
            if c.conn.last_error is None:
                return c
        return clients[0] if clients else None

    async def call(self, what: str, fn: Any) -> Any:
        """Run `fn(client)` on a live connection, dropping dead ones; raises OpencodeError if none works."""
        tried: set[str] = set()
        while True:
            client = self.client()
            if client is None or client.conn.id in tried:
                raise OpencodeError(f"{what}: no opencode connected (start opencode with the evolve plugin)")
            tried.add(client.conn.id)
            try:
                return await fn(client)
            except OpencodeError as exc:
                if "unreachable" in str(exc):
                    log.info("dropping opencode connection %s: %s", client.conn.id, exc)
                    await self.disconnect(client.conn.id)
                    continue
                raise

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn_id in list(self.connections):
            await self.disconnect(conn_id)

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background work failed: %r", task.exception())
            self.engine.bus.publish("error", {"source": "bridge", "message": repr(task.exception())})

    # ---- what opencode reports --------------------------------------------------------------

    def take_history(self, session: str | None, history: list[dict[str, Any]] | None) -> None:
        if session and history is not None:
            self.engine.sessions.set_history(session, [history_entry(m) for m in history])

    async def system(self, session: str | None, system: list[str]) -> tuple[list[str] | None, str]:
        if not session:
            return None, "no session id"
        kind = own_call_kind(system)
        if kind:
            return None, f"{kind} call keeps opencode's prompt"
        self.engine.sessions.get(session)
        result = await self.engine.request_system(session, system)
        return result, "frozen" if result is not None else "hooks abstained"

    def chat_message(self, session: str | None, agent: str | None, model: dict[str, str] | None) -> None:
        if session:
            self.engine.sessions.note(session, agent=agent, model=model)
        if model and model.get("providerID") and model.get("modelID"):
            self.engine.note_model(model)

    def tool_before(self, session: str | None, tool: str, call_id: str | None, args: Any) -> None:
        context = {"session": {"id": session}, "tool": tool, "callID": call_id, "args": args}
        self.spawn(self.engine.dispatch("tool_before", context, session=session))

    def tool_after(
        self, session: str | None, tool: str, call_id: str | None, title: Any, output: Any
    ) -> None:
        context = {
            "session": {"id": session},
            "tool": tool,
            "callID": call_id,
            "title": title,
            "output": output,
        }
        self.spawn(self.engine.dispatch("tool_after", context, session=session))

    async def compacting(self, session: str | None) -> str | None:
        result = await self.engine.dispatch("compacting", {"session": {"id": session}}, session=session)
        return self.engine.compaction_prompt(result)

    async def assistant_finished(
        self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """observe_message, then idle when the response made no tool calls. Returns what the shim
        should send to continue (`{"text", "agent", "model"}`), or None."""
        message_id = str(message.get("id") or "")
        if message_id and message_id in self._observed:
            return None
        if message.get("summary") or message.get("agent") in OWN_AGENTS:
            return None  # opencode's own summary or title, not the agent's answer (SPEC A.6)
        if message_id:
            self._observed.add(message_id)
        agent = message.get("agent") or self.engine.sessions.get(session).agent
        if agent in OWN_AGENTS:
            agent = None
        thinking, calls, answer = response_context(parts)
        observed = await self.engine.dispatch(
            "observe_message",
            {
                "session": {"id": session, "agent": agent},
                "thinking": thinking,
                "calls": calls,
                "answer": answer,
            },
            session=session,
        )
        self.after_result(observed.merged, source=session)
        if calls:
            return None
        idle = await self.engine.dispatch(
            "idle", {"session": {"id": session, "agent": agent}, "answer": answer}, session=session
        )
        text = idle.merged.get("continue")
        if isinstance(text, str) and text:
            return {
                "text": text,
                "agent": agent or self.engine.config.heartbeat_agent,
                "model": self.engine.last_model(),
            }
        return None

    def after_result(self, merged: dict[str, Any], source: str | None) -> None:
        """`notify` and `actions` of an observe_message or heartbeat result, in the background."""
        notify = merged.get("notify")
        if isinstance(notify, list) and notify:
            self.spawn(self.engine.notify(source, [str(n) for n in notify if n]))
        actions = merged.get("actions")
        if isinstance(actions, list) and actions:
            self.spawn(self.run_actions(actions))

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        props = event.get("properties") or {}
        if kind in ("session.created", "session.updated"):
            info = props.get("info") or {}
            if info.get("id"):
                self.engine.sessions.get(info["id"])
                if info.get("title"):
                    self.titles[info["id"]] = info["title"]
        elif kind == "session.deleted":
            info = props.get("info") or {}
            self.engine.sessions.forget(info.get("id"))
        elif kind == "session.status":
            sid = props.get("sessionID")
            if sid:
                self.busy[sid] = (props.get("status") or {}).get("type") not in (None, "idle")
        elif kind == "session.idle":
            sid = props.get("sessionID")
            if sid:
                self.busy[sid] = False

    # ---- reaching back into opencode --------------------------------------------------------

    async def deliver(self, session: str, text: str) -> None:
        agent = self.engine.config.heartbeat_agent
        await self.call(
            "notification",
            lambda c: c.prompt(session, text, agent=agent, no_reply=True),
        )

    async def run_actions(self, actions: list[Any]) -> None:
        """`send` and `create_session`, in order; one failing does not stop the rest (§173)."""
        for action in actions:
            if not isinstance(action, dict):
                continue
            kind = action.get("type")
            try:
                if kind == "send" and action.get("session_id") and isinstance(action.get("message"), str):
                    await self.call(
                        "send action",
                        lambda c, a=action: c.prompt(
                            a["session_id"],
                            a["message"],
                            agent=self.engine.config.heartbeat_agent,
                            synthetic=a.get("synthetic", True),
                            timeout=600.0,
                        ),
                    )
                elif kind == "create_session":
                    title = action.get("title") if isinstance(action.get("title"), str) else None
                    created = await self.call("create_session action", lambda c, t=title: c.create_session(t))
                    self.engine.bus.publish(
                        "action", {"type": kind, "session": created.get("id"), "title": title}
                    )
                    continue
                else:
                    continue
                self.engine.bus.publish("action", {"type": kind, "session": action.get("session_id")})
            except Exception as exc:
                self.engine.bus.publish(
                    "error", {"source": "action", "message": f"action {kind} failed: {exc}"}
                )


class HeartbeatOpencode:
    """The heartbeat's view of opencode, over the shim's connections."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge

    async def _call(self, what: str, fn: Any) -> Any:
        from .heartbeat import Unreachable

        try:
            return await self.bridge.call(what, fn)
        except OpencodeError as exc:
            if "unreachable" in str(exc) or "no opencode connected" in str(exc):
                raise Unreachable(str(exc)) from exc
            raise

    async def busy_sessions(self) -> set[str]:
        status = await self._call("session status", lambda c: c.status())
        return {
            sid for sid, st in (status or {}).items() if isinstance(st, dict) and st.get("type") != "idle"
        }

    async def create_session(self, title: str) -> str:
        created = await self._call("create session", lambda c: c.create_session(title))
        return str(created["id"])

    async def session_tokens(self, session: str) -> int:
        """Input + output tokens of the session's messages since its last compaction summary."""
        messages = await self._call("messages", lambda c: c.messages(session))
        total = 0
        for message in messages or []:
            info = message.get("info") or {}
            if info.get("summary") is True:
                total = 0
            tokens = info.get("tokens") or {}
            total += int(tokens.get("input") or 0) + int(tokens.get("output") or 0)
        return total

    async def summarize(self, session: str, model: dict[str, str]) -> None:
        await self._call("summarize", lambda c: c.summarize(session, model, timeout=600.0))

    async def archive(self, session: str) -> None:
        await self._call("archive", lambda c: c.archive(session))

    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None:
        await self._call(
            "heartbeat prompt", lambda c: c.prompt(session, text, agent=agent, model=model, timeout=1800.0)
        )
