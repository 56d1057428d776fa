"""evolve as an hcp host next to opencode-evolve, through a real Engine (real hook processes, real git
and journal; no opencode: tests/e2e/test_hcp.py has that).

The hooks are tests/fixtures/hcp_probe.py (written for hcp: it records every payload and answers what a
test plans) and tests/fixtures/legacy_strict.py (written for opencode-evolve: it fails with "unknown
hook" on any stage name that protocol does not have).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from engine.cli.doctor import diagnose
from engine.hooks.protocols import fired_stages
from engine.protocol.api import HANDLED_HEADER as HANDLED
from engine.protocol.events import Event, EventKind
from engine.protocol.stages import HookProtocol
from engine.runtime import Engine
from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env, without_settings
from tests.support.in_process import run_engine
from tests.support.waiting import wait_for
from tests.support.workspace import make_ws, write_file

T = TypeVar("T")
FIXTURES = REPO / "tests" / "fixtures"

PY = f"#!{sys.executable}\n"


def fixture_hook(fixture: str) -> str:
    """A fixture hook's text with this interpreter on its #! line."""
    return PY + (FIXTURES / fixture).read_text(encoding="utf-8").split("\n", 1)[1]


def install(ws: Path, fixture: str, name: str) -> None:
    """A fixture hook in hooks/<name>, with this interpreter on its #! line."""
    write_file(ws / "hooks" / name, fixture_hook(fixture), 0o755)


def probe_ws(tmp_path: Path, plan: dict[str, Any] | None = None, *, legacy: bool = True) -> Path:
    """hooks/probe.py (and hooks/strict.py when `legacy`) with the compaction prompt; `plan` as planned."""
    files = {"prompts/compaction.md": "Summarise the notes.", "hooks/probe.py": fixture_hook("hcp_probe.py")}
    if legacy:
        files["hooks/strict.py"] = fixture_hook("legacy_strict.py")
    ws = make_ws(tmp_path, files)
    if plan is not None:
        set_plan(ws, plan)
    return ws


def set_plan(ws: Path, plan: dict[str, Any]) -> None:
    (ws / "state").mkdir(exist_ok=True)
    (ws / "state" / "hcp-plan.json").write_text(json.dumps(plan), encoding="utf-8")


def probe_log(ws: Path, stage: str | None = None) -> list[dict[str, Any]]:
    """The payloads the hcp probe got (of `stage`), in order."""
    path = ws / "state" / "hcp-probe.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    entries = [json.loads(line) for line in lines]
    return [e["payload"] for e in entries if stage is None or e["argv"] == stage]


def strict_log(ws: Path) -> list[str]:
    path = ws / "state" / "legacy-strict.log"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def run(ws: Path, body: Callable[[Engine], Awaitable[T]], env: dict[str, str] | None = None) -> T:
    """`body(engine)` with none of the developer's settings in the engine's environment."""
    result: T = run_engine(ws, body, env={**without_settings(), **(env or {})})
    return result


async def settled(engine: Engine) -> None:
    """Wait for what the engine accepted and works on in the background."""
    await engine.activity.quiet()
    assert engine.journal is not None
    await asyncio.to_thread(engine.journal.flush)


EVERY_STAGE = [
    "mutate_request",
    "before_tool",
    "after_tool",
    "execute_tool",
    "after_turn",
    "before_stop",
    "on_error",
    "on_permission",
    "heartbeat",
    "observe_message",
    "format_notification",
    "recover",
    "compacting",
]


# ---- which protocol ---------------------------------------------------------------------------


def test_each_hook_is_treated_as_its_protocol_and_an_hcp_hook_is_discovered_with_the_base_payload(
    tmp_path: Path,
) -> None:
    ws = probe_ws(tmp_path, {"stages": ["mutate_request", "before_tool"]})

    async def body(engine: Engine) -> Any:
        return {r.file.name: r for r in engine.registry.registrations.values()}

    regs = run(ws, body)
    assert regs["strict.py"].protocol is HookProtocol.OPENCODE_EVOLVE
    assert "declares no stages" in regs["strict.py"].protocol_reason
    assert regs["probe.py"].protocol is HookProtocol.HCP
    assert regs["probe.py"].protocol_reason == "it declares before_tool (hcp stage names)"
    # Asked as opencode-evolve asks (it was not known yet), it answered as hcp: asked again with hcp's
    # base payload, whose host.stages say what evolve fires.
    first, second = probe_log(ws, "discover")
    assert first == {"hook": "discover"}
    assert list(second)[:4] == ["hook", "session", "host", "cwd"]
    assert second["host"] == {"name": "evolve", "version": 3, "stages": fired_stages()}
    assert second["cwd"] == str(ws)
    assert second["session"] == {"id": "evolve:discover"}


