"""The changes held for review (`"review": "gate"`), one JSON file each in `state/pending/`: holding
one (from an agent's tool or from what the gate took back of a hook's writing), reading them.

It needs nothing but its directory and the bus, so the gate (under Commits) and the replayer get it
before Changes exists. A change just held is published as a `pending` event with status `pending`;
whoever reacts to that (the replayer replays it for the reviewer) listens for it (`when_held`)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from engine.changes.errors import ChangeError
from engine.core import strictjson
from engine.core.bus import EventBus
from engine.protocol.events import Event, EventKind
from engine.protocol.records import PendingChange, Provenance, new_id
from engine.tools.host import CallContext
from engine.workspace.layout import write_atomic


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class PendingChanges:
    def __init__(self, directory: Path, bus: EventBus) -> None:
        self.dir = directory
        self._bus = bus

    def hold(
        self,
        rel: str,
        old: bytes,
        new: str,
        message: str,
        ctx: CallContext,
        hook: str | None,
        provenance: Provenance | None = None,
    ) -> PendingChange:
        """Hold `new` (the proposed content of `rel`, which is `old` now) for review."""
        pending = PendingChange(
            id=new_id("chg"),
            file=rel,
            content=new,
            base_sha256=sha256(old),
            message=message,
            tool=ctx.tool,
            session=ctx.session,
            call_id=ctx.call_id,
            hook=hook,
            created_at=time.time(),
            provenance=provenance,
            base=old.decode("utf-8", "surrogateescape"),  # the three-way view shows it if it goes stale
        )
        self.save(pending)
        self._bus.publish(pending.summary())
        return pending

    def save(self, pending: PendingChange) -> None:
        write_atomic(
            # strictjson: a content with unpaired surrogates (bytes that are not UTF-8) is kept, escaped
            self.dir / f"{pending.id}.json",
            strictjson.dumps(pending.to_dict()).encode(),
            parents=False,
        )

    def listed(self, include_decided: bool = False) -> list[PendingChange]:
        items: list[PendingChange] = []
        if not self.dir.is_dir():
            return items
        for path in sorted(self.dir.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                item = PendingChange.from_dict(data)
            except (OSError, ValueError, TypeError):
                continue
            if include_decided or item.status == "pending":
                items.append(item)
        return items

    def get(self, pending_id: str) -> PendingChange:
        path = self.dir / f"{os.path.basename(pending_id)}.json"
        try:
            return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            raise ChangeError(f"no pending change {pending_id!r}") from None


def when_held(react: Callable[[PendingChange], object]) -> Callable[[Event], None]:
    """A bus listener that calls `react` with each change as it is held for review (its event: kind
    `pending`, status `pending`; a decision publishes the same kind with another status)."""

    def listener(event: Event) -> None:
        if event.kind == EventKind.PENDING and event.data.get("status") == "pending":
            react(PendingChange.from_dict(event.data))

    return listener


def when_decided(react: Callable[[str, str], object]) -> Callable[[Event], None]:
    """A bus listener that calls `react(id, status)` for each held change that was decided or went
    stale (a `pending` event with another status than `pending`)."""

    def listener(event: Event) -> None:
        status = event.data.get("status")
        if event.kind == EventKind.PENDING and status != "pending":
            react(str(event.data.get("id")), str(status))

    return listener
