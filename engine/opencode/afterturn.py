"""hcp's after_turn: once for each response of the agent, at the earliest moment opencode 1.18 lets a
plugin act on it.

opencode awaits the plugin hook `experimental.text.complete` at the end of each text part of a
response and stores the text the plugin gives back. So a response with text runs after_turn there,
awaited, and a `text` in the answer replaces the stored text of that part (what opencode already
streamed to the screen stays shown). The tokens are counted only after that, so `usage` is null then.
A response without text runs after_turn when it is finished, in the background, with its tokens.

A `stop` is acted on when the response is finished: when it called tools (the loop goes on), the
session's turn is cancelled, as the user's cancel does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from engine.opencode.loops import Loops, add_tokens
from engine.opencode.sessions import SessionStore
from engine.protocol.opencode import OWN_AGENTS
from engine.protocol.records import StageResult
from engine.protocol.stages import Stage

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]
Abort = Callable[[str, "str | None"], Awaitable[None]]
MAX_EARLY = 1000  # responses whose after_turn ran at their text, kept until they finish


def response_parts(parts: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """thinking, tool calls and answer (its text parts joined) of one assistant response."""
    thinking = "\n".join(p.get("text", "") for p in parts if p.get("type") == "reasoning" and p.get("text"))
    calls = [p for p in parts if p.get("type") == "tool"]
    answer = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text" and p.get("text"))
    return thinking, calls, answer


def assistant_of(thinking: str, calls: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    """hcp's `assistant`: `{text, reasoning?, tool_calls: [{id, name, args}]}`."""
    tool_calls = [
        {"id": c.get("callID"), "name": c.get("tool"), "args": (c.get("state") or {}).get("input")}
        for c in calls
    ]
    assistant: dict[str, Any] = {"text": answer, "tool_calls": tool_calls}
    if thinking:
        assistant["reasoning"] = thinking
    return assistant


class AfterTurn:
    def __init__(
        self,
        dispatch: Dispatch,
        handled: Callable[[str], bool],
        loops: Loops,
        sessions: SessionStore,
        abort: Abort,
        warn: Callable[[str, str], None],
    ) -> None:
        self._dispatch = dispatch
        self._handled = handled
        self._loops = loops
        self._sessions = sessions
        self._abort = abort
        self._warn = warn
        # message id -> the `stop` its after_turn gave at its text (None: none), until it finishes
        self._early: dict[str, str | None] = {}

    async def text_complete(
        self,
        session: str,
        message: dict[str, Any],
        part: str | None,
        text: str,
        parts: list[dict[str, Any]],
        turn: str | None = None,
    ) -> dict[str, Any]:
        """opencode completed a text part of a response: after_turn, once per response, when that
        has text and a hook handles the stage. Returns `{"text": ...}`, the text opencode stores for
        the part instead, or `{}`."""
        message_id = str(message.get("id") or "")
        if (
            not message_id
            or message_id in self._early
            or not text.strip()
            or message.get("summary")
            or message.get("agent") in OWN_AGENTS
            or not self._handled(Stage.AFTER_TURN)
        ):
            return {}
        # The part as opencode completed it (the parts the plugin saw may lag behind its stream).
        parts = [p for p in parts if not (part and p.get("id") == part)]
        parts.append({"type": "text", "id": part, "text": text})
        thinking, calls, answer = response_parts(parts)
        if len(self._early) >= MAX_EARLY:
            self._early.pop(next(iter(self._early)))
        self._early[message_id] = None
        result = await self._dispatch(
            "after_turn",
            None,
            session=session,
            turn=turn,
            hcp_context={
                "session": {"id": session},
                "turn": self._loops.turn(session),
                "assistant": assistant_of(thinking, calls, answer),
                "usage": None,  # opencode counts the response's tokens after its text
            },
        )
        stop = result.merged.get("stop")
        if message_id in self._early:
            self._early[message_id] = stop if isinstance(stop, str) and stop else None
        replaced = result.merged.get("text")
        return {"text": replaced} if isinstance(replaced, str) else {}

    async def finished(
        self,
        session: str,
        message: dict[str, Any],
        thinking: str,
        calls: list[dict[str, Any]],
        answer: str,
        turn: str | None,
    ) -> bool:
        """The response is finished: after_turn now unless it ran at the response's text; a `stop`
        while the loop goes on (the response called tools) stops it by cancelling the session's turn.
        Returns whether it stopped."""
        message_id = str(message.get("id") or "")
        if message_id and message_id in self._early:
            stop = self._early.pop(message_id)
        else:
            usage: dict[str, int] = {}
            tokens = message.get("tokens")
            if isinstance(tokens, dict):
                add_tokens(usage, tokens)
            result = await self._dispatch(
                "after_turn",
                None,
                session=session,
                turn=turn,
                hcp_context={
                    "session": {"id": session},
                    "turn": self._loops.last_turn(session),
                    "assistant": assistant_of(thinking, calls, answer),
                    "usage": usage,
                },
            )
            found_stop = result.merged.get("stop")
            stop = found_stop if isinstance(found_stop, str) and found_stop else None
        if not (stop and calls):
            return False
        found = self._sessions.find(session)
        try:
            await self._abort(session, found.connection if found else None)
        except Exception as exc:
            self._warn("after_turn", f"stopping {session} failed: {exc}")
            return False
        return True
