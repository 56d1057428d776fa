"""The event bus's bound: a subscriber that falls behind loses its oldest events, counted, and never
slows the engine down (docs/reliability.md, "Limits")."""

from __future__ import annotations

from engine.core.bus import EventBus
from engine.protocol.events import EventKind
from engine.protocol.records import Notice


def test_a_subscriber_that_falls_behind_loses_the_oldest_events_and_counts_them() -> None:
    bus = EventBus()
    slow = bus.subscribe()  # the default bound: 10,000 events
    for i in range(10_250):
        bus.publish(Notice("test", f"n{i}"), EventKind.WARNING)
    assert slow.dropped == 250
    first = slow.get_nowait()
    assert first is not None and first.data["message"] == "n250"  # the oldest went
    kept = 1
    while slow.get_nowait() is not None:
        kept += 1
    assert kept == 10_000
