"""The hooks of tests/fixtures (written as other projects write them) installed into a workspace, and
what they note of what they were given."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from engine.runtime import Engine
from tests.support.environment import REPO

FIXTURES = REPO / "tests" / "fixtures"


def install(ws: Path, fixture: str, name: str, where: str = "hooks") -> Path:
    """The fixture `fixture` as `<ws>/<where>/<name>`, executable, with this interpreter on its #! line."""
    text = (FIXTURES / fixture).read_text(encoding="utf-8").split("\n", 1)[1]
    path = ws / where / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n" + text, encoding="utf-8")
    path.chmod(0o755)
    return path


def hello_log(ws: Path, stage: str | None = None) -> list[dict[str, Any]]:
    """The payloads hcp_hello.py got (of `stage`), in order."""
    path = ws / "state" / "hello.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    entries = [json.loads(line) for line in lines]
    return [e["payload"] for e in entries if stage is None or e["argv"] == stage]


def persona_log(ws: Path) -> list[str]:
    """The stage names persona_strict.py got, in order."""
    path = ws / "state" / "persona.log"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


PERSONA_KNOWS = frozenset(
    {
        "discover",
        "mutate_request",
        "observe_message",
        "idle",
        "heartbeat",
        "compacting",
        "format_notification",
        "recover",
        "execute_tool",
        "tool_before",
        "tool_after",
    }
)
"""The stage names persona_strict.py knows (it answers any other with an error and exit 1)."""


async def settled(engine: Engine) -> None:
    """What the engine accepted and works on in the background is done, and journaled."""
    await engine.activity.quiet()
    assert engine.journal is not None
    await asyncio.to_thread(engine.journal.flush)