def test_a_known_hcp_hook_is_discovered_once_and_the_config_decides_first(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["mutate_request"]})  # shared names only: opencode-evolve
    (ws / "config").mkdir()
    (ws / "config" / "evolve.jsonc").write_text('{"hook_protocols": {"probe.py": "hcp"}}', encoding="utf-8")

    async def body(engine: Engine) -> Any:
        await engine.registry.discover()
        return engine.registry.registrations["probe.py"]

    reg = run(ws, body)
    assert reg.protocol is HookProtocol.HCP
    assert reg.protocol_reason == "hook_protocols in the config says hcp"
    discovers = probe_log(ws, "discover")
    assert len(discovers) == 2  # one per discovery, each with hcp's payload from the start
    assert all(d["host"]["version"] == 3 for d in discovers)


def test_a_hook_may_say_its_protocol_and_shared_names_alone_keep_opencode_evolve(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["mutate_request", "execute_tool"]}, legacy=False)
    regs = run(ws, lambda e: asyncio.sleep(0, dict(e.registry.registrations)))
    assert regs["probe.py"].protocol is HookProtocol.OPENCODE_EVOLVE
    assert "names both protocols share" in regs["probe.py"].protocol_reason

    set_plan(ws, {"stages": ["mutate_request"], "discover": [{"answer": {"protocol": "hcp"}}]})
    regs = run(ws, lambda e: asyncio.sleep(0, dict(e.registry.registrations)))
    assert regs["probe.py"].protocol is HookProtocol.HCP
    assert regs["probe.py"].protocol_reason == 'its discover answer says "protocol": "hcp"'


def test_an_opencode_evolve_hook_never_gets_an_hcp_stage_and_no_run_fails(tmp_path: Path) -> None:
    """Every hcp stage the engine fires, next to an opencode-evolve hook that fails on any name its
    protocol does not have: it gets only its own names, and the journal has no failed run."""
    ws = probe_ws(tmp_path, {"stages": EVERY_STAGE})

    async def body(engine: Engine) -> list[str]:
        bridge, tools = engine.bridge, engine.tool_stages
        await bridge.system("ses_1", ["opencode's prompt"])
        tools.accept_before("ses_1", "read", "c1", {"filePath": "/x"}, False)
        await tools.before_tool("ses_1", "read", "c2", {"filePath": "/y"}, False)
        await tools.after_tool("ses_1", "read", "c2", {"filePath": "/y"}, "t", "out", True)
        tools.tool_failed("ses_1", "c1", "read", "boom")
        await bridge.assistant_finished(
            "ses_1", {"id": "m1", "agent": "build"}, [{"type": "text", "text": "hi"}]
        )
        await bridge.assistant_finished(
            "ses_1", {"id": "m2", "error": {"name": "APIError", "data": {"message": "bad gateway"}}}, []
        )
        await bridge.compacting("ses_1")
        await engine.notifier.notify("ses_1", ["note"])
        await settled(engine)
        assert engine.journal is not None
        failed = engine.journal.runs(failed=True)
        assert failed == [], [(r.hook, r.stage, r.error) for r in failed]
        return [p["hook"] for p in probe_log(ws)]

    probe_stages = run(ws, body)
    assert set(strict_log(ws)) == {
        "discover",
        "mutate_request",
        "tool_before",
        "tool_after",
        "observe_message",
        "idle",
        "compacting",
        "format_notification",
    }
    assert {"before_tool", "after_tool", "after_turn", "before_stop", "on_error"} <= set(probe_stages)
    assert not {"idle", "tool_before", "tool_after"} & set(probe_stages)


