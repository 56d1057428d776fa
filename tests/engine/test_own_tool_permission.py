"""Who decided the permission of a call of evolve's own tools, in the journal: the plugin reports what
its ask to opencode came to (`allowed by opencode`, `denied by opencode`), and opencode's permission
events tell the engine who answered, as for opencode's own tools. (A hook's answer needs opencode's
reply route: tests/e2e/test_hcp_unconfigured.py.)
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from engine.runtime import Engine
from tests.support.environment import without_settings
from tests.support.fixture_hooks import install, settled
from tests.support.in_process import run_engine

T = TypeVar("T")
pytestmark = pytest.mark.hooks


def run(ws: Path, body: Callable[[Engine], Awaitable[T]]) -> T:
    return cast(T, run_engine(ws, body, without_settings()))


def test_who_decided_the_permission_of_a_call_of_evolves_own_tools_is_journaled(tmp_path: Path) -> None:
    """The plugin reports what its ask to opencode came to; opencode's permission events say who
    answered: the user, opencode itself under `opencode run`, or nobody (a rule decided)."""
    ws = tmp_path / "ws"
    install(ws, "hcp_hello.py", "hello.py")

    def asked(request: str, call_id: str, session: str) -> dict[str, Any]:
        return {
            "type": "permission.asked",
            "properties": {
                "id": request,
                "sessionID": session,
                "permission": "hello_note",
                "patterns": ["*"],
                "tool": {"messageID": "m", "callID": call_id},
            },
        }

    def replied(request: str, reply: str, session: str) -> dict[str, Any]:
        return {
            "type": "permission.replied",
            "properties": {"sessionID": session, "requestID": request, "reply": reply},
        }

    async def call(engine: Engine, call_id: str, session: str, sent: str, refused: str | None = None) -> Any:
        permission, by = engine.tool_stages.own_permission(call_id, session, sent)
        return await engine.tools.call(
            "hello_note",
            {"text": call_id},
            session=session,
            call_id=call_id,
            permission=permission,
            permission_by=by,
            refused=refused,
        )

    async def body(engine: Engine) -> dict[str, Any]:
        conn = engine.connections.connect("http://127.0.0.1:9", str(tmp_path), None, "in-process", "t", "run")
        engine.sessions.update("ses_run", connection=conn.id)
        bridge = engine.bridge
        bridge.event(asked("per_1", "c1", "ses_1"))
        bridge.event(replied("per_1", "once", "ses_1"))
        await call(engine, "c1", "ses_1", "allowed by opencode")
        bridge.event(asked("per_2", "c2", "ses_1"))
        bridge.event(replied("per_2", "reject", "ses_1"))
        await call(engine, "c2", "ses_1", "denied by opencode", refused="The user rejected permission")
        bridge.event(asked("per_3", "c3", "ses_1"))  # the user's answer reaches the engine after the call
        await call(engine, "c3", "ses_1", "allowed by opencode")
        bridge.event(replied("per_3", "once", "ses_1"))
        bridge.event(asked("per_4", "c4", "ses_run"))
        bridge.event(replied("per_4", "reject", "ses_run"))
        await call(engine, "c4", "ses_run", "denied by opencode", refused="auto-rejecting")
        await call(engine, "c5", "ses_1", "allowed by opencode")  # no ask: opencode's config allowed it
        await call(engine, "c6", "ses_1", "not asked")
        await settled(engine)
        assert engine.journal is not None
        return {c.call_id: c for c in engine.journal.tool_calls(tool="hello_note")}

    calls = run(ws, body)
    assert {k: (c.permission, c.permission_by) for k, c in calls.items()} == {
        "c1": ("allowed by user", "user"),
        "c2": ("denied by user", "user"),
        "c3": ("allowed by user", "user"),
        "c4": ("denied by opencode", "opencode"),
        "c5": ("allowed by opencode", "rule"),
        "c6": ("not asked", None),
    }
    assert calls["c2"].error == "permission denied: The user rejected permission"
    assert calls["c1"].output == "noted: c1" and calls["c2"].output != "noted: c2"


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("EVOLVE_", "OPENCODE_")):
            monkeypatch.delenv(key)
