"""What the agent reads of its heartbeat (the evolve_heartbeat_* tools): the recent beats, the
cadence in force and why, the beats in words."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from engine.journal.store import Journal
from engine.protocol.records import HeartbeatStatus, TickResult
from engine.tools.builtins import format_datetime


def last_ticks(journal: Journal | None, own: list[TickResult], limit: int) -> list[TickResult]:
    """The last `limit` ticks, newest first: from the journal (they survive a restart), else
    this engine's own (`own`, oldest first)."""
    if journal is not None:
        found = []
        for row in journal.events(kind="heartbeat", limit=limit):
            data = row.get("data")
            if isinstance(data, dict):
                with contextlib.suppress(TypeError):
                    found.append(TickResult.from_dict(data))
        if found or not own:
            return found
    return list(reversed(own[-limit:]))


def recent_beats(ticks: list[TickResult]) -> list[dict[str, Any]]:
    """Ticks (newest first) as the agent gets them, oldest first: `{at, trigger, outcome, reason,
    user, session}`."""
    return [
        {
            "at": format_datetime(datetime.fromtimestamp(t.started_at, UTC)),
            "trigger": t.trigger,
            "outcome": t.outcome,
            "reason": t.reason,
            "user": t.user,
            "session": t.session,
        }
        for t in reversed(ticks)
    ]


def describe(status: HeartbeatStatus) -> str:
    """The heartbeat as the agent reads it."""
    source = status.interval_source
    if source == "config (disabled)":
        lines = [
            "heartbeat: disabled by the operator (heartbeat_ms < 0 in the config); this wins over your choice"
        ]
    elif not status.enabled:
        lines = [f"heartbeat: off ({'your choice' if source == 'agent' else 'the config'})"]
    else:
        who = "your choice" if source == "agent" else "the config's default"
        lines = [f"heartbeat: on, every {status.interval_ms} ms ({who})"]
    if status.paused:
        lines.append("paused by the operator")
    if status.next_in_s is not None:
        lines.append(f"next beat in {status.next_in_s:.0f} s")
    elif status.enabled and not status.connected:
        lines.append("no beat is scheduled until opencode connects")
    lines.append(f"beats in the current heartbeat session: {status.count}")
    if status.time:
        lines.append(f"last beat that sent a message: {status.time}")
    return "\n".join(lines)


def history_text(beats: list[dict[str, Any]]) -> str:
    """Beats (oldest first, as `recent_beats` gives them) newest first, one line each."""
    if not beats:
        return "no heartbeat has run yet"
    lines = []
    for beat in reversed(beats):
        line = f"{beat['at']} {beat['trigger']} {beat['outcome']}"
        if beat["reason"]:
            line += f": {beat['reason']}"
        if beat["user"]:
            line += f" | message: {' '.join(str(beat['user']).split())[:200]}"
        lines.append(line)
    return "\n".join(lines)