def test_every_hcp_payload_has_the_base_payload(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": EVERY_STAGE}, legacy=False)

    async def body(engine: Engine) -> None:
        engine.sessions.set_history("ses_1", [{"role": "user", "agent": "build", "parts": []}])
        await engine.bridge.system("ses_1", ["opencode"])
        await engine.tool_stages.before_tool("ses_1", "read", "c1", {}, False)
        await engine.tool_stages.after_tool("ses_1", "read", "c1", {}, None, "out", True)
        await engine.bridge.assistant_finished("ses_1", {"id": "m1"}, [])
        await engine.notifier.notify("ses_1", ["n"])
        await engine.stages.dispatch("recover", {"error": "e", "failed_hook": "x"})
        await engine.bridge.compacting("ses_1")
        await settled(engine)

    run(ws, body)
    payloads = probe_log(ws)[1:]  # the first discover, before it was known as hcp, is opencode-evolve's
    seen = {p["hook"] for p in payloads}
    assert {"mutate_request", "before_tool", "after_tool", "observe_message", "before_stop"} <= seen
    assert {"format_notification", "recover", "compacting"} <= seen
    for p in payloads:
        assert list(p)[:4] == ["hook", "session", "host", "cwd"], p
        assert isinstance(p["session"]["id"], str) and p["session"]["id"]
        assert p["host"] == {"name": "evolve", "version": 3, "stages": fired_stages()}
        assert p["cwd"] == str(ws)
    by_stage = {p["hook"]: p for p in payloads}
    assert by_stage["mutate_request"]["session"]["id"] == "ses_1"
    assert by_stage["format_notification"]["session"]["id"] == "ses_1"  # the source
    assert by_stage["recover"]["session"]["id"] == "evolve:recover"


def test_host_stages_leave_out_on_permission_under_opencode_run(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["mutate_request"], "discover": [{"answer": {"protocol": "hcp"}}]})

    async def body(engine: Engine) -> None:
        conn = engine.connections.connect("http://127.0.0.1:9", str(tmp_path), None, "in-process", "t", "run")
        engine.sessions.update("ses_run", connection=conn.id)
        await engine.bridge.system("ses_run", ["opencode"])

    run(ws, body)
    (payload,) = probe_log(ws, "mutate_request")
    assert "on_permission" not in payload["host"]["stages"]
    assert payload["host"]["stages"] == fired_stages("run")


# ---- tier 0: mutate_request ------------------------------------------------------------------


def system_of(ws: Path, plan: dict[str, Any], legacy: bool = False) -> tuple[Any, list[dict[str, Any]]]:
    set_plan(ws, plan)
    if legacy:
        install(ws, "legacy_strict.py", "strict.py")

    async def body(engine: Engine) -> Any:
        engine.sessions.set_history(
            "ses_1",
            [
                {"role": "user", "agent": "build", "parts": [{"type": "text", "text": "first question"}]},
                {"role": "assistant", "agent": "build", "parts": []},
                {"role": "user", "agent": "build", "parts": [{"type": "text", "text": "what now?"}]},
            ],
        )
        return await engine.bridge.system(
            "ses_1",
            ["You are opencode.", "env block"],
            model={"providerID": "mock", "id": "m1"},
            tools=["read", "bash"],
        )

    return run(ws, body), probe_log(ws, "mutate_request")


HCP_MUTATE = {"stages": ["mutate_request", "before_tool"]}


def test_mutate_request_payload_and_append_by_default(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, legacy=False)
    answer, (payload,) = system_of(
        ws, {**HCP_MUTATE, "mutate_request": [{"answer": {"system": ["APPENDED"]}}]}
    )
    assert answer.system == ["You are opencode.", "env block", "APPENDED"]
    assert answer.cacheable is True and answer.cancel is None
    assert payload["system"] == "You are opencode.\nenv block"
    assert payload["user"] == "what now?"
    assert payload["model"] == "mock/m1"
    assert payload["tools"] == ["read", "bash"]


def test_mutate_request_replace_mode_and_an_opencode_evolve_hook_replaces(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, legacy=False)
    plan = {**HCP_MUTATE, "mutate_request": [{"answer": {"system": ["MINE"], "system_mode": "replace"}}]}
    answer, _ = system_of(ws, plan)
    assert answer.system == ["MINE"]
    # An opencode-evolve hook replaces opencode's prompt, an hcp hook appends after it.
    shutil.rmtree(tmp_path / "ws")
    ws = probe_ws(tmp_path, legacy=False)
    answer, _ = system_of(
        ws, {**HCP_MUTATE, "mutate_request": [{"answer": {"system": "APPENDED"}}]}, legacy=True
    )
    assert answer.system == ["LEGACY-STRICT replaced opencode's prompt", "APPENDED"]


