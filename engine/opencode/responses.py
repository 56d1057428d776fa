"""The agent's finished responses: observe_message, then, when the loop stops, idle and before_stop
(a `continue` of theirs sent to the session as a new turn), hcp's after_turn (which may stop the
loop) and on_error; and the session's token count."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from engine.core.background import Background
from engine.opencode.afterturn import AfterTurn
from engine.opencode.followups import Followups
from engine.opencode.loops import Loops
from engine.opencode.messages import error_text, exit_reason, response_context
from engine.opencode.models import ModelMemory
from engine.opencode.sessions import SessionStore
from engine.protocol.opencode import ABORTED_ERROR, OWN_AGENTS
from engine.protocol.records import StageResult
from engine.protocol.stages import Stage
from engine.workspace.config import Config

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]
SendContinue = Callable[[str, str, "str | None", "dict[str, str] | None", "str | None"], Awaitable[None]]
Abort = Callable[[str, "str | None"], Awaitable[None]]


class Responses:
    """What the engine does once a response of the agent is finished. `command(session)` is the
    subcommand of the opencode the session lives in; `warn(stage, text)` tells the operator."""

    def __init__(
        self,
        dispatch: Dispatch,
        handled: Callable[[str], bool],
        sessions: SessionStore,
        models: ModelMemory,
        config: Callable[[], Config],
        followups: Followups,
        background: Background,
        loops: Loops,
        send_continue: SendContinue,
        abort: Abort,
        command: Callable[[str | None], str | None],
        warn: Callable[[str, str], None],
        after_turn: AfterTurn,
    ) -> None:
        self._after_turn = after_turn
        self._dispatch = dispatch
        self._handled = handled
        self._sessions = sessions
        self._models = models
        self._config = config
        self._followups = followups
        self._background = background
        self._loops = loops
        self._send_continue = send_continue
        self._abort = abort
        self._command = command
        self._warn = warn
        self._observed: set[str] = set()  # assistant message ids already handled

    def accept(self, session: str, message: dict[str, Any], parts: list[dict[str, Any]]) -> None:
        """A finished response, accepted at once: its stages run in the background, so opencode (and
        its exit) never waits for them."""
        self._background.spawn(self.finished(session, message, parts), "observe_message", busy=True)

    async def finished(
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
            stopped = await self._after_turn.finished(session, message, thinking, calls, answer, turn)
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
        final = self._command(session) == "run"
        if self._handled(Stage.BEFORE_STOP):
            stop = await self._dispatch(
                "before_stop",
                None,
                session=session,
                turn=turn,
                hcp_context={
                    "session": {"id": session, "agent": agent},
                    "transcript": self._sessions.history(session),
                    "exit_reason": exit_reason(error),
                    "error": error_text(error) if error else None,
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
            "error": error_text(error),
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
