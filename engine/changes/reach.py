"""A change's reach: the sessions that run it and the agent's answers there since, from what the engine
knows of the sessions (when each froze its prompt) and what the journal keeps of the answers (each
finished response's `observe_message` dispatch).

A prompt reaches a session through its frozen system prompt: the sessions whose prompt was composed
while the change was installed run it, the others keep the prompt they froze before. A hook or the
configuration reaches every session whose hooks ran while it was installed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from engine.journal.store import Journal
from engine.protocol.records import Answer, Change, Provenance, Reach, SessionInfo, SessionReach, StageResult

ANSWERS_SHOWN: Final = 20  # per session
TEXT_LIMIT: Final = 2000
READ_AT_MOST: Final = 5000  # answers read from the journal for one change
STEERING: Final = ("hooks/", "prompts/", "config/", "tests/")


def untested(files: list[str], provenance: Provenance | None) -> str | None:
    """Where a test's evidence would be, for a change of what steers the agent that ran no test."""
    if provenance is not None and provenance.validation is not None:
        return None
    steering = [f for f in files if f.startswith(STEERING)]
    return f"no test covers {', '.join(steering)}" if steering else None


def answered(journal: Journal | None, since: float, until: float | None) -> list[StageResult]:
    """The answers the journal keeps from `since` to `until`, newest first (a bounded number)."""
    if journal is None:
        return []
    found: list[StageResult] = []
    before = until
    while len(found) < READ_AT_MOST:
        page = journal.dispatches(stage="observe_message", limit=500, before=before)
        found += [d for d in page if d.started_at >= since]
        if len(page) < 500 or page[-1].started_at < since:
            break
        before = page[-1].started_at
    return found


def reach_of(
    change: Change,
    since: float,
    until: float | None,
    later: str | None,
    sessions: list[SessionInfo],
    answers: Callable[[float, float | None], list[StageResult]],
) -> Reach:
    hooks_too = any(f.startswith(("hooks/", "config/")) for f in change.files)
    found: dict[str, tuple[SessionInfo | None, str, float]] = {}
    for s in sessions:
        if s.frozen_at is not None and since <= s.frozen_at and (until is None or s.frozen_at < until):
            found[s.id] = (s, "frozen under it", s.frozen_at)
    by_session: dict[str, list[StageResult]] = {}
    for d in answers(since, until):
        if d.session:
            by_session.setdefault(d.session, []).append(d)
    known = {s.id: s for s in sessions}
    if hooks_too:
        for sid in by_session:
            if sid not in found:
                found[sid] = (known.get(sid), "its hooks ran after it", since)
    out = []
    for sid, (info, how, start) in found.items():
        mine = [d for d in by_session.get(sid, []) if d.started_at >= start]
        out.append(
            SessionReach(
                session=replace(info, history=None) if info is not None else SessionInfo(sid),
                how=how,
                since=start,
                answers=[answer(d) for d in mine[:ANSWERS_SHOWN]],
                more=max(len(mine) - ANSWERS_SHOWN, 0),
            )
        )
    out.sort(key=lambda r: r.answers[0].at if r.answers else r.since, reverse=True)
    return Reach(
        change.sha, list(change.files), since, until, later, out, untested(change.files, change.provenance)
    )


def answer(dispatch: StageResult) -> Answer:
    context = dispatch.context
    text = str(context.get("answer") or "")
    calls = context.get("calls") if isinstance(context.get("calls"), list) else []
    return Answer(
        dispatch=dispatch.id,
        at=dispatch.started_at,
        text=text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…",
        calls=[str(c.get("tool")) for c in calls or [] if isinstance(c, dict) and c.get("tool")],
        turn=dispatch.turn,
    )
