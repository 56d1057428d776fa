"""What one heartbeat tick does: skip when other sessions are busy or no model is known, start or
clean up the heartbeat's session (compact, archive, new) when its count or tokens reach their
threshold, ask the hooks (the `heartbeat` stage) for a prompt, send it to that session, and commit
what the hooks changed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Protocol

from engine.changes.commits import Commits
from engine.journal.store import Journal
from engine.opencode.client import OpencodeUnreachable
from engine.opencode.sessions import SessionStore
from engine.protocol.records import Failure, StageResult, TickResult
from engine.tools.builtins import format_datetime
from engine.tools.host import CallContext
from engine.workspace.config import Config
from engine.workspace.layout import StateFile

log = logging.getLogger("evolve.heartbeat")


class Opencode(Protocol):
    """What a tick needs from opencode (engine.opencode.connections.OpencodeSessions, over HTTP).
    Raises OpencodeUnreachable when opencode does not answer."""

    async def busy_sessions(self) -> set[str]: ...
    async def create_session(self, title: str) -> str: ...
    async def session_tokens(self, session: str) -> int: ...
    async def summarize(self, session: str, model: dict[str, str]) -> None: ...
    async def archive(self, session: str) -> None: ...
    async def prompt(self, session: str, text: str, agent: str, model: dict[str, str]) -> None: ...


Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]
Explain = Callable[[StageResult], Awaitable[list[Failure]]]
"""The failures of a dispatch's failed hooks, each with its cause (engine.failures)."""


