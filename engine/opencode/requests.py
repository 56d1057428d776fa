"""The agent's LLM requests: the session's system prompt (frozen, or composed by mutate_request)
and hcp's before_turn, before each round trip."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from engine.hooks.protocols import SYSTEM_APPEND
from engine.opencode.loops import Loops
from engine.opencode.messages import compaction_request, last_user_text, model_name, strings
from engine.opencode.sessions import SessionStore
from engine.protocol.opencode import own_call_kind
from engine.protocol.records import StageResult
from engine.protocol.stages import Stage

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]


@dataclass
class SystemAnswer:
    """What the shim does with an LLM request's system prompt: `system` replaces opencode's (None
    keeps it), `cacheable` lets the shim keep it for the session, `cancel` (a text) skips the call."""

    system: list[str] | None
    reason: str
    cacheable: bool = False
    cancel: str | None = None


class Requests:
    """What the hooks make of each LLM request: its system prompt, and before_turn."""

    def __init__(
        self,
        dispatch: Dispatch,
        handled: Callable[[str], bool],
        sessions: SessionStore,
        heartbeat_session: Callable[[], str | None],
        loops: Loops,
    ) -> None:
        self._dispatch = dispatch
        self._handled = handled
        self._sessions = sessions
        self._heartbeat_session = heartbeat_session
        self._loops = loops

    async def system(
        self,
        session: str | None,
        system: list[str],
        *,
        model: object = None,
        tools: list[str] | None = None,
        turn: str | None = None,
    ) -> SystemAnswer:
        """The system prompt for an LLM request, and why. `turn`: the user message it is for."""
        if not session:
            return SystemAnswer(None, "no session id")
        kind = own_call_kind(system)
        if kind:
            return SystemAnswer(None, f"{kind} call keeps opencode's prompt")
        answer = await self.compose(session, system, model=model, tools=tools, turn=turn)
        if answer.cancel is not None or answer.system is None:
            return answer
        # A frozen prompt never changes, so the shim may keep it; not the heartbeat session's,
        # which each tick seeds anew.
        answer.cacheable = session != self._heartbeat_session()
        return answer

    async def request_system(
        self, session: str, system: list[str], turn: str | None = None
    ) -> list[str] | None:
        """The session's frozen prompt, or mutate_request's answer, frozen if non-empty. None means:
        keep opencode's own (docs/hooks.md, "mutate_request")."""
        return (await self.compose(session, system, turn=turn)).system

    async def compose(
        self,
        session: str,
        system: list[str],
        *,
        model: object = None,
        tools: list[str] | None = None,
        turn: str | None = None,
    ) -> SystemAnswer:
        """The frozen prompt, or mutate_request: a `system` that replaces opencode's (every
        opencode-evolve answer, hcp's with `system_mode: replace`), then the parts appended after it
        (hcp's default); frozen when there is any. A `cancel` skips this request, freezing nothing."""
        frozen = self._sessions.frozen(session)
        if frozen is not None:
            return SystemAnswer(frozen, "frozen")
        known = self._sessions.get(session)
        hcp: dict[str, Any] = {
            "session": {"id": session},
            "system": "\n".join(system),
            "user": last_user_text(self._sessions.history(session)),
            "model": model_name(model) or model_name(known.model),
        }
        if tools is not None:
            hcp["tools"] = tools
        result = await self._dispatch(
            "mutate_request",
            {"session": {"id": session}, "system": system},
            session=session,
            hcp_context=hcp,
            turn=turn,
        )
        merged = result.merged
        cancel = merged.get("cancel")
        if isinstance(cancel, str) and cancel:
            text = merged.get("result")
            return SystemAnswer(
                None, "cancelled by the hooks", cancel=text if isinstance(text, str) and text else cancel
            )
        replace, append = strings(merged.get("system")), strings(merged.get(SYSTEM_APPEND))
        if replace is None and append is None:
            return SystemAnswer(None, "hooks abstained")
        composed = (replace or list(system)) + (append or [])
        self._sessions.freeze(session, composed)
        return SystemAnswer(composed, "frozen")

    async def before_turn(self, session: str, tools: list[str] | None) -> dict[str, Any]:
        """hcp's before_turn, before each LLM round trip of the agent (opencode's compaction calls
        excluded): `{"system": [...]}`, parts the shim adds to this request's system prompt only, or
        `{"skip": text}`, which ends the loop with that text (opencode lets a plugin skip a request
        only by failing it)."""
        history = self._sessions.history(session)
        if compaction_request(history) or not self._handled(Stage.BEFORE_TURN):
            return {}
        context: dict[str, Any] = {
            "session": {"id": session},
            "turn": self._loops.turn(session),
            "history": history,
        }
        if tools is not None:
            context["tools"] = tools
        merged = (await self._dispatch("before_turn", None, session=session, hcp_context=context)).merged
        skip = merged.get("skip")
        if isinstance(skip, str) and skip:
            return {"skip": skip}
        system = merged.get("system")
        if isinstance(system, str) and system:
            system = [system]
        parts = strings(system)
        return {"system": parts} if parts else {}
