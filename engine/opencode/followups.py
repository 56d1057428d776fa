"""What an observe_message or heartbeat result asks for beyond itself: `notify` (notifications to the
other sessions) and `actions` (`send` a message to a session, `create_session`), done in the
background so that the stage's caller does not wait for them."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from engine.core.background import Background
from engine.core.bus import EventBus
from engine.opencode.connections import Connections
from engine.protocol.events import EventKind
from engine.protocol.records import ActionDone, Notice
from engine.workspace.config import Config

Notify = Callable[[str | None, list[str]], Coroutine[Any, Any, str | None]]


class Followups:
    def __init__(
        self,
        notify: Notify,
        connections: Connections,
        config: Callable[[], Config],
        background: Background,
        bus: EventBus,
    ) -> None:
        self._notify = notify
        self._connections = connections
        self._config = config
        self._background = background
        self._bus = bus

    def after_result(self, merged: dict[str, Any], source: str | None) -> None:
        """`notify` and `actions` of a stage's merged result, in the background."""
        notify = merged.get("notify")
        if isinstance(notify, list) and notify:
            self._background.spawn(self._notify(source, [str(n) for n in notify if n]), "notify")
        actions = merged.get("actions")
        if isinstance(actions, list) and actions:
            self._background.spawn(self.run_actions(actions), "actions")

    async def run_actions(self, actions: list[Any]) -> None:
        """`send` and `create_session`, in order; one failing does not stop the rest."""
        for action in actions:
            if isinstance(action, dict):
                try:
                    await self._run_action(action)
                except Exception as exc:
                    message = f"action {action.get('type')} failed: {exc}"
                    self._bus.publish(Notice("action", message), EventKind.ERROR)

    async def _run_action(self, action: dict[str, Any]) -> None:
        kind = action.get("type")
        agent = self._config().heartbeat_agent
        if kind == "send" and action.get("session_id") and isinstance(action.get("message"), str):
            session, message = str(action["session_id"]), str(action["message"])
            synthetic = bool(action.get("synthetic", True))
            await self._connections.call(
                "send action",
                lambda c: c.prompt(session, message, agent=agent, synthetic=synthetic, timeout=600.0),
            )
            self._bus.publish(ActionDone(kind, session))
        elif kind == "create_session":
            title = action.get("title") if isinstance(action.get("title"), str) else None
            created = await self._connections.call("create_session action", lambda c: c.create_session(title))
            self._bus.publish(ActionDone(kind, created.get("id"), title))