class Tick:
    """The work of a tick, filling in its `TickResult`. Keeps the heartbeat session's token total
    as last measured (`tokens`). `cleaned_up(cleanup)` is told of every cleanup, before it is
    journaled."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        state: StateFile,
        journal: Journal | None,
        dispatch: Dispatch,
        sessions: SessionStore,
        after_result: Callable[[dict[str, Any], str | None], None],
        commits: Commits,
        model: Callable[[], dict[str, str] | None],
        prompt: Callable[[], str],
        opencode: Opencode,
        recent_beats: Callable[[], list[dict[str, Any]]],
        cleaned_up: Callable[[dict[str, Any]], None],
        explain: Explain | None = None,
    ) -> None:
        self._config = config
        self._state_file = state
        self._journal = journal
        self._dispatch = dispatch
        self._sessions = sessions
        self._after_result = after_result
        self._commits = commits
        self._model = model
        self._prompt = prompt
        self.opencode = opencode
        self._recent_beats = recent_beats
        self._cleaned_up = cleaned_up
        self._explain = explain
        self.tokens: int | None = None  # the heartbeat session's token total, as last measured

    async def run(self, result: TickResult) -> None:
        config = self._config()
        model = self._model()
        result.model = model
        state = self._state_file.read()
        session = state.get("heartbeat_session") if isinstance(state.get("heartbeat_session"), str) else None
        if config.heartbeat_skip_active:
            busy = await self._busy()
            others = sorted(busy - {session} if session else busy)
            if others:
                result.outcome, result.reason = "skipped", f"other sessions active: {', '.join(others)}"
                return
        if model is None:
            result.outcome, result.reason = (
                "skipped",
                "no model: set `model` in the config or chat once first",
            )
            return
        if session is None:
            session = await self._new_session()
        result.session = session
        count = int(state.get("heartbeat_count") or 0)
        result.count = count
        cleanup = await self._cleanup_due(session, count, result)
        if cleanup is not None:
            busy = await self._busy()
            if busy:
                result.outcome = "skipped"
                result.reason = f"cleanup skipped (sessions busy: {', '.join(sorted(busy))})"
                return
            session = await self._cleanup(session, model, cleanup)
            result.cleanup = cleanup
            result.session = session
            count = 0
        # The tick commits what the hooks changed itself, as the heartbeat's (not as a stage's).
        # hcp hooks get the heartbeat session in their base payload and, as `history`, the recent beats.
        dispatched = await self._dispatch(
            "heartbeat",
            {"sessions": []},
            session=session,
            settle=False,
            hcp_context={"sessions": [], "history": self._recent_beats()},
        )
        result.dispatch_id = dispatched.id
        user, result.prompt = self._user(dispatched)
        degraded = bool(dispatched.failed) or dispatched.recovered
        if degraded and self._explain is not None:
            result.failures = await self._explain(dispatched)
        if user:
            system = dispatched.merged.get("system")
            if isinstance(system, list) and any(isinstance(s, str) and s for s in system):
                self._sessions.freeze(session, [str(s) for s in system])
            result.user = user
            try:
                await self.opencode.prompt(session, f"[heartbeat] {user}", config.heartbeat_agent, model)
            except OpencodeUnreachable:
                raise
            except Exception as exc:
                # The session is unusable (deleted, broken): the next tick starts a new one.
                self._state_file.update({"heartbeat_session": None, "heartbeat_count": 0})
                result.outcome, result.reason = "failed", f"prompt failed, session dropped: {exc}"
                return
            # The session record shows the model and agent its ticks use.
            self._sessions.update(session, model=model, agent=config.heartbeat_agent)
            count += 1
            await self._measure_tokens(session, result)
            self._state_file.update(
                {
                    "heartbeat_count": count,
                    "heartbeat_time": format_datetime(datetime.now(UTC)),
                    "heartbeat_session": session,
                }
            )
            result.count = count
        else:
            result.reason = "no user message (the hooks gave none and prompts/heartbeat.md is empty)"
        if degraded:
            result.outcome = "degraded"
            result.reason = degraded_reason(dispatched, result)
        self._after_result(dispatched.merged, session)
        async with self._commits.lock:
            await self._commits.commit_hook_changes(
                "heartbeat",
                {"Origin": "heartbeat", "Session": session, "Stage": "heartbeat"},
                None,
                "heartbeat",
                CallContext(session=session, origin="heartbeat"),
            )

    def _user(self, result: StageResult) -> tuple[str | None, str | None]:
        """`user` from the hooks, else the trimmed prompts/heartbeat.md; and where it came from."""
        user = result.merged.get("user")
        if isinstance(user, str) and user:
            if "user" in result.defaults:
                return user, "prompts/recover.md"
            return user, "recover" if result.recovered and result.failed else "hooks"
        fallback = self._prompt().strip() or None
        return fallback, "prompts/heartbeat.md" if fallback else None

    async def _measure_tokens(self, session: str, result: TickResult) -> None:
        """The session's token total after this tick's turn (the gauge shows what the next tick
        will compare with its threshold)."""
        try:
            self.tokens = result.tokens = await self.opencode.session_tokens(session)
        except Exception as exc:
            log.info("heartbeat: cannot read the token total of %s: %s", session, exc)

    async def _busy(self) -> set[str]:
        try:
            return await self.opencode.busy_sessions()
        except OpencodeUnreachable:
            raise
        except Exception as exc:
            raise OpencodeUnreachable(str(exc)) from exc

    async def _new_session(self) -> str:
        title = f"{self._config().heartbeat_title} ({format_datetime(datetime.now(UTC))})"
        session = await self.opencode.create_session(title)
        self._state_file.update({"heartbeat_session": session})
        # Announced with its title at once, not only when opencode's event about it arrives.
        self._sessions.update(session, title=title)
        return session

    async def _cleanup_due(self, session: str, count: int, result: TickResult) -> dict[str, Any] | None:
        """Each threshold on its own; the count is checked first."""
        config = self._config()
        if config.heartbeat_cleanup == "none":
            return None
        if config.heartbeat_cleanup_count is not None and count >= config.heartbeat_cleanup_count:
            return {
                "mode": config.heartbeat_cleanup,
                "due_to": "count",
                "count": count,
                "threshold": config.heartbeat_cleanup_count,
            }
        if config.heartbeat_cleanup_tokens is not None:
            try:
                tokens = await self.opencode.session_tokens(session)
            except Exception as exc:
                log.warning("heartbeat: cannot read the token total of %s: %s", session, exc)
                return None
            self.tokens = result.tokens = tokens
            if tokens >= config.heartbeat_cleanup_tokens:
                return {
                    "mode": config.heartbeat_cleanup,
                    "due_to": "tokens",
                    "tokens": tokens,
                    "threshold": config.heartbeat_cleanup_tokens,
                }
        return None

    async def _cleanup(self, session: str, model: dict[str, str], cleanup: dict[str, Any]) -> str:
        """Run the cleanup mode; the count is reset whatever happens."""
        mode = cleanup["mode"]
        new_session = session
        try:
            if mode == "compact":
                await self.opencode.summarize(session, model)
            elif mode == "archive":
                await self.opencode.archive(session)
                new_session = await self._new_session()
            elif mode == "new":
                new_session = await self._new_session()
            cleanup["ok"] = True
        except Exception as exc:
            cleanup["ok"] = False
            cleanup["error"] = str(exc)
        cleanup["from_session"] = session
        cleanup["to_session"] = new_session
        self._state_file.update({"heartbeat_count": 0, "heartbeat_session": new_session})
        self.tokens = None if new_session != session else self.tokens
        self._cleaned_up(cleanup)
        if self._journal is not None:
            self._journal.record_event("heartbeat_cleanup", cleanup)
        return new_session


PROMPT_SOURCES = {
    "hooks": "the hooks",
    "recover": "the recover stage's hooks",
    "prompts/recover.md": "prompts/recover.md (the recover defaults)",
    "prompts/heartbeat.md": "prompts/heartbeat.md (the fallback)",
}


def degraded_reason(dispatched: StageResult, result: TickResult) -> str:
    """Why a tick is degraded, in words: what failed, with its own error, where the message came
    from instead, and the change most likely behind it."""
    failures = {f.hook: f for f in result.failures}
    parts = []
    for hook in dict.fromkeys(dispatched.failed):
        failure = failures.get(hook)
        parts.append(f"hooks/{hook} failed at heartbeat" + (f": {failure.error}" if failure else ""))
    text = "; ".join(parts) or "the recover stage stepped in"
    if result.user:
        text += f"; the message came from {PROMPT_SOURCES.get(result.prompt or '', result.prompt)}"
    else:
        text += "; no message was sent"
    causes = [f.cause for f in result.failures if f.cause]
    if causes:
        text += f" ({causes[0]})"
    return text
