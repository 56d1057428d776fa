"""The console's views, in order: the registry. Each view is one module (a `View`: its table, its
detail, its keys and their handlers); `VIEWS` lists them, and the view bar, the number keys (a
view's place in the list), the palette's `view:` commands, drawing on model updates and navigation
all come from it. A new view is its module and a line here."""

from __future__ import annotations

from typing import Final

from .base import TableView, View
from .changes import ChangesView
from .heartbeat import HeartbeatView
from .runs import RunsView
from .sessions import SessionsView
from .stages import StagesView
from .tools import ToolCallsView

Registry = tuple[type[View], ...]

VIEWS: Final[Registry] = (
    RunsView,
    StagesView,
    SessionsView,
    HeartbeatView,
    ChangesView,
    ToolCallsView,
)

__all__ = [
    "VIEWS",
    "ChangesView",
    "HeartbeatView",
    "Registry",
    "RunsView",
    "SessionsView",
    "StagesView",
    "TableView",
    "ToolCallsView",
    "View",
]
