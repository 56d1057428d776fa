"""Reading replay's word differences: [op, text] segments (op "=", "-", "+" or "~")."""

from __future__ import annotations


def ops(segments: list[list[str]], op: str) -> str:
    """The text of every segment of kind `op`, joined."""
    return "".join(text for o, text in segments if o == op)
