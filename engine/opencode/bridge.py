"""What happens in the engine when opencode (through the shim) reports something or asks for
something: system prompts, history, finished assistant responses, compaction, session events. Tool
calls and permissions are engine.opencode.toolstages'.

The shim forwards; this module decides. What opencode need not wait for (a finished response, a
session event) is accepted at once and done in the background; a `continue` that comes of it is sent
to opencode by the engine itself.

`Bridge` (here) is what the API calls; the LLM requests are `requests`' (the system prompt,
before_turn), the finished responses `responses`' (observe_message, after_turn, on_error, idle,
before_stop, the `continue`), and how the engine reads opencode's messages `messages`'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.core.background import Background
from engine.opencode.afterturn import AfterTurn
from engine.opencode.followups import Followups
from engine.opencode.loops import Loops
from engine.opencode.messages import history_entry
from engine.opencode.models import ModelMemory
from engine.opencode.requests import Requests, SystemAnswer
from engine.opencode.responses import Abort, Dispatch, Responses, SendContinue
from engine.opencode.sessions import SessionStore
from engine.opencode.toolstages import ToolStages
from engine.workspace.config import Config


class Bridge:
    """The engine's side of opencode's hooks and events. The LLM requests are `Requests`', the
    finished responses `Responses`'; the rest (sessions, user messages, compaction, events) is here."""

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
        self._sessions = sessions
        self._models = models
        self._compaction_prompt = compaction_prompt
        self._loops = loops
        self.tools = tools
        self._command_of = command_of
        self._requests = Requests(dispatch, handled, sessions, heartbeat_session, loops)
        self.after_turn = AfterTurn(dispatch, handled, loops, sessions, abort, warn)
        self._responses = Responses(
            dispatch,
            handled,
            sessions,
            models,
            config,
            followups,
            background,
            loops,
            send_continue,
            abort,
            self.command,
            warn,
            self.after_turn,
        )

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

    # ---- LLM requests (Requests) -----------------------------------------------------------------

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
        return await self._requests.system(session, system, model=model, tools=tools, turn=turn)

    async def request_system(
        self, session: str, system: list[str], turn: str | None = None
    ) -> list[str] | None:
        """The session's frozen prompt, or mutate_request's answer, frozen if non-empty. None means:
        keep opencode's own (docs/hooks.md, "mutate_request")."""
        return await self._requests.request_system(session, system, turn=turn)

    async def compose(
        self,
        session: str,
        system: list[str],
        *,
        model: object = None,
        tools: list[str] | None = None,
        turn: str | None = None,
    ) -> SystemAnswer:
        """The frozen prompt, or mutate_request's (Requests.compose)."""
        return await self._requests.compose(session, system, model=model, tools=tools, turn=turn)

    async def before_turn(self, session: str, tools: list[str] | None) -> dict[str, Any]:
        """hcp's before_turn, before each LLM round trip of the agent (Requests.before_turn)."""
        return await self._requests.before_turn(session, tools)

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

    # ---- finished responses (Responses) ----------------------------------------------------------

    def accept_assistant(self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        """A finished response, accepted at once: its stages run in the background, so opencode (and
        its exit) never waits for them."""
        self._responses.accept(session, message, parts)

    async def assistant_finished(
        self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """A finished response's stages (Responses.finished); the `continue` sent, or None."""
        return await self._responses.finished(session, message, parts)

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
