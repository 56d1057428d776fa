"""How records read where more than one screen shows them: a message of a session's history (the
sessions view, the turn screen) and the validation run behind a change (the tool calls and changes
views, the turn screen)."""

from __future__ import annotations

import json
from typing import Any

from engine.protocol.records import Evidence

from .format import duration, short, size

NOTIFICATION_MARK = "<assistant-notification>"


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def message_lines(entry: dict[str, Any]) -> tuple[str, str]:
    """A history entry as (its heading, its body): what the model read of that message."""
    role = str(entry.get("role") or "?")
    parts = [p for p in entry.get("parts") or [] if isinstance(p, dict)]
    body: list[str] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            body.append(str(part["text"]))
        elif kind == "reasoning" and part.get("text"):
            body.append(f"(reasoning) {part['text']}")
        elif kind == "tool":
            found = part.get("state")
            state: dict[str, Any] = found if isinstance(found, dict) else {}
            call = f"→ tool {part.get('tool')} ({state.get('status') or '?'})"
            if "input" in state:
                call += f"\n  arguments: {short(_text_of(state['input']), 2000)}"
            if state.get("output") is not None:
                call += f"\n  result: {short(_text_of(state['output']), 2000)}"
            if state.get("error"):
                call += f"\n  error: {state['error']}"
            body.append(call)
    text = "\n".join(body)
    kind = role
    if role == "user" and NOTIFICATION_MARK in text:
        kind = "notification (to the agent)"
    elif role == "user" and parts and all(p.get("synthetic") for p in parts):
        kind = "user (sent by evolve)"
    agent = f" · agent {entry['agent']}" if entry.get("agent") else ""
    return f"{kind}{agent} · {size(text)}", text


def evidence_text(evidence: Evidence) -> str:
    """The validation run behind a hook change, as a reviewer reads it."""
    counts = ", ".join(
        f"{n} {what}"
        for n, what in ((evidence.passed, "passed"), (evidence.failed, "failed"), (evidence.total, "in all"))
        if n is not None
    )
    exit_text = "did not finish" if evidence.exit_code is None else f"exit {evidence.exit_code}"
    head = f"{evidence.command}: {'passed' if evidence.ok else 'FAILED'} ({exit_text}, {duration(evidence.duration_ms)})"
    return head + (f"\ncounts: {counts}" if counts else "") + f"\n\n{evidence.output_tail}"
