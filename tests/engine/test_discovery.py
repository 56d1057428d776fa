"""Tests for engine.discovery (scan_hooks, registration_from) and discovery inside the Engine."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.runtime import Engine
from tests.support.environment import REPO
from tests.support.in_process import run_engine
from tests.support.workspace import write_file

# scripts/test.sh runs these tests a second time with warm starts off.
pytestmark = pytest.mark.hooks


def discover_hook(hooks: Path, name: str, answer: dict[str, Any], extra: str = "") -> Path:
    """A shell hook whose discover prints `answer`; execute_tool prints which file ran."""
    body = (
        "#!/bin/sh\ncat >/dev/null\n"
        f"{extra}"
        f"if [ \"$1\" = discover ]; then echo '{json.dumps(answer)}'; fi\n"
        f'if [ "$1" = execute_tool ]; then echo \'{{"result": "ran {name}"}}\'; fi\n'
    )
    return write_file(hooks / name, body, 0o755)


# ---------------------------------------------------------------------------------------------
# scan_hooks


# ---------------------------------------------------------------------------------------------
# registration_from


# ---------------------------------------------------------------------------------------------
# Discovery in the Engine


def test_engine_discovery_runs_hooks_in_parallel(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hooks = ws / "hooks"
    for i in range(8):
        discover_hook(hooks, f"h{i}.sh", {"name": f"hook{i}"}, extra='[ "$1" = discover ] && sleep 0.3\n')

    async def body(engine: Engine) -> Any:
        started = time.perf_counter()
        await engine.registry.discover()
        return time.perf_counter() - started, engine

    elapsed, engine = run_engine(ws, body)
    assert elapsed < 1.6, f"discovery of 8 hooks sleeping 0.3 s took {elapsed:.2f} s"
    # Registration order stays the discovery order, whatever order the runs finished in.
    assert list(engine.registry.registrations) == [f"h{i}.sh" for i in range(8)]
    assert [r.name for r in engine.registry.registrations.values()] == [f"hook{i}" for i in range(8)]


def test_engine_discovery_registers_tools_and_reports_problems(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hooks = ws / "hooks"
    discover_hook(
        hooks,
        "good.sh",
        {
            "name": "g",
            "test": "g_test.sh",
            "tools": [{"name": "run", "description": "Run it"}, {"name": "bad name"}],
        },
    )
    write_file(hooks / "broken.sh", "#!/bin/sh\nexit 3\n", 0o755)
    write_file(hooks / "notexec.sh", "#!/bin/sh\n", 0o644)

    async def body(engine: Engine) -> Any:
        sub = engine.bus.subscribe()
        await engine.registry.discover()
        events = []
        while (event := sub.get_nowait()) is not None:
            events.append(event)
        return engine, events

    engine, events = run_engine(ws, body)
    assert [h.name for h in engine.registry.hooks] == ["broken.sh", "good.sh"]
    assert [(s.name, "not executable" in s.reason) for s in engine.registry.skipped] == [("notexec.sh", True)]
    good = engine.registry.registrations["good.sh"]
    assert (good.name, good.test, [t.name for t in good.tools]) == ("g", "g_test.sh", ["g_run"])
    broken = engine.registry.registrations["broken.sh"]
    assert (broken.name, broken.test, broken.tools) == ("broken", None, [])
    assert "exit 3" in broken.problems[0]
    assert "g_run" in {spec.name for spec in engine.tools.specs()}
    warnings = [e.data["message"] for e in events if e.kind == "warning"]
    assert any("notexec.sh skipped" in w for w in warnings)
    assert any("broken.sh" in w and "discover failed" in w for w in warnings)
    assert any("good.sh" in w and "bad name" in w for w in warnings)
    [discovered] = [e.data for e in events if e.kind == "hooks_discovered"]
    assert [h["file"] for h in discovered["hooks"]] == ["broken.sh", "good.sh"]
    assert discovered["skipped"] == [{"file": "notexec.sh", "reason": engine.registry.skipped[0].reason}]


def test_engine_discover_runs_are_journaled(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    discover_hook(ws / "hooks", "a.sh", {"name": "a"})

    async def body(engine: Engine) -> Any:
        assert engine.journal is not None
        engine.journal.flush()
        return engine.journal.runs(stage="discover"), engine.registry.registrations["a.sh"].run_id

    runs, run_id = run_engine(ws, body)
    assert [r.id for r in runs] == [run_id]
    assert runs[0].input == {"hook": "discover"}
    assert runs[0].dispatch_id is None


def test_same_registration_name_later_wins_for_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hooks = ws / "hooks"
    discover_hook(hooks, "a.sh", {"name": "dup", "tools": [{"name": "t", "description": "from a"}]})
    discover_hook(hooks, "b.sh", {"name": "dup", "tools": [{"name": "t", "description": "from b"}]})

    async def body(engine: Engine) -> Any:
        call = await engine.tools.call("dup_t", {})
        return engine, call

    engine, call = run_engine(ws, body)
    tools = engine.registry.hook_tools()
    assert tools["dup_t"].file == "b.sh"
    assert tools["dup_t"].description == "from b"
    [spec] = [s for s in engine.tools.specs() if s.name == "dup_t"]
    assert spec.origin == "b.sh"
    assert spec.description == "from b"
    assert call.output == "ran b.sh"


def test_engine_rediscovers_added_hooks(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hooks = ws / "hooks"
    discover_hook(hooks, "a.sh", {"name": "a", "tools": [{"name": "one"}]})

    async def body(engine: Engine) -> Any:
        before = {t for t in engine.registry.hook_tools()}
        discover_hook(hooks, "b.sh", {"name": "b", "tools": [{"name": "two"}]})
        (hooks / "a.sh").unlink()
        await engine.registry.discover()
        return before, set(engine.registry.hook_tools()), [h.name for h in engine.registry.hooks]

    before, after, hook_names = run_engine(ws, body)
    assert before == {"a_one"}
    assert after == {"b_two"}
    assert hook_names == ["b.sh"]


def test_engine_hook_without_shebang_is_reported(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_file(ws / "hooks" / "noshebang.sh", "echo '{}'\n", 0o755)
    discover_hook(ws / "hooks", "ok.sh", {"name": "ok", "tools": [{"name": "t"}]})
    engine = run_engine(ws, lambda e: asyncio.sleep(0, e))
    assert set(engine.registry.registrations) == {"noshebang.sh", "ok.sh"}
    assert "ok_t" in engine.registry.hook_tools()
    problem = engine.registry.registrations["noshebang.sh"].problems[0]
    assert "discover failed" in problem


def test_engine_with_python_hook_uses_stem(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_file(
        ws / "hooks" / "memo.py",
        f"#!{sys.executable}\nimport json, sys\nsys.stdin.read()\n"
        "if sys.argv[1] == 'discover':\n    print(json.dumps({'tools': [{'name': 'x'}]}))\n",
        0o755,
    )
    engine = run_engine(ws, lambda e: asyncio.sleep(0, e))
    assert engine.registry.registrations["memo.py"].name == "memo"
    assert "memo_x" in engine.registry.hook_tools()


# ---------------------------------------------------------------------------------------------
# Declared stages: a hook is started only for the stages it handles


RECORDER = f"""#!{sys.executable}
import json, sys
data = json.load(sys.stdin)
open("ran.log", "a").write(sys.argv[1] + " " + sys.argv[0].rsplit("/", 1)[-1] + "\\n")
if sys.argv[1] == "discover":
    print(json.dumps(DISCOVER))