def test_mutate_request_cancel_skips_the_request_and_freezes_nothing(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, legacy=False)
    plan = {
        **HCP_MUTATE,
        "mutate_request": [
            {"once": True, "answer": {"cancel": {"reason": "not today"}, "result": "Synthetic answer."}},
            {"once": True, "answer": {"cancel": {"reason": "still not"}}},
        ],
    }
    set_plan(ws, plan)

    async def body(engine: Engine) -> Any:
        first = await engine.bridge.system("ses_1", ["opencode"])
        second = await engine.bridge.system("ses_1", ["opencode"])
        third = await engine.bridge.system("ses_1", ["opencode"])
        return first, second, third, engine.sessions.frozen("ses_1")

    first, second, third, frozen = run(ws, body)
    assert (first.cancel, first.system, first.cacheable) == ("Synthetic answer.", None, False)
    assert second.cancel == "still not"
    assert third.cancel is None and third.system is None  # abstained: opencode's own prompt
    assert frozen is None


# ---- tier 0: before_tool, after_tool, the record of each call ----------------------------------


def test_before_tool_deny_args_result_and_after_tool_result(tmp_path: Path) -> None:
    ws = probe_ws(
        tmp_path,
        {
            "stages": ["before_tool", "after_tool", "execute_tool"],
            "tools": [{"name": "echo", "description": "echo", "parameters": {"text": "text"}}],
            "before_tool": [
                {"when": {"args": {"filePath": "/secret"}}, "answer": {"deny": {"reason": "no secrets"}}},
                {"when": {"args": {"filePath": "/old"}}, "answer": {"args": {"filePath": "/new"}}},
                {"when": {"tool": "probe_echo"}, "answer": {"result": "from the hook"}},
                {"when": {"tool": "bash"}, "answer": {"result": "not run"}},
            ],
            "after_tool": [{"when": {"tool": "read"}, "answer": {"result": "REPLACED"}}],
        },
    )

    async def body(engine: Engine) -> dict[str, Any]:
        t = engine.tool_stages
        out: dict[str, Any] = {}
        out["deny"] = await t.before_tool("ses_1", "read", "c1", {"filePath": "/secret"}, False)
        t.tool_failed("ses_1", "c1", "read", "no secrets")
        out["args"] = await t.before_tool("ses_1", "read", "c2", {"filePath": "/old"}, False)
        out["after"] = await t.after_tool(
            "ses_1", "read", "c2", {"filePath": "/new"}, "read", "new file", True
        )
        out["builtin_result"] = await t.before_tool("ses_1", "bash", "c3", {"command": "ls"}, False)
        out["own_result"] = await t.before_tool("ses_1", "probe_echo", "c4", {"text": "x"}, True)
        out["permission"] = engine.tools.permission_request("probe_echo", {"text": "x"}, "c4")
        out["own_call"] = await engine.tools.call("probe_echo", {"text": "x"}, session="ses_1", call_id="c4")
        await settled(engine)
        assert engine.journal is not None
        out["records"] = {c.call_id: c for c in engine.journal.tool_calls()}
        return out

    out = run(ws, body)
    assert out["deny"] == {"deny": "no secrets"}
    assert out["args"] == {"args": {"filePath": "/new"}}
    assert out["after"] == {"result": "REPLACED"}
    # opencode runs its own tools: a result for one of them refuses the call with that text.
    assert out["builtin_result"] == {"deny": "not run"}
    # evolve runs its own: the tool does not run and the result is its answer, without a permission ask.
    assert out["own_result"] == {}
    assert out["permission"] is None
    assert out["own_call"].output == "from the hook"
    assert probe_log(ws, "execute_tool") == []

    before = {p["call_id"]: p for p in probe_log(ws, "before_tool")}
    assert before["c2"]["tool"] == "read" and before["c2"]["args"] == {"filePath": "/old"}
    assert before["c2"]["turn"] == 1 and before["c2"]["pattern_matched"] is None
    (after,) = probe_log(ws, "after_tool")
    assert after["args"] == {"filePath": "/new"} and after["result"] == "new file"
    assert after["call_id"] == after["callID"] == "c2"
    assert isinstance(after["duration_ms"], float) and after["duration_ms"] >= 0

    records = out["records"]
    assert records["c1"].origin == "opencode" and records["c1"].error == "no secrets"
    assert records["c1"].changed_by == ["before_tool: deny"]
    assert records["c2"].args == {"filePath": "/new"} and records["c2"].model_args == {"filePath": "/old"}
    assert records["c2"].output == "REPLACED" and records["c2"].tool_output == "new file"
    assert records["c2"].permission == "allowed" and records["c2"].permission_by == "rule"
    assert records["c4"].origin == "evolve" and records["c4"].output == "from the hook"


