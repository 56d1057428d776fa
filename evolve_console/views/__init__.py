"""The console's six views, one module each: hook runs, stage results, sessions, heartbeat,
self-modifications, tool calls. Each draws what the model holds; none fetches anything itself."""

from __future__ import annotations

from typing import Final

from textual.widget import Widget

from .changes import ChangesView
from .heartbeat import HeartbeatView
from .runs import RunsView
from .sessions import SessionsView
from .stages import StagesView
from .tools import ToolCallsView

VIEWS: Final = [  # (view id, key, label): the view bar, the view keys and the palette's view commands
    ("runs", "1", "Hook runs"),
    ("stages", "2", "Stage results"),
    ("sessions", "3", "Sessions"),
    ("heartbeat", "4", "Heartbeat"),
    ("changes", "5", "Self-modifications"),
    ("tools", "6", "Tool calls"),
]

PAGES: Final[dict[str, type[Widget]]] = {
    "runs": RunsView,
    "stages": StagesView,
    "sessions": SessionsView,
    "heartbeat": HeartbeatView,
    "changes": ChangesView,
    "tools": ToolCallsView,
}

__all__ = [
    "PAGES",
    "VIEWS",
    "ChangesView",
    "HeartbeatView",
    "RunsView",
    "SessionsView",
    "StagesView",
    "ToolCallsView",
]
