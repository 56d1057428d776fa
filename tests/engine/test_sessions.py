"""What the engine knows of sessions survives a restart, and every change of it is an event."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine.protocol.events import Event
from engine.protocol.records import SessionChanged
from engine.runtime import Engine
from tests.support.in_process import run_engine


def run(root: Path, body: Any) -> Any:
    return run_engine(root, body, env=os.environ)


def test_everything_known_of_a_session_survives_an_engine_restart(tmp_path: Path) -> None:
    # The example workspace: its hook words notifications (format_notification).
    subprocess.run([sys.executable, "-m", "engine", "init", str(tmp_path)], check=True, capture_output=True)
    history = [{"role": "user", "agent": "build", "parts": [{"type": "text", "text": "hi"}]}]

    async def first(engine: Engine) -> None:
        bridge = engine.bridge
        bridge.event(
            {"type": "session.created", "properties": {"info": {"id": "ses_a", "title": "Planning"}}}, "oc_1"
        )
        bridge.chat_message("ses_a", "build", {"providerID": "p", "modelID": "m"})
        bridge.event(
            {"type": "session.status", "properties": {"sessionID": "ses_a", "status": {"type": "busy"}}}
        )
        bridge.take_history(
            "ses_a", [{"info": {"role": "user", "agent": "build"}, "parts": history[0]["parts"]}]
        )
        await bridge.assistant_finished(
            "ses_a", {"id": "m1", "agent": "build", "tokens": {"input": 30, "output": 5}}, []
        )
        engine.sessions.freeze("ses_a", ["the prompt"])
        engine.sessions.get("ses_b")
        await engine.notifier.notify("ses_b", ["remember this"])

    run(tmp_path, first)

    async def second(engine: Engine) -> None:
        found = engine.sessions.find("ses_a")
        assert found is not None
        info = found.info(with_history=True)
        assert (info.title, info.agent, info.model, info.busy, info.tokens, info.connection) == (
            "Planning",
            "build",
            {"providerID": "p", "modelID": "m"},
            True,
            35,
            "oc_1",
        )
        assert info.system == ["the prompt"] and info.frozen_at
        assert info.history == history
        assert len(info.notifications) == 1 and "remember this" in info.notifications[0].text
        assert info.notifications[0].source == "ses_b" and info.notifications[0].at > 0

    run(tmp_path, second)


def test_each_change_of_a_session_is_an_event(tmp_path: Path) -> None:
    async def body(engine: Engine) -> list[tuple[str, str]]:
        seen: list[Event] = []
        engine.bus.listen(seen.append)
        bridge = engine.bridge
        bridge.event({"type": "session.created", "properties": {"info": {"id": "ses_c", "title": "One"}}})
        bridge.event({"type": "session.updated", "properties": {"info": {"id": "ses_c", "title": "Two"}}})
        bridge.event({"type": "session.updated", "properties": {"info": {"id": "ses_c", "title": "Two"}}})
        bridge.event(
            {"type": "session.status", "properties": {"sessionID": "ses_c", "status": {"type": "busy"}}}
        )
        bridge.event({"type": "session.idle", "properties": {"sessionID": "ses_c"}})
        engine.sessions.freeze("ses_c", ["p"])
        engine.sessions.unfreeze("ses_c")
        bridge.event({"type": "session.deleted", "properties": {"info": {"id": "ses_c"}}})
        changes = [SessionChanged.from_dict(e.data) for e in seen if e.kind == "session"]
        return [(c.change, c.session.title or "") for c in changes]

    assert run(tmp_path, body) == [
        ("created", ""),
        ("updated", "One"),
        ("updated", "Two"),  # the same title again is no change
        ("updated", "Two"),
        ("updated", "Two"),
        ("frozen", "Two"),
        ("unfrozen", "Two"),
        ("forgotten", "Two"),
    ]


def test_a_synthetic_message_does_not_change_the_sessions_agent(tmp_path: Path) -> None:
    async def body(engine: Engine) -> str | None:
        engine.bridge.chat_message("ses_d", "build", None)
        engine.bridge.chat_message("ses_d", "evolve", None, synthetic=True)  # a notification
        found = engine.sessions.find("ses_d")
        return found.agent if found else None

    assert run(tmp_path, body) == "build"