def test_a_tool_call_is_recorded_when_it_starts_and_ends_with_its_permission(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["mutate_request"]}, legacy=False)  # nothing handles tool stages

    async def body(engine: Engine) -> tuple[list[Event], Any]:
        events: list[Event] = []
        engine.bus.listen(events.append)
        t = engine.tool_stages
        t.accept_before("ses_1", "bash", "c1", {"command": "ls"}, False)
        engine.bridge.event(
            {
                "type": "permission.asked",
                "properties": {
                    "id": "per_1",
                    "sessionID": "ses_1",
                    "permission": "bash",
                    "patterns": ["ls"],
                    "tool": {"messageID": "m", "callID": "c1"},
                },
            }
        )
        engine.bridge.event(
            {
                "type": "permission.replied",
                "properties": {"sessionID": "ses_1", "requestID": "per_1", "reply": "once"},
            }
        )
        await t.after_tool("ses_1", "bash", "c1", {"command": "ls"}, "ls", "a\nb", False)
        t.accept_before("ses_1", "bash", "c2", {"command": "rm -rf /"}, False)
        rule = "The user has specified a rule which prevents you from using this specific tool call. Here are some of the relevant rules [...]"
        engine.bridge.event(
            {
                "type": "message.part.updated",
                "properties": {
                    "part": {
                        "type": "tool",
                        "tool": "bash",
                        "callID": "c2",
                        "sessionID": "ses_1",
                        "state": {"status": "error", "error": rule},
                    }
                },
            }
        )
        t.accept_before("ses_1", "probe_x", "c3", {}, True)  # evolve's own: engine.tools records it
        await settled(engine)
        assert engine.journal is not None
        return events, {c.call_id: c for c in engine.journal.tool_calls()}

    events, records = run(ws, body)
    kinds = [
        (e.kind, e.data["call_id"], e.data["permission"])
        for e in events
        if e.kind in ("tool_call", "tool_result")
    ]
    assert kinds == [
        ("tool_call", "c1", None),
        ("tool_call", "c1", "asked"),
        ("tool_call", "c1", "allowed"),
        ("tool_result", "c1", "allowed"),
        ("tool_call", "c2", None),
        ("tool_result", "c2", "denied"),
    ]
    assert set(records) == {"c1", "c2"}
    assert (
        records["c1"].permission_by == "user"
        and records["c1"].output == "a\nb"
        and records["c1"].title == "ls"
    )
    assert (
        records["c2"].permission_by == "rule"
        and records["c2"].error
        and records["c2"].error.startswith("The user has")
    )
    assert all(r.origin == "opencode" for r in records.values())


# ---- tier 1: before_stop, on_error --------------------------------------------------------------


