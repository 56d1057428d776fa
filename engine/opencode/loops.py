"""Where each session is in its agent loop: which LLM round trip (turn) it is on since the last user
message, and the tokens the loop used so far. hcp's payloads carry both (`turn`, `usage`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_SESSIONS = 1000  # loops kept; the oldest is dropped beyond that


@dataclass
class Loop:
    finished: int = 0  # assistant responses (LLM round trips) finished since the user message
    usage: dict[str, int] = field(default_factory=dict)


def add_tokens(total: dict[str, int], tokens: dict[str, Any]) -> None:
    """opencode's token counts (`input`, `output`, `reasoning`, `cache.read`, `cache.write`) added up."""
    for key in ("input", "output", "reasoning"):
        value = tokens.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + int(value)
    cache = tokens.get("cache")
    if isinstance(cache, dict):
        for key in ("read", "write"):
            value = cache.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[f"cache_{key}"] = total.get(f"cache_{key}", 0) + int(value)


class Loops:
    def __init__(self) -> None:
        self._loops: dict[str, Loop] = {}

    def _get(self, session: str) -> Loop:
        loop = self._loops.get(session)
        if loop is None:
            if len(self._loops) >= MAX_SESSIONS:
                self._loops.pop(next(iter(self._loops)))
            loop = self._loops[session] = Loop()
        return loop

    def user_message(self, session: str) -> None:
        """A user message starts a new loop."""
        self._loops[session] = Loop()

    def response_finished(self, session: str, tokens: object) -> None:
        loop = self._get(session)
        loop.finished += 1
        if isinstance(tokens, dict):
            add_tokens(loop.usage, tokens)

    def turn(self, session: str | None) -> int:
        """The round trip in progress, counting from 1 (a tool call belongs to the response being
        streamed, which is not finished yet)."""
        return self._get(session).finished + 1 if session else 1

    def last_turn(self, session: str) -> int:
        """The round trip that just finished (what before_stop reports)."""
        return max(self._get(session).finished, 1)

    def usage(self, session: str) -> dict[str, int]:
        return dict(self._get(session).usage)
