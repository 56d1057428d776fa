"""Real turns re-asked: the last user messages of the sessions a change reaches, sent again at the
version before and after it.

A turn is re-asked with its conversation when the opencode it happened in still answers: the
session's messages, as opencode stores them, are given to each version's opencode before it starts
(`opencode import`), and each turn is asked in a fork of that session at its message (opencode's
`fork`: the messages before it), so the model gets exactly the history it had. Otherwise (that opencode
is gone) the turn is asked alone, in a new session, and the result says so. A turn whose answer used a
tool outside the copy (bash, the web) is refused: its re-asking could not do what it did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.evals.scenarios import OUTSIDE_TOOLS, Scenario
from engine.evals.setup import Imported
from engine.protocol.records import SessionInfo

Conversation = tuple[dict[str, Any], list[dict[str, Any]]]  # opencode's session info and its messages
Fetch = Callable[[SessionInfo], Awaitable[Conversation | None]]
SHOWN = 48  # characters of a turn's text in its name


@dataclass
class Turn:
    session: str
    text: str
    name: str  # how the comparison names it: the session and the start of the message
    message_id: str | None = None  # opencode's id of the user message (None: asked alone)
    agent: str | None = None
    history: int = 0  # messages before it, given as its conversation
    refused: str | None = None
    at: float = 0.0

    def scenario(self) -> Scenario:
        return Scenario(name=self.name, file="", messages=(self.text,), agent=self.agent)

    @property
    def note(self) -> str:
        if self.refused:
            return self.refused
        if self.message_id is not None:
            return f"re-asked with its conversation ({self.history} messages before it)"
        return (
            "re-asked alone: the opencode it happened in no longer answers, so its conversation is not given"
        )


@dataclass
class Picked:
    turns: list[Turn] = field(default_factory=list)
    imports: list[Imported] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _user_text(message: dict[str, Any]) -> str | None:
    """The text a person typed (None for a synthetic message: a heartbeat's prompt, a notification)."""
    parts = [p for p in message.get("parts") or [] if isinstance(p, dict) and p.get("type") == "text"]
    if not parts or all(p.get("synthetic") for p in parts):
        return None
    text = "\n".join(str(p.get("text") or "") for p in parts if not p.get("synthetic")).strip()
    return text or None


def _outside(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The tools outside the copy that these messages' answers called."""
    used = set()
    for message in messages:
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "tool" and part.get("tool") in OUTSIDE_TOOLS:
                used.add(str(part["tool"]))
    return sorted(used)


def _name(info: SessionInfo, text: str) -> str:
    where = f"“{info.title}”" if info.title else info.id
    short = " ".join(text.split())
    if len(short) > SHOWN:
        short = short[: SHOWN - 1] + "…"
    return f"{where}: {short}"


def turns_of(info: SessionInfo, messages: list[dict[str, Any]], with_history: bool) -> list[Turn]:
    """Every user turn of a session, newest first."""
    found: list[Turn] = []
    for index, message in enumerate(messages):
        meta = message.get("info") or {}
        if meta.get("role") != "user":
            continue
        text = _user_text(message)
        if text is None:
            continue
        answer = []
        for later in messages[index + 1 :]:
            if (later.get("info") or {}).get("role") == "user":
                break
            answer.append(later)
        outside = _outside(answer)
        refused = (
            f"refused: its answer used {', '.join(outside)}, which the copy does not give the agent "
            "(nothing outside the copy)"
            if outside
            else None
        )
        created = (meta.get("time") or {}).get("created")
        found.append(
            Turn(
                session=info.id,
                text=text,
                name=_name(info, text),
                message_id=str(meta["id"]) if with_history and meta.get("id") else None,
                agent=meta.get("agent") if isinstance(meta.get("agent"), str) else None,
                history=index if with_history else 0,
                refused=refused,
                at=float(created) / 1000 if isinstance(created, (int, float)) else (info.updated_at or 0.0),
            )
        )
    return list(reversed(found))


async def pick(
    sessions: list[SessionInfo],
    count: int,
    fetch: Fetch,
    recorded: Callable[[str], list[Any]],
    since: float | None = None,
) -> Picked:
    """The last `count` user turns of `sessions` (those active since `since`, when some were), newest
    first, with the conversations to give opencode."""
    out = Picked()
    reached = [s for s in sessions if since is None or (s.updated_at or 0.0) >= since]
    if not reached:
        if sessions:
            out.warnings.append("no session has been active since the change: re-asking the latest turns")
        reached = sessions
    candidates: list[tuple[Turn, SessionInfo]] = []
    conversations: dict[str, Conversation] = {}
    for info in sorted(reached, key=lambda s: s.updated_at or 0.0, reverse=True):
        if len(candidates) >= count:
            # A session holds no turn newer than its last activity: once the last turn kept is newer
            # than that, no older session can add one.
            newest = sorted((t.at for t, _ in candidates), reverse=True)
            if newest[count - 1] > (info.updated_at or 0.0):
                break
        conversation = await fetch(info)
        if conversation is not None:
            conversations[info.id] = conversation
            found = turns_of(info, conversation[1], with_history=True)
        else:
            found = turns_of(info, list(recorded(info.id)), with_history=False)
        candidates += [(t, info) for t in found]
    candidates.sort(key=lambda pair: pair[0].at, reverse=True)
    out.turns = [t for t, _ in candidates[:count]]
    for session in dict.fromkeys(t.session for t in out.turns if t.message_id and not t.refused):
        session_info, messages = conversations[session]
        out.imports.append(Imported(session, {"info": session_info, "messages": messages}))
    if not out.turns:
        out.warnings.append("no user turn to re-ask: the sessions it reaches have none the engine knows of")
    return out
