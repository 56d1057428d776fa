"""The stages of the hook protocols, and how each one is dispatched.

evolve speaks two protocols at once (docs/hooks.md, "Two protocols"): the original opencode-evolve
protocol, and hcp (version 3), its successor with canonical stage names and response keys that block or
change what happens. Each hook is treated as one of them; both share most stage names.
"""

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
    # hcp's canonical names
    BEFORE_TOOL = "before_tool"
    AFTER_TOOL = "after_tool"
    BEFORE_TURN = "before_turn"
    AFTER_TURN = "after_turn"
    BEFORE_STOP = "before_stop"
    ON_ERROR = "on_error"
    ON_PERMISSION = "on_permission"


class HookProtocol(StrEnum):
    """The protocol a hook is treated as."""

    OPENCODE_EVOLVE = "opencode-evolve"
    HCP = "hcp"


LEGACY_STAGES: Final = (
    Stage.DISCOVER,
    Stage.MUTATE_REQUEST,
    Stage.OBSERVE_MESSAGE,
    Stage.IDLE,
    Stage.HEARTBEAT,
    Stage.COMPACTING,
    Stage.FORMAT_NOTIFICATION,
    Stage.RECOVER,
    Stage.EXECUTE_TOOL,
    Stage.TOOL_BEFORE,
    Stage.TOOL_AFTER,
)
"""The opencode-evolve protocol's stage names, in the order the documentation lists them."""

HCP_STAGES: Final = (
    Stage.DISCOVER,
    Stage.MUTATE_REQUEST,
    Stage.BEFORE_TOOL,
    Stage.AFTER_TOOL,
    Stage.EXECUTE_TOOL,
    Stage.BEFORE_TURN,
    Stage.AFTER_TURN,
    Stage.BEFORE_STOP,
    Stage.ON_ERROR,
    Stage.ON_PERMISSION,
    Stage.HEARTBEAT,
    Stage.OBSERVE_MESSAGE,
    Stage.FORMAT_NOTIFICATION,
    Stage.RECOVER,
    Stage.COMPACTING,
)
"""hcp's canonical stage names (tiers 0 to 3)."""

STAGES: Final = tuple(dict.fromkeys(s.value for s in (*LEGACY_STAGES, *HCP_STAGES)))
"""Every stage name of either protocol."""

LEGACY_ONLY: Final = frozenset(LEGACY_STAGES) - frozenset(HCP_STAGES)
"""Names only opencode-evolve has: idle, tool_before, tool_after."""

HCP_ONLY: Final = frozenset(HCP_STAGES) - frozenset(LEGACY_STAGES)
"""Names only hcp has: before_tool, after_tool, before_turn, after_turn, before_stop, on_error,
on_permission."""

LEGACY_NAME: Final = {
    Stage.BEFORE_STOP: Stage.IDLE,
    Stage.BEFORE_TOOL: Stage.TOOL_BEFORE,
    Stage.AFTER_TOOL: Stage.TOOL_AFTER,
}
"""An hcp stage and the opencode-evolve stage that is its older form."""

HCP_NAME: Final = {legacy: canonical for canonical, legacy in LEGACY_NAME.items()}

HCP_FIRED: Final = HCP_STAGES
"""The canonical stages evolve fires for hcp hooks on opencode 1.18 (every one; what each can do there
is in docs/hooks.md, "Conformance")."""

NOT_FIRED_UNDER_RUN: Final = frozenset({Stage.ON_PERMISSION})
"""Stages not fired for sessions of `opencode run`, which refuses every `ask` permission itself at once."""

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
        Stage.BEFORE_TOOL,
        Stage.AFTER_TOOL,
        Stage.BEFORE_TURN,
        Stage.AFTER_TURN,
        Stage.BEFORE_STOP,
        Stage.ON_ERROR,
        Stage.ON_PERMISSION,
    }
)
"""Stages whose failures do not start `recover`: the observational ones, recover itself, those that are
not dispatched to every hook, and hcp's loop stages, whose failure only means the hook had no say
(docs/hooks.md, "When a hook fails: recover")."""

SESSIONLESS: Final = frozenset({Stage.DISCOVER, Stage.RECOVER, Stage.FORMAT_NOTIFICATION})
"""Stages whose input never carries a session's history."""
