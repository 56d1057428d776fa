"""The stages of the hook protocol, and how each one is dispatched."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Stage(StrEnum):
    DISCOVER = "discover"
    MUTATE_REQUEST = "mutate_request"
    OBSERVE_MESSAGE = "observe_message"
    IDLE = "idle"
    HEARTBEAT = "heartbeat"
    COMPACTING = "compacting"
    FORMAT_NOTIFICATION = "format_notification"
    RECOVER = "recover"
    EXECUTE_TOOL = "execute_tool"
    TOOL_BEFORE = "tool_before"
    TOOL_AFTER = "tool_after"


STAGES: Final = tuple(s.value for s in Stage)
"""Every stage name, in the order the documentation lists them."""

NO_RECOVER: Final = frozenset(
    {
        Stage.TOOL_BEFORE,
        Stage.TOOL_AFTER,
        Stage.OBSERVE_MESSAGE,
        Stage.FORMAT_NOTIFICATION,
        Stage.IDLE,
        Stage.COMPACTING,
        Stage.RECOVER,
        Stage.DISCOVER,
        Stage.EXECUTE_TOOL,
    }
)
"""Stages whose failures do not start `recover`: the observational ones, recover itself, and those
that are not dispatched to every hook (docs/hooks.md, "When a hook fails: recover")."""

SESSIONLESS: Final = frozenset({Stage.DISCOVER, Stage.RECOVER, Stage.FORMAT_NOTIFICATION})
"""Stages whose input never carries a session's history."""
