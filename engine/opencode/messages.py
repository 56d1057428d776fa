"""opencode's messages as the engine reads them: the history hooks get, what one response holds,
the last user text, a model's name, a compaction request, how a response ended."""

from __future__ import annotations

from typing import Any

from engine.protocol.opencode import ABORTED_ERROR


def history_entry(message: dict[str, Any]) -> dict[str, Any]:
    """`{role, agent, parts}` from opencode's `{info, parts}`: the history hooks receive."""
    info = message.get("info") or {}
    return {"role": info.get("role"), "agent": info.get("agent"), "parts": message.get("parts") or []}


def response_context(parts: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str]:
    """thinking, tool calls and answer of one assistant response."""
    thinking = "\n".join(p.get("text", "") for p in parts if p.get("type") == "reasoning" and p.get("text"))
    calls = [p for p in parts if p.get("type") == "tool"]
    answer = "\n".join(p.get("text", "") for p in parts if p.get("type") == "text" and p.get("text"))
    return thinking, calls, answer


def last_user_text(history: list[Any]) -> str:
    """The text of the last user message of a history (hcp's `user` of mutate_request)."""
    for entry in reversed(history):
        if isinstance(entry, dict) and entry.get("role") == "user":
            parts = entry.get("parts") or []
            return "\n".join(
                p["text"]
                for p in parts
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            )
    return ""


def model_name(model: object) -> str | None:
    """`provider/model` from opencode's model object (`{providerID, id}` or `{providerID, modelID}`)."""
    if not isinstance(model, dict):
        return None
    provider, name = model.get("providerID"), model.get("modelID") or model.get("id")
    return f"{provider}/{name}" if isinstance(provider, str) and isinstance(name, str) else None


def strings(value: object) -> list[str] | None:
    """`value` if it is a non-empty list of strings (a copy), else None."""
    if isinstance(value, list) and value and all(isinstance(s, str) for s in value):
        return list(value)
    return None


def compaction_request(history: list[Any]) -> bool:
    """Whether the request is opencode's compaction of the session: its last user message holds the
    compaction part opencode adds."""
    for entry in reversed(history):
        if isinstance(entry, dict) and entry.get("role") == "user":
            return any(
                isinstance(p, dict) and p.get("type") == "compaction" for p in entry.get("parts") or []
            )
    return False


def exit_reason(error: dict[str, Any] | None) -> str:
    """How a response ended, as hcp's before_stop says it: stop, cancel or error."""
    if error is None:
        return "stop"
    return "cancel" if error.get("name") == ABORTED_ERROR else "error"


def error_text(error: dict[str, Any]) -> str:
    """An opencode error in words: its message, else its name."""
    data = error.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    return message if isinstance(message, str) and message else str(error.get("name") or "error")
