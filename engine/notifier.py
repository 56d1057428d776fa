"""Notifications between sessions: hooks ask for them (`notify`), `format_notification` words them, and
each other session the engine knows receives the message as a user message that asks for no reply."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from .bus import EventBus
from .protocol.records import Delivered, NotificationSent, StageResult
from .sessions import SessionStore

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]
Deliver = Callable[[str, str], Awaitable[None]]


def wrap(message: str) -> str:
    """A notification as the receiving agent sees it."""
    return (
        f"<system-reminder>\n<assistant-notification>{message}</assistant-notification>\n</system-reminder>"
    )


class Notifier:
    def __init__(
        self,
        dispatch: Dispatch,
        sessions: SessionStore,
        deliver: Deliver | None,
        bus: EventBus,
        warn: Callable[[str, str], None],
    ) -> None:
        self._dispatch = dispatch
        self._sessions = sessions
        self.deliver = deliver  # None: recorded, not delivered (no opencode, e.g. the command line)
        self._bus = bus
        self._warn = warn

    async def notify(
        self,
        source: str | None,
        notifications: list[str],
        to: list[str] | None = None,
        change: str | None = None,
    ) -> str | None:
        """Format `notifications` with format_notification and deliver the message to the sessions
        `to` (by default every known session other than `source`). `change` is the commit or pending
        change the notification is about. Returns the formatted message, if any."""
        if not notifications:
            return None
        result = await self._dispatch("format_notification", {"notifications": notifications})
        message: Any = result.merged.get("message")
        if not isinstance(message, str) or not message:
            return None
        if to is None:
            recipients = [s.id for s in self._sessions.known() if s.id != source]
        else:
            recipients = [sid for sid in to if self._sessions.find(sid) is not None]
        now = time.time()
        for sid in recipients:
            self._sessions.notified(sid, Delivered(message, now, source, change))
        self._bus.publish(NotificationSent(source, message, recipients))
        if self.deliver is not None:
            for sid in recipients:
                try:
                    await self.deliver(sid, wrap(message))
                except Exception as exc:  # one failed session must not stop the others
                    self._warn("notify", f"delivery to {sid} failed: {exc}")
        return message