"""


def test_a_hook_that_declares_its_stages_is_started_only_for_those(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_file(
        ws / "hooks" / "declared.py",
        RECORDER.replace("DISCOVER", repr({"stages": ["mutate_request"]})),
        0o755,
    )
    write_file(ws / "hooks" / "every.py", RECORDER.replace("DISCOVER", "{}"), 0o755)
    write_file(
        ws / "hooks" / "bad.py", RECORDER.replace("DISCOVER", repr({"stages": "mutate_request"})), 0o755
    )
    stages = ["tool_before", "tool_after", "observe_message", "mutate_request"]

    async def body(engine: Engine) -> list[list[str]]:
        (ws / "ran.log").unlink()
        hooks = []
        for stage in stages:
            result = await engine.stages.dispatch(stage, {"session": {"id": "s"}}, session="s")
            hooks.append(result.hooks)
        return hooks

    assert run_engine(ws, body) == [["bad.py", "every.py"]] * 3 + [["bad.py", "declared.py", "every.py"]]
    ran = (ws / "ran.log").read_text().split("\n")
    assert "tool_before declared.py" not in ran and "mutate_request declared.py" in ran


def test_the_example_hook_declares_its_stages_and_sits_out_tool_calls(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(REPO / "engine" / "example", ws)

    async def body(engine: Engine) -> tuple[Any, list[str], list[str]]:
        before = await engine.stages.dispatch(
            "tool_before", {"session": {"id": "s"}, "tool": "read"}, session="s"
        )
        after = await engine.stages.dispatch(
            "tool_after", {"session": {"id": "s"}, "tool": "read"}, session="s"
        )
        return engine.registry.registrations["notes.py"].stages, before.hooks, after.hooks

    stages, before, after = run_engine(ws, body)
    assert stages is not None
    assert {"mutate_request", "observe_message", "idle", "heartbeat", "execute_tool"} <= stages
    assert not stages & {"tool_before", "tool_after"}
    assert before == after == []  # no process started for a tool call
