"""Notifications between sessions: hooks ask for them (`notify`), `format_notification` words them, and
each other session the engine knows receives the message as a user message that asks for no reply.

opencode-evolve hooks' messages are joined into one, as that protocol did; each hcp hook's message is
delivered on its own, to the sessions its `to` names (hcp v3)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from engine.core.bus import EventBus
from engine.hooks.protocols import MESSAGES
from engine.opencode.sessions import SessionStore
from engine.protocol.records import Delivered, NotificationSent, StageResult

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
        change the notification is about. Returns the first formatted message, if any."""
        if not notifications:
            return None
        known = self._sessions.known()
        hcp = {
            "session": {"id": source} if source else None,
            "notifications": notifications,
            "sessions": [{"id": s.id, "title": s.title, "agent": s.agent} for s in known],
        }
        result = await self._dispatch(
            "format_notification", {"notifications": notifications}, hcp_context=hcp
        )
        default = (
            [s.id for s in known if s.id != source]
            if to is None
            else [sid for sid in to if self._sessions.find(sid) is not None]
        )
        messages: list[tuple[str, list[str]]] = []
        joined: Any = result.merged.get("message")
        if isinstance(joined, str) and joined:
            messages.append((joined, default))
        for entry in result.merged.get(MESSAGES) or []:
            if isinstance(entry, dict) and isinstance(entry.get("message"), str):
                recipients = self._addressed(entry["to"]) if "to" in entry else default
                messages.append((entry["message"], recipients))
        for message, recipients in messages:
            await self._send(source, message, recipients, change)
        return messages[0][0] if messages else None

    def _addressed(self, to: object) -> list[str]:
        """hcp's `to`: `{"sessions": [id or {id}, ...]}` names the recipients among the sessions the
        engine knows (a bare list of them is read the same); `{}` (or no sessions) means nobody."""
        listed = to.get("sessions") if isinstance(to, dict) else to if isinstance(to, list) else None
        found: list[str] = []
        for item in listed if isinstance(listed, list) else []:
            sid = item.get("id") if isinstance(item, dict) else item
            if isinstance(sid, str) and self._sessions.find(sid) is not None and sid not in found:
                found.append(sid)
        return found

    async def _send(
        self, source: str | None, message: str, recipients: list[str], change: str | None
    ) -> None:
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
