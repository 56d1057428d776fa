"""How opencode's own LLM calls are told apart from the agent's chat, on both sides of the wire.

opencode 1.18 gives the plugin no agent name when it asks for a system prompt; its title and
compaction calls are recognised by how their system prompt begins. They keep opencode's prompt.
"""

from __future__ import annotations

from typing import Final

OWN_CALL_PREFIXES: Final = {
    "title": "You are a title generator",
    "compaction": "You are a context summarization agent",
}
"""Kind of own call -> how its first system message begins."""

OWN_AGENTS: Final = frozenset({"compaction", "title", "summary"})
"""Agent names of opencode's own messages (not the agent's answers)."""


def own_call_kind(system: list[str]) -> str | None:
    """`title` or `compaction` when this system prompt is one of opencode's own calls, else None."""
    first = system[0] if system and isinstance(system[0], str) else ""
    for kind, prefix in OWN_CALL_PREFIXES.items():
        if first.startswith(prefix):
            return kind
    return None


RULE_DENIED_PREFIX: Final = (
    "The user has specified a rule which prevents you from using this specific tool call"
)
"""How opencode 1.18's error text begins when a permission rule (`deny`) refused a tool call."""

ABORTED_ERROR: Final = "MessageAbortedError"
"""The name of the error opencode gives a response that was cancelled (aborted)."""
