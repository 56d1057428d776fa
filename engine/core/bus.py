"""In-process publication of what the engine does, for the API's event stream and the console.

Subscribers get a bounded queue each; a slow subscriber loses the oldest events (and learns how many
through `dropped`) instead of slowing the engine down. The journal, not this bus, is the record.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable

from engine.protocol.events import Event, EventKind, kind_of
from engine.protocol.records import JSONDict, Record


class Subscription:
    def __init__(self, bus: EventBus, maxsize: int) -> None:
        self._bus = bus
        self._items: deque[Event] = deque(maxlen=maxsize)
        self._ready = asyncio.Event()
        self.dropped = 0

    def _push(self, event: Event) -> None:
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(event)
        self._ready.set()

    async def get(self) -> Event:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    def get_nowait(self) -> Event | None:
        return self._items.popleft() if self._items else None

    def close(self) -> None:
        self._bus._subscriptions.discard(self)


class EventBus:
    def __init__(self, history: int = 1000) -> None:
        self._seq = itertools.count(1)
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Callable[[Event], None]] = []
        self.recent: deque[Event] = deque(maxlen=history)

    def publish(self, payload: Record, kind: EventKind | None = None, data: JSONDict | None = None) -> Event:
        """Publish `payload` (a snapshot of it, taken now: `payload.to_dict()` unless the caller
        took it, `data`) as an event of `kind`, which its type implies unless it is the payload of
        several kinds. From the engine's event loop thread."""
        if data is None:
            data = payload.to_dict()
        event = Event(kind=(kind or kind_of(payload)).value, data=data, seq=next(self._seq))
        self.recent.append(event)
        for sub in list(self._subscriptions):
            sub._push(event)
        for listener in list(self._listeners):
            listener(event)
        return event

    @property
    def last_seq(self) -> int:
        """The sequence number of the newest event published so far (0 before any)."""
        return self.recent[-1].seq if self.recent else 0

    def subscribe(self, maxsize: int = 10_000) -> Subscription:
        sub = Subscription(self, maxsize)
        self._subscriptions.add(sub)
        return sub

    def listen(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call `callback` synchronously for each event; returns a function that stops it."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback)
