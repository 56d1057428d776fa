"""What happens in the engine when opencode (through the shim) reports something or asks for
something: system prompts, history, finished assistant responses, compaction, session events. Tool
calls and permissions are engine.toolstages'.

The shim forwards; this module decides. What opencode need not wait for (a finished response, a
session event) is accepted at once and done in the background; a `continue` that comes of it is sent
to opencode by the engine itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from engine.core.background import Background
from engine.hooks.protocols import SYSTEM_APPEND
from engine.opencode.afterturn import AfterTurn
from engine.opencode.followups import Followups
from engine.opencode.loops import Loops
from engine.opencode.models import ModelMemory
from engine.opencode.sessions import SessionStore
from engine.opencode.toolstages import ToolStages
from engine.protocol.opencode import ABORTED_ERROR, OWN_AGENTS, own_call_kind
from engine.protocol.records import StageResult
from engine.protocol.stages import Stage
from engine.workspace.config import Config

log = logging.getLogger("evolve.bridge")

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]
SendContinue = Callable[[str, str, "str | None", "dict[str, str] | None", "str | None"], Awaitable[None]]
Abort = Callable[[str, "str | None"], Awaitable[None]]


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


def last_user_text(history: list[Any]) -> str:
    """The text of the last user message of a history (hcp's `user` of mutate_request)."""
    for entry in reversed(history):
        if isinstance(entry, dict) and entry.get("role") == "user":
            parts = entry.get("parts") or []
            return "\n".join(
                p["text"]
                for p in parts
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            )
    return ""


def model_name(model: object) -> str | None:
    """`provider/model` from opencode's model object (`{providerID, id}` or `{providerID, modelID}`)."""
    if not isinstance(model, dict):
        return None
    provider, name = model.get("providerID"), model.get("modelID") or model.get("id")
    return f"{provider}/{name}" if isinstance(provider, str) and isinstance(name, str) else None


def _strings(value: object) -> list[str] | None:
    if isinstance(value, list) and value and all(isinstance(s, str) for s in value):
        return list(value)
    return None


@dataclass
class SystemAnswer:
    """What the shim does with an LLM request's system prompt: `system` replaces opencode's (None
    keeps it), `cacheable` lets the shim keep it for the session, `cancel` (a text) skips the call."""

    system: list[str] | None
    reason: str
    cacheable: bool = False
    cancel: str | None = None


class Bridge:
    def __init__(
        self,
        dispatch: Dispatch,
        handled: Callable[[str], bool],
        sessions: SessionStore,
        models: ModelMemory,
        config: Callable[[], Config],
        followups: Followups,
        background: Background,
        compaction_prompt: Callable[[], str],
        heartbeat_session: Callable[[], str | None],
        loops: Loops,
        tools: ToolStages,
        send_continue: SendContinue,
        abort: Abort,
        command_of: Callable[[str | None], str | None],
        warn: Callable[[str, str], None],
    ) -> None:
        self._dispatch = dispatch
        self._handled = handled
        self._sessions = sessions
        self._models = models
        self._config = config
        self._followups = followups
        self._background = background
        self._compaction_prompt = compaction_prompt
        self._heartbeat_session = heartbeat_session
        self._loops = loops
        self.tools = tools
        self._send_continue = send_continue
        self._abort = abort
        self._command_of = command_of
        self._warn = warn
        self._observed: set[str] = set()  # assistant message ids already handled
        self.after_turn = AfterTurn(dispatch, handled, loops, sessions, abort, warn)

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

    def command(self, session: str | None) -> str | None:
        """The subcommand of the opencode the session lives in (run, serve; None: the TUI or unknown)."""
        found = self._sessions.find(session) if session else None
        return self._command_of(found.connection if found else None)

    # ---- system prompts ---------------------------------------------------------------------------

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
        replace, append = _strings(merged.get("system")), _strings(merged.get(SYSTEM_APPEND))
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
        if _compaction_request(history) or not self._handled(Stage.BEFORE_TURN):
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
        parts = _strings(system)
        return {"system": parts} if parts else {}

    # ---- user messages, compaction ---------------------------------------------------------------

    def chat_message(
        self, session: str | None, agent: str | None, model: dict[str, str] | None, synthetic: bool = False
    ) -> None:
        """A user message: a new loop; the session's agent and model, and the last chat model. A
        synthetic one (a notification, a heartbeat prompt) says nothing about the chat: its agent is
        evolve's."""
        if session:
            self._loops.user_message(session)
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

    async def compacting(self, session: str | None, prompt: str | None = None) -> str | None:
        """`prompt` from the hooks, else prompts/compaction.md. hcp hooks also get the instructions
        that apply if they say nothing (`prompt`: prompts/compaction.md, or "" for opencode's own)."""
        default = self._compaction_prompt()
        hcp = {"session": {"id": session}, "prompt": prompt or default or ""}
        result = await self._dispatch(
            "compacting", {"session": {"id": session}}, session=session, hcp_context=hcp
        )
        answer = result.merged.get("prompt")
        if isinstance(answer, str) and answer:
            return answer
        return default or None

    # ---- finished responses ----------------------------------------------------------------------

    def accept_assistant(self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        """A finished response, accepted at once: its stages run in the background, so opencode (and
        its exit) never waits for them."""
        self._background.spawn(self.assistant_finished(session, message, parts), "observe_message", busy=True)

    async def assistant_finished(
        self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """observe_message; then, when the response made no tool calls (the loop stops), idle
        (opencode-evolve) and before_stop (hcp); on_error for a failed response. A `continue` is sent
        to the session as a new turn. Returns that continue (`{"text", "agent", "model"}`), or None."""
        message_id = str(message.get("id") or "")
        if message_id and message_id in self._observed:
            return None
        if message_id:
            self._observed.add(message_id)
        self._count_tokens(session, message)
        if message.get("summary") or message.get("agent") in OWN_AGENTS:
            return None  # opencode's own summary or title, not the agent's answer
        self._loops.response_finished(session, message.get("tokens"))
        agent = message.get("agent") or self._sessions.get(session).agent
        if agent in OWN_AGENTS:
            agent = None
        if agent:
            self._sessions.update(session, agent=agent)
        thinking, calls, answer = response_context(parts)
        turn = message.get("turn") if isinstance(message.get("turn"), str) else None
        observed = await self._dispatch(
            "observe_message",
            {
                "session": {"id": session, "agent": agent},
                "thinking": thinking,
                "calls": calls,
                "answer": answer,
            },
            session=session,
            turn=turn,
        )
        self._followups.after_result(observed.merged, source=session)
        if self._handled(Stage.AFTER_TURN):
            stopped = await self.after_turn.finished(session, message, thinking, calls, answer, turn)
            if stopped:
                return None
        error = message.get("error") if isinstance(message.get("error"), dict) else None
        if error is not None and error.get("name") != ABORTED_ERROR:
            self._on_error(session, error)
        if calls:
            return None
        texts = []
        idle = await self._dispatch(
            "idle", {"session": {"id": session, "agent": agent}, "answer": answer}, session=session, turn=turn
        )
        texts.append(idle.merged.get("continue"))
        final = self.command(session) == "run"
        if self._handled(Stage.BEFORE_STOP):
            stop = await self._dispatch(
                "before_stop",
                None,
                session=session,
                turn=turn,
                hcp_context={
                    "session": {"id": session, "agent": agent},
                    "transcript": self._sessions.history(session),
                    "exit_reason": _exit_reason(error),
                    "error": _error_text(error) if error else None,
                    "usage": self._loops.usage(session),
                    "final": final,
                    "turn": self._loops.last_turn(session),
                    "answer": answer,
                },
            )
            texts.append(stop.merged.get("continue"))
        text = "\n".join(t for t in texts if isinstance(t, str) and t)
        if not text:
            return None
        follow = {
            "text": text,
            "agent": agent or self._config().heartbeat_agent,
            "model": self._models.current(),
        }
        await self._continue(session, follow, final)
        return follow

    async def _continue(self, session: str, follow: dict[str, Any], final: bool) -> None:
        if final:
            # `opencode run` leaves its loop a few ms after a response ends and has no server to
            # take a later prompt: the new turn cannot happen in that process.
            self._warn(
                "continue",
                f"idle continue for {session} came after opencode finished the turn; under `opencode run` "
                "it cannot start a new turn in this process (it does under serve and the TUI)",
            )
            return
        found = self._sessions.find(session)
        try:
            await self._send_continue(
                session, follow["text"], follow["agent"], follow["model"], found.connection if found else None
            )
        except Exception as exc:
            self._warn("continue", f"the continue for {session} could not be sent: {exc}")

    def _on_error(self, session: str, error: dict[str, Any]) -> None:
        if not self._handled(Stage.ON_ERROR):
            return
        context = {
            "session": {"id": session},
            # opencode names the errors of the model call; a response cut short is a stream error.
            "phase": "stream" if error.get("name") == "MessageOutputLengthError" else "request",
            "error": _error_text(error),
            "recoverable": False,
            "name": error.get("name"),
        }
        self._background.spawn(
            self._dispatch("on_error", None, session=session, hcp_context=context), "on_error", busy=True
        )

    def _count_tokens(self, session: str, message: dict[str, Any]) -> None:
        """The session's tokens since its last compaction, as opencode counts them: a summary starts
        the count again."""
        tokens = message.get("tokens")
        if not isinstance(tokens, dict):
            return
        used = int(tokens.get("input") or 0) + int(tokens.get("output") or 0)
        before = 0 if message.get("summary") else (self._sessions.get(session).tokens or 0)
        self._sessions.update(session, tokens=before + used)

    # ---- opencode's events ------------------------------------------------------------------------

    def event(self, event: dict[str, Any], connection: str | None = None) -> None:
        """opencode's events: titles, busy state, deletions; permission requests and failed tools."""
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
        elif kind == "permission.asked":
            self.tools.permission_asked(props)
        elif kind == "permission.replied":
            self.tools.permission_replied(props)
        elif kind == "message.part.updated":
            part = props.get("part") or {}
            state = part.get("state") or {}
            if part.get("type") == "tool" and state.get("status") == "error":
                error = state.get("error")
                self.tools.tool_failed(
                    part.get("sessionID"), part.get("callID"), part.get("tool"), str(error or "failed")
                )


def _compaction_request(history: list[Any]) -> bool:
    """Whether the request is opencode's compaction of the session: its last user message holds the
    compaction part opencode adds."""
    for entry in reversed(history):
        if isinstance(entry, dict) and entry.get("role") == "user":
            return any(
                isinstance(p, dict) and p.get("type") == "compaction" for p in entry.get("parts") or []
            )
    return False


def _exit_reason(error: dict[str, Any] | None) -> str:
    if error is None:
        return "stop"
    return "cancel" if error.get("name") == ABORTED_ERROR else "error"


def _error_text(error: dict[str, Any]) -> str:
    data = error.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    return message if isinstance(message, str) and message else str(error.get("name") or "error")