def test_before_stop_payload_continue_and_on_error(tmp_path: Path) -> None:
    ws = probe_ws(
        tmp_path,
        {
            "stages": ["before_stop", "on_error"],
            "before_stop": [{"when": {"exit_reason": "stop"}, "answer": {"continue": "KEEP GOING"}}],
        },
    )

    async def body(engine: Engine) -> Any:
        events: list[Event] = []
        engine.bus.listen(events.append)
        conn = engine.connections.connect("http://127.0.0.1:9", str(tmp_path), None, "in-process", "t", "run")
        engine.sessions.update("ses_1", connection=conn.id)
        engine.bridge.chat_message("ses_1", "build", {"providerID": "mock", "modelID": "m"})
        tokens = {"input": 10, "output": 2, "reasoning": 0, "cache": {"read": 1, "write": 0}}
        await engine.bridge.assistant_finished(
            "ses_1", {"id": "m1", "tokens": tokens}, [{"type": "tool", "tool": "read"}]
        )
        follow = await engine.bridge.assistant_finished(
            "ses_1", {"id": "m2", "agent": "build", "tokens": tokens}, [{"type": "text", "text": "done"}]
        )
        aborted = await engine.bridge.assistant_finished(
            "ses_1", {"id": "m3", "error": {"name": "MessageAbortedError"}}, []
        )
        await engine.bridge.assistant_finished(
            "ses_1", {"id": "m4", "error": {"name": "APIError", "data": {"message": "overloaded"}}}, []
        )
        await settled(engine)
        return follow, aborted, [e for e in events if e.known_kind is EventKind.WARNING]

    follow, aborted, warnings = run(ws, body)
    assert follow == {"text": "KEEP GOING", "agent": "build", "model": {"providerID": "mock", "modelID": "m"}}
    assert aborted is None
    stops = probe_log(ws, "before_stop")
    assert [s["exit_reason"] for s in stops] == ["stop", "cancel", "error"]
    first = stops[0]
    assert first["final"] is True  # a session of `opencode run`: a continue cannot start a new turn
    assert first["turn"] == 2 and first["usage"] == {
        "input": 20,
        "output": 4,
        "reasoning": 0,
        "cache_read": 2,
        "cache_write": 0,
    }
    assert first["answer"] == "done" and first["error"] is None and isinstance(first["transcript"], list)
    assert stops[2]["error"] == "overloaded"
    (error,) = probe_log(ws, "on_error")  # not for a cancel
    assert (error["phase"], error["error"], error["recoverable"]) == ("request", "overloaded", False)
    assert any("came after opencode finished the turn" in w.data["message"] for w in warnings)
    assert strict_log(ws).count("idle") == 3  # opencode-evolve's idle still fires, as before


def test_after_turn_payload_and_a_stop_cancels_the_loop_that_goes_on(tmp_path: Path) -> None:
    ws = probe_ws(
        tmp_path,
        {
            "stages": ["after_turn"],
            "after_turn": [{"when": {"turn": 1}, "answer": {"stop": {"reason": "enough"}}}],
        },
    )

    async def body(engine: Engine) -> Any:
        events: list[Event] = []
        engine.bus.listen(events.append)
        engine.bridge.chat_message("ses_1", "build", None)
        call = {"type": "tool", "tool": "read", "callID": "c1", "state": {"input": {"filePath": "/f"}}}
        parts = [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "reading"}, call]
        tokens = {"input": 5, "output": 1}
        await engine.bridge.assistant_finished("ses_1", {"id": "m1", "tokens": tokens}, parts)
        await settled(engine)
        return [e.data["message"] for e in events if e.kind == "warning"]

    warnings = run(ws, body)
    (payload,) = probe_log(ws, "after_turn")
    assert payload["turn"] == 1
    assert payload["assistant"] == {
        "text": "reading",
        "tool_calls": [{"id": "c1", "name": "read", "args": {"filePath": "/f"}}],
        "reasoning": "hmm",
    }
    assert payload["usage"] == {"input": 5, "output": 1}
    # The stop was acted on: the engine tried to cancel the session's turn (no opencode is connected).
    assert any(w.startswith("stopping ses_1 failed: abort: no opencode connected") for w in warnings), (
        warnings
    )


def test_before_turn_gives_this_turns_system_or_a_skip_and_not_for_compaction(tmp_path: Path) -> None:
    ws = probe_ws(
        tmp_path,
        {
            "stages": ["before_turn"],
            "before_turn": [
                {"when": {"turn": 1}, "answer": {"system": "FOR TURN ONE"}},
                {"when": {"turn": 2}, "answer": {"skip": {"reason": "no second turn"}}},
            ],
        },
    )

    async def body(engine: Engine) -> Any:
        engine.bridge.chat_message("ses_1", "build", None)
        user = {"role": "user", "agent": "build", "parts": [{"type": "text", "text": "hi"}]}
        engine.sessions.set_history("ses_1", [user])
        first = await engine.bridge.before_turn("ses_1", ["read"])
        await engine.bridge.assistant_finished("ses_1", {"id": "m1"}, [{"type": "tool", "tool": "read"}])
        second = await engine.bridge.before_turn("ses_1", None)
        compaction = {"role": "user", "agent": "build", "parts": [{"type": "compaction", "auto": False}]}
        engine.sessions.set_history("ses_1", [user, compaction])
        third = await engine.bridge.before_turn("ses_1", None)
        return first, second, third

    first, second, third = run(ws, body)
    assert first == {"system": ["FOR TURN ONE"]}
    assert second == {"skip": "no second turn"}
    assert third == {}  # opencode's compaction call is not a turn of the agent
    payloads = probe_log(ws, "before_turn")
    assert [p["turn"] for p in payloads] == [1, 2]
    assert payloads[0]["tools"] == ["read"] and payloads[0]["history"][0]["role"] == "user"


