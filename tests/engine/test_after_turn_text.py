"""hcp's after_turn at the end of a response's text: opencode awaits `experimental.text.complete` at the
end of each text part and stores what the plugin gives back, so after_turn runs there, once per response
(its `usage` not known yet), its `text` replaces the part's, and its `stop` is acted on when the
response is finished with tool calls. Real engines and hook processes (tests/fixtures/hcp_hello.py and
hcp_probe.py); tests/e2e/test_hcp_unconfigured.py has the same against opencode.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from engine.runtime import Engine
from tests.support.environment import without_settings
from tests.support.fixture_hooks import hello_log, install, settled
from tests.support.in_process import run_engine

T = TypeVar("T")
pytestmark = pytest.mark.hooks


def run(ws: Path, body: Callable[[Engine], Awaitable[T]]) -> T:
    return cast(T, run_engine(ws, body, without_settings()))


def test_after_turn_runs_at_the_end_of_the_responses_text_and_its_stop_waits_for_the_finish(
    tmp_path: Path,
) -> None:
    """opencode awaits `experimental.text.complete` at the end of each text part and stores what the
    plugin gives back: after_turn runs there once per response (`usage` is not known yet), its `text`
    replaces the part's; its `stop` is acted on when the response is finished with tool calls."""
    ws = tmp_path / "ws"
    install(ws, "hcp_hello.py", "hello.py")
    parts = [{"type": "reasoning", "text": "hmm"}, {"type": "text", "id": "prt_1", "text": "key: SECRET-TO"}]

    async def body(engine: Engine) -> Any:
        after = engine.bridge.after_turn
        engine.bridge.chat_message("ses_1", "build", None)
        replaced = await after.text_complete(
            "ses_1", {"id": "m1", "agent": "build"}, "prt_1", "key: SECRET-TOKEN", parts, "msg_u1"
        )
        again = await after.text_complete("ses_1", {"id": "m1"}, "prt_2", "more SECRET-TOKEN", parts, None)
        plain = await after.text_complete("ses_1", {"id": "m2"}, "prt_3", "nothing to hide", [], None)
        empty = await after.text_complete("ses_1", {"id": "m3"}, "prt_4", "  ", [], None)
        summary = await after.text_complete(
            "ses_1", {"id": "m4", "agent": "compaction", "summary": True}, "prt_5", "SECRET-TOKEN", [], None
        )
        done = [{"type": "text", "text": "key: [redacted by hello]"}]
        await engine.bridge.assistant_finished(
            "ses_1", {"id": "m1", "tokens": {"input": 3, "output": 1}}, done
        )
        await settled(engine)
        return replaced, again, plain, empty, summary

    replaced, again, plain, empty, summary = run(ws, body)
    assert replaced == {"text": "key: [redacted by hello]"}
    assert again == {} and plain == {} and empty == {} and summary == {}
    turns = hello_log(ws, "after_turn")
    assert [t["assistant"]["text"] for t in turns] == ["key: SECRET-TOKEN", "nothing to hide"]
    first = turns[0]
    assert first["usage"] is None and first["turn"] == 1
    assert first["assistant"] == {"text": "key: SECRET-TOKEN", "tool_calls": [], "reasoning": "hmm"}


def test_a_stop_given_at_the_text_cancels_the_loop_when_the_response_called_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    install(ws, "hcp_probe.py", "probe.py")
    (ws / "state").mkdir(parents=True)
    plan = {"stages": ["after_turn"], "after_turn": [{"answer": {"stop": {"reason": "enough"}}}]}
    (ws / "state" / "hcp-plan.json").write_text(json.dumps(plan), encoding="utf-8")
    call = {"type": "tool", "tool": "read", "callID": "c1", "state": {"input": {"filePath": "/f"}}}

    async def body(engine: Engine) -> list[str]:
        warnings: list[str] = []
        engine.bus.listen(lambda e: warnings.append(e.data["message"]) if e.kind == "warning" else None)
        await engine.bridge.after_turn.text_complete("ses_1", {"id": "m1"}, "p1", "reading it", [call], None)
        await engine.bridge.assistant_finished(
            "ses_1", {"id": "m1"}, [{"type": "text", "text": "reading it"}, call]
        )
        await settled(engine)
        return warnings

    warnings = run(ws, body)
    lines = (ws / "state" / "hcp-probe.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["argv"] for line in lines].count("after_turn") == 1  # once, at the text
    # The stop was acted on at the finish: the engine tried to cancel the turn (no opencode is connected).
    assert any(w.startswith("stopping ses_1 failed: abort: no opencode connected") for w in warnings), (
        warnings
    )


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("EVOLVE_", "OPENCODE_")):
            monkeypatch.delenv(key)
