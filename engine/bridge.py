"""What happens in the engine when opencode (through the shim) reports something or asks for
something: system prompts, history, finished assistant responses, tool calls, compaction, sessions.

The shim forwards; this module decides.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from .background import Background
from .config import Config
from .followups import Followups
from .models import ModelMemory
from .protocol.opencode import OWN_AGENTS, own_call_kind
from .protocol.records import StageResult
from .sessions import SessionStore

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]


def history_entry(message: dict[str, Any]) -> dict[str, Any]:
    """`{role, agent, parts}` from opencode's `{info, parts}`: the history hooks receive."""
    info = message.get("info") or {}
    return {"role": info.get("role"), "agent": info.get("agent"), "parts": message.get("parts") or []}


def response_context(parts: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """thinking, tool calls and answer of one assistant response."""
    thinking = "\n".join(p.get("text", "") for p in parts if p.get("type") == "reasoning" and p.get("text"))
    calls = [p for p in parts if p.get("type") == "tool"]
    answer = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text" and p.get("text"))
    return thinking, calls, answer


class Bridge:
    def __init__(
        self,
        dispatch: Dispatch,
        sessions: SessionStore,
        models: ModelMemory,
        config: Callable[[], Config],
        followups: Followups,
        background: Background,
        compaction_prompt: Callable[[], str],
        heartbeat_session: Callable[[], str | None],
    ) -> None:
        self._dispatch = dispatch
        self._sessions = sessions
        self._models = models
        self._config = config
        self._followups = followups
        self._background = background
        self._compaction_prompt = compaction_prompt
        self._heartbeat_session = heartbeat_session
        self._observed: set[str] = set()  # assistant message ids already handled

    def seen(self, session: str | None, connection: str | None) -> None:
        """A request about `session` came through the opencode connection `connection`."""
        if session and connection:
            self._sessions.update(session, connection=connection)

    def turn_context(self, session: str | None, context: dict[str, Any] | None) -> dict[str, Any] | None:
        """What the agent said in this turn up to a tool call: the text and reasoning of its earlier
        responses since the user's last message (from the history), then of the calling one."""
        if context is None:
            return None
        earlier: dict[str, list[str]] = {"text": [], "reasoning": []}
        for entry in reversed(self._sessions.history(session) if session else []):
            if entry.get("role") == "user":
                break
            for kind, found in earlier.items():
                said = [p.get("text") for p in entry.get("parts") or [] if p.get("type") == kind]
                found[:0] = [str(t) for t in said if t]
        return {
            kind: "\n".join([*earlier[kind], str(context.get(kind) or "")]).strip()
            for kind in ("text", "reasoning")
        }

    def take_history(self, session: str | None, history: list[dict[str, Any]] | None) -> None:
        if session and history is not None:
            self._sessions.set_history(session, [history_entry(m) for m in history])

    async def system(self, session: str | None, system: list[str]) -> tuple[list[str] | None, str, bool]:
        """The system prompt for an LLM request, why, and whether the shim may keep it for the
        session: (None, reason, False) keeps opencode's own."""
        if not session:
            return None, "no session id", False
        kind = own_call_kind(system)
        if kind:
            return None, f"{kind} call keeps opencode's prompt", False
        result = await self.request_system(session, system)
        if result is None:
            return None, "hooks abstained", False
        # A frozen prompt never changes, so the shim may keep it; not the heartbeat session's,
        # which each tick seeds anew.
        return result, "frozen", session != self._heartbeat_session()

    async def request_system(self, session: str, system: list[str]) -> list[str] | None:
        """The session's frozen prompt, or mutate_request's answer, frozen if non-empty. None means:
        keep opencode's own (docs/hooks.md, "mutate_request")."""
        frozen = self._sessions.frozen(session)
        if frozen is not None:
            return frozen
        self._sessions.get(session)
        result = await self._dispatch(
            "mutate_request", {"session": {"id": session}, "system": system}, session=session
        )
        proposed = result.merged.get("system")
        if isinstance(proposed, list) and proposed and all(isinstance(s, str) for s in proposed):
            self._sessions.freeze(session, proposed)
            return proposed
        return None

    def chat_message(
        self, session: str | None, agent: str | None, model: dict[str, str] | None, synthetic: bool = False
    ) -> None:
        """A user message: the session's agent and model, and the last chat model. A synthetic one
        (a notification, a heartbeat prompt) says nothing about the chat: its agent is evolve's."""
        if synthetic:
            if session:
                self._sessions.get(session)
            return
        if session:
            fields: dict[str, Any] = {"agent": agent} if agent else {}
            if model:
                fields["model"] = model
            self._sessions.update(session, **fields)
        if model and model.get("providerID") and model.get("modelID"):
            self._models.note(model)

    def tool_before(self, session: str | None, tool: str, call_id: str | None, args: Any) -> None:
        context = {"session": {"id": session}, "tool": tool, "callID": call_id, "args": args}
        self._background.spawn(self._dispatch("tool_before", context, session=session), "tool_before")

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
        self._background.spawn(self._dispatch("tool_after", context, session=session), "tool_after")

    async def compacting(self, session: str | None) -> str | None:
        """`prompt` from the hooks, else prompts/compaction.md."""
        result = await self._dispatch("compacting", {"session": {"id": session}}, session=session)
        prompt = result.merged.get("prompt")
        if isinstance(prompt, str) and prompt:
            return prompt
        return self._compaction_prompt() or None

    async def assistant_finished(
        self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """observe_message, then idle when the response made no tool calls. Returns what the shim
        should send to continue (`{"text", "agent", "model"}`), or None."""
        message_id = str(message.get("id") or "")
        if message_id and message_id in self._observed:
            return None
        if message_id:
            self._observed.add(message_id)
        self._count_tokens(session, message)
        if message.get("summary") or message.get("agent") in OWN_AGENTS:
            return None  # opencode's own summary or title, not the agent's answer
        agent = message.get("agent") or self._sessions.get(session).agent
        if agent in OWN_AGENTS:
            agent = None
        if agent:
            self._sessions.update(session, agent=agent)
        thinking, calls, answer = response_context(parts)
        observed = await self._dispatch(
            "observe_message",
            {
                "session": {"id": session, "agent": agent},
                "thinking": thinking,
                "calls": calls,
                "answer": answer,
            },
            session=session,
        )
        self._followups.after_result(observed.merged, source=session)
        if calls:
            return None
        idle = await self._dispatch(
            "idle", {"session": {"id": session, "agent": agent}, "answer": answer}, session=session
        )
        text = idle.merged.get("continue")
        if isinstance(text, str) and text:
            return {
                "text": text,
                "agent": agent or self._config().heartbeat_agent,
                "model": self._models.current(),
            }
        return None

    def _count_tokens(self, session: str, message: dict[str, Any]) -> None:
        """The session's tokens since its last compaction, as opencode counts them: a summary starts
        the count again."""
        tokens = message.get("tokens")
        if not isinstance(tokens, dict):
            return
        used = int(tokens.get("input") or 0) + int(tokens.get("output") or 0)
        before = 0 if message.get("summary") else (self._sessions.get(session).tokens or 0)
        self._sessions.update(session, tokens=before + used)

    def event(self, event: dict[str, Any], connection: str | None = None) -> None:
        """opencode's session events: titles, busy state, deletions."""
        kind = event.get("type")
        props = event.get("properties") or {}
        if kind in ("session.created", "session.updated"):
            info = props.get("info") or {}
            if info.get("id"):
                fields: dict[str, Any] = {"title": info["title"]} if info.get("title") else {}
                if connection:
                    fields["connection"] = connection
                self._sessions.update(info["id"], **fields)
        elif kind == "session.deleted":
            info = props.get("info") or {}
            self._sessions.forget(info.get("id"))
        elif kind == "session.status":
            sid = props.get("sessionID")
            if sid:
                busy = (props.get("status") or {}).get("type") not in (None, "idle")
                self._sessions.update(sid, busy=busy)
        elif kind == "session.idle":
            sid = props.get("sessionID")
            if sid:
                self._sessions.update(sid, busy=False)
