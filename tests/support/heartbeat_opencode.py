"""A stand-in for what a heartbeat tick asks of opencode (engine.heartbeat.tick.Opencode), for engine
tests that fire ticks without an opencode: no session is busy, sessions are created by number, and
every message sent is kept."""

from __future__ import annotations


class QuietOpencode:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str, dict[str, str]]] = []  # (session, text, agent, model)
        self._n = 0

    async def busy_sessions(self) -> set[str]:
        return set()

    async def create_session(self, title: str) -> str:
        self._n += 1
        return f"ses_hb{self._n}"

    async def session_tokens(self, session: str) -> int:
        return 0

    async def summarize(self, session: str, model: dict[str, str]) -> None:
        return None

    async def archive(self, session: str) -> None:
        return None

    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None:
        self.sent.append((session, text, agent, model))