# ---- tier 3 ----------------------------------------------------------------------------------


def test_format_notification_delivers_each_hcp_message_on_its_own_and_honours_to(tmp_path: Path) -> None:
    ws = probe_ws(
        tmp_path,
        {
            "stages": ["format_notification", "before_tool"],
            "format_notification": [
                {
                    "when": {"notifications": ["to one"]},
                    "answer": {"message": "ONE", "to": {"sessions": ["ses_b"]}},
                },
                {"when": {"notifications": ["to nobody"]}, "answer": {"message": "NONE", "to": {}}},
                {"answer": {"message": "ALL"}},
            ],
        },
        legacy=False,
    )
    install(ws, "hcp_probe.py", "probe2.py")  # a second hcp hook with the same plan

    async def body(engine: Engine) -> Any:
        for sid in ("ses_a", "ses_b", "ses_c"):
            engine.sessions.update(sid, title=sid)
        events: list[Event] = []
        engine.bus.listen(events.append)
        await engine.notifier.notify("ses_a", ["to everyone"])
        await engine.notifier.notify("ses_a", ["to one"])
        await engine.notifier.notify("ses_a", ["to nobody"])
        return [(e.data["message"], e.data["recipients"]) for e in events if e.kind == "notification"]

    sent = run(ws, body)
    assert sent == [
        ("ALL", ["ses_b", "ses_c"]),  # two hooks, two messages, never joined
        ("ALL", ["ses_b", "ses_c"]),
        ("ONE", ["ses_b"]),
        ("ONE", ["ses_b"]),
        ("NONE", []),
        ("NONE", []),
    ]
    payload = probe_log(ws, "format_notification")[0]
    assert payload["notifications"] == ["to everyone"]
    assert [s["id"] for s in payload["sessions"]] == ["ses_a", "ses_b", "ses_c"]


def test_compacting_gets_the_current_instructions(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["compacting", "before_tool"]})
    prompt = run(ws, lambda e: e.bridge.compacting("ses_1"))
    assert prompt == "Summarise the notes."
    (payload,) = probe_log(ws, "compacting")
    assert payload["prompt"] == "Summarise the notes."


def test_heartbeat_tools_persist_the_agents_choice_and_the_config_disable_wins(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["heartbeat", "before_tool"]})

    async def body(engine: Engine) -> Any:
        names = {s.name for s in engine.tools.specs()}
        set_ = await engine.tools.call("evolve_heartbeat_set", {"interval_ms": 120000}, session="ses_1")
        too_fast = await engine.tools.call("evolve_heartbeat_set", {"interval_ms": 5}, session="ses_1")
        status = await engine.tools.call("evolve_heartbeat_status", {})
        history = await engine.tools.call("evolve_heartbeat_history", {})
        return names, set_, too_fast, status, history, engine.heartbeat.interval_ms

    names, set_, too_fast, status, history, interval = run(ws, body)
    assert {"evolve_heartbeat_set", "evolve_heartbeat_status", "evolve_heartbeat_history"} <= names
    assert set_.error is None and "every 120000 ms (your choice)" in str(set_.output)
    assert too_fast.error and "at least 60000" in too_fast.error
    assert interval == 120000
    assert "every 120000 ms (your choice)" in str(status.output)
    assert history.output == "no heartbeat has run yet"
    saved = json.loads((ws / "state" / "evolve.json").read_text())["heartbeat_choice"]
    assert saved["interval_ms"] == 120000 and saved["session"] == "ses_1"

    # A new engine keeps the choice; the config's force-disable wins over it.
    assert run(ws, lambda e: asyncio.sleep(0, e.heartbeat.interval_ms)) == 120000
    (ws / "config").mkdir(exist_ok=True)
    (ws / "config" / "evolve.jsonc").write_text('{"heartbeat_ms": -1}', encoding="utf-8")

    async def disabled(engine: Engine) -> Any:
        return (
            engine.heartbeat.interval_ms,
            engine.heartbeat.status().interval_source,
            engine.heartbeat.describe(),
        )

    interval, source, text = run(ws, disabled)
    assert interval == -1 and source == "config (disabled)"
    assert text.startswith("heartbeat: disabled by the operator")


