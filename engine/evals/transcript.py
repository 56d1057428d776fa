"""What the agent did in a session, read from opencode's stored messages (`GET /session/{id}/message`):
its answer to each user message, its tool calls with their arguments and results, the steps (one
assistant message per LLM round trip), the tokens and the cost opencode counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.protocol.records import ToolUse

UNAVAILABLE = "invalid"  # opencode's stand-in for a call of a tool it does not offer


@dataclass
class Transcript:
    answers: list[str] = field(default_factory=list)
    tools: list[ToolUse] = field(default_factory=list)
    steps: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    errors: list[str] = field(default_factory=list)  # what opencode recorded as the model's failures


def read(messages: list[dict[str, Any]], skip: int = 0) -> Transcript:
    """The transcript of `messages` after the first `skip` (a re-asked turn's recorded history)."""
    out = Transcript()
    answer: list[str] | None = None
    for message in messages[skip:]:
        info = _object(message.get("info"))
        parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
        role = info.get("role")
        if role == "user":
            if answer is not None:
                out.answers.append("\n".join(answer).strip())
            answer = []
            continue
        if role != "assistant":
            continue
        if answer is None:
            answer = []
        out.steps += 1
        _count(out, info)
        error = info.get("error")
        if isinstance(error, dict):
            data = _object(error.get("data"))
            out.errors.append(f"{error.get('name') or 'error'}: {data.get('message') or ''}".rstrip(": "))
        for part in parts:
            kind = part.get("type")
            if kind == "text" and not part.get("synthetic") and isinstance(part.get("text"), str):
                answer.append(part["text"])
            elif kind == "tool":
                out.tools.append(_tool(part))
    if answer is not None:
        out.answers.append("\n".join(answer).strip())
    return out


def _tool(part: dict[str, Any]) -> ToolUse:
    state = _object(part.get("state"))
    args = _object(state.get("input"))
    name = str(part.get("tool") or "?")
    if name == UNAVAILABLE:
        return ToolUse(
            tool=str(args.get("tool") or "?"),
            args={},
            output=str(args.get("error") or ""),
            status="unavailable",
            error="opencode does not offer this tool here",
        )
    status = state.get("status")
    if status == "error":
        error = str(state.get("error") or "failed")
        return ToolUse(tool=name, args=args, output=error, status="error", error=error)
    output = state.get("output")
    return ToolUse(
        tool=name,
        args=args,
        output=output if isinstance(output, str) else "",
        status="completed" if status == "completed" else str(status or "unknown"),
    )


def _count(out: Transcript, info: dict[str, Any]) -> None:
    tokens = info.get("tokens")
    if isinstance(tokens, dict):
        cache = _object(tokens.get("cache"))
        for key, value in (
            ("input", tokens.get("input")),
            ("output", tokens.get("output")),
            ("reasoning", tokens.get("reasoning")),
            ("cache_read", cache.get("read")),
            ("cache_write", cache.get("write")),
        ):
            if isinstance(value, (int, float)):
                out.tokens[key] = out.tokens.get(key, 0) + int(value)
    cost = info.get("cost")
    if isinstance(cost, (int, float)):
        out.cost += float(cost)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
