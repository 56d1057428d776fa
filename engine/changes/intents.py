"""An operator's decision under way (a revert, an approval, a rejection of a held change), written down
before it changes anything (`state/intents/<id>.json`, synced) and removed once it is done: a
restart finds those an engine that died left half done and finishes them as what they were
(engine.changes.recovery), never as a person's edit and never leaving a change installed but
pending."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core import strictjson
from engine.protocol.records import new_id
from engine.workspace.layout import write_atomic


@dataclass(frozen=True)
class Intent:
    id: str
    kind: str  # revert | approve | reject
    started_at: float
    data: dict[str, Any]


class Intents:
    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def begin(self, kind: str, data: dict[str, Any]) -> Intent:
        """Write the decision down (on disk when this returns)."""
        intent = Intent(new_id("int"), kind, time.time(), dict(data))
        record = {"id": intent.id, "kind": kind, "started_at": intent.started_at, "data": intent.data}
        write_atomic(self.dir / f"{intent.id}.json", strictjson.dumps(record).encode(), parents=False)
        return intent

    def done(self, intent: Intent) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{intent.id}.json").unlink()

    def left(self) -> list[Intent]:
        """The decisions begun and never done, oldest first (an unreadable file is skipped)."""
        found: list[Intent] = []
        if not self.dir.is_dir():
            return found
        for path in self.dir.glob("*.json"):
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
                found.append(
                    Intent(str(raw["id"]), str(raw["kind"]), float(raw["started_at"]), dict(raw["data"]))
                )
            except (OSError, ValueError, TypeError, KeyError):
                continue
        return sorted(found, key=lambda i: (i.started_at, i.id))