def test_the_heartbeat_tools_are_offered_only_to_workspaces_with_an_hcp_hook(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    install(ws, "legacy_strict.py", "strict.py")
    names = run(ws, lambda e: asyncio.sleep(0, {s.name for s in e.tools.specs()}))
    assert not any(n.startswith("evolve_heartbeat_") and n != "evolve_heartbeat_time" for n in names)
    assert len([n for n in names if n.startswith("evolve_")]) == 13


# ---- discover.stages is checked ---------------------------------------------------------------


def test_declared_stages_are_checked_in_the_journal_the_event_stream_and_doctor(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["before_tool", "idle", "tool_after", "bogus"]}, legacy=False)

    async def body(engine: Engine) -> Any:
        events: list[Event] = []
        engine.bus.listen(events.append)
        await engine.registry.discover()
        await settled(engine)
        assert engine.journal is not None
        return [e.data["message"] for e in events if e.kind == "warning"], engine.journal.events(
            kind="warning"
        )

    published, journaled = run(ws, body)
    expected = [
        "hooks/probe.py: declares stage 'bogus', which evolve does not know; it never runs for it",
        "hooks/probe.py: declares stage 'idle', which is not fired for hcp hooks; use 'before_stop'",
        "hooks/probe.py: declares stage 'tool_after', which is not fired for hcp hooks; use 'after_tool'",
    ]
    assert published == expected
    assert sorted(e["data"]["message"] for e in journaled) == sorted(expected * 2)  # both discoveries

    report = asyncio.run(diagnose(ws, without_settings()))
    findings = [(f.level, f.message) for f in report.findings if f.where == "hooks/probe.py"]
    assert ("info", "treated as hcp: it declares before_tool (hcp stage names)") in findings
    stage_findings = [m for level, m in findings if level == "warning" and m.startswith("declares stage")]
    assert stage_findings == [m.split(": ", 1)[1] for m in expected]
    assert report.hooks[0]["protocol"] == "hcp"


# ---- the routes the shim calls ------------------------------------------------------------------


def test_the_shim_routes_say_what_is_handled_and_accept_observational_work_at_once(tmp_path: Path) -> None:
    ws = probe_ws(tmp_path, {"stages": ["mutate_request"]}, legacy=True)  # nothing handles tool stages
    engine = EngineProcess(ws, isolated_env(tmp_path / "home"), tmp_path / "engine.log", cwd=REPO).start()
    try:
        with engine.client() as http:
            connect = http.post(
                "/v1/opencode/connect",
                json={"url": "http://127.0.0.1:9", "directory": str(tmp_path), "command": "serve"},
            )
            assert "before_tool" not in connect.json()["handled"]
            assert connect.json()["handled"] == connect.headers[HANDLED].split(",")
            assert "tool_before" in connect.json()["handled"]  # the opencode-evolve hook gets every stage
            before = http.post(
                "/v1/opencode/tool-before",
                json={"session": "ses_1", "tool": "read", "call_id": "c1", "args": {}},
            )
            assert before.status_code == 202
            assistant = http.post(
                "/v1/opencode/assistant", json={"session": "ses_1", "message": {"id": "m1"}, "parts": []}
            )
            assert assistant.status_code == 202  # before idle ran: the stage runs after the answer

            # A hook that handles before_tool appears (the engine re-discovers on the change in hooks/):
            # the next answer says so.
            set_plan(ws, {"stages": ["before_tool"], "before_tool": [{"answer": {"deny": {"reason": "no"}}}]})
            install(ws, "hcp_probe.py", "probe.py")

            def handled() -> list[str]:
                answer = http.post("/v1/opencode/chat-message", json={"session": "ses_1"})
                return [s for s in answer.headers[HANDLED].split(",") if s == "before_tool"]

            wait_for("the re-discovery to reach the shim's answers", handled, timeout=20)
            waited = http.post(
                "/v1/opencode/tool-before",
                json={"session": "ses_1", "tool": "read", "call_id": "c2", "args": {}, "wait": True},
            )
            assert waited.json() == {"deny": "no"}
    except httpx.HTTPError:
        print(engine.log_tail())
        raise
    finally:
        engine.stop()
    assert "idle" in strict_log(ws)  # accepted, then done by the engine


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("EVOLVE_", "OPENCODE_")):
            monkeypatch.delenv(key)
