"""Tests for engine.discovery (scan_hooks, registration_from) and discovery inside the Engine."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.hooks.discovery import HookFile, registration_from, scan_hooks
from engine.runtime import Engine
from tests.support.environment import REPO
from tests.support.in_process import run_engine

# scripts/test.sh runs these tests a second time with warm starts off.
pytestmark = pytest.mark.hooks


def write_file(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def script(hooks: Path, name: str, mode: int = 0o755) -> Path:
    return write_file(hooks / name, "#!/bin/sh\ncat >/dev/null\n", mode)


def discover_hook(hooks: Path, name: str, answer: dict[str, Any], extra: str = "") -> Path:
    """A shell hook whose discover prints `answer`; execute_tool prints which file ran."""
    body = (
        "#!/bin/sh\ncat >/dev/null\n"
        f"{extra}"
        f"if [ \"$1\" = discover ]; then echo '{json.dumps(answer)}'; fi\n"
        f'if [ "$1" = execute_tool ]; then echo \'{{"result": "ran {name}"}}\'; fi\n'
    )
    return write_file(hooks / name, body)


def names(files: list[HookFile]) -> list[str]:
    return [f.name for f in files]


# ---------------------------------------------------------------------------------------------
# scan_hooks


def test_scan_missing_directory(tmp_path: Path) -> None:
    assert scan_hooks(tmp_path / "nope") == ([], [])


def test_scan_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    assert scan_hooks(tmp_path / "hooks") == ([], [])


def test_scan_ignores_dot_and_dunder_names(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    script(hooks, "ok.sh")
    script(hooks, ".hidden.sh")
    script(hooks, "__init__.py")
    script(hooks, "__main__")
    (hooks / "__pycache__").mkdir()
    (hooks / ".git").mkdir()
    os.symlink(tmp_path / "missing", hooks / ".dangling")
    found, skipped = scan_hooks(hooks)
    assert names(found) == ["ok.sh"]
    assert skipped == []  # ignored entries are not even reported


def test_scan_single_underscore_is_not_ignored(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    script(hooks, "_private.sh")
    assert names(scan_hooks(hooks)[0]) == ["_private.sh"]


def test_scan_skips_bad_entries_with_reasons_and_keeps_the_rest(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    script(hooks, "a.sh")
    script(hooks, "plain.txt", 0o644)
    (hooks / "subdir").mkdir()
    script(hooks / "subdir", "inner.sh")  # not scanned: no recursion
    os.symlink(tmp_path / "does-not-exist", hooks / "dangling")
    os.mkfifo(hooks / "pipe")
    target = script(tmp_path, "outside.sh")
    os.symlink(target, hooks / "linked.sh")  # stat follows links: an executable file
    os.symlink(hooks / "subdir", hooks / "dirlink")
    script(hooks, "z.sh", 0o700)
    script(hooks, "group-only.sh", 0o610)  # one execute bit is enough

    found, skipped = scan_hooks(hooks)
    assert names(found) == ["a.sh", "group-only.sh", "linked.sh", "z.sh"]
    assert all(f.path == hooks / f.name for f in found)
    reasons = {s.name: s.reason for s in skipped}
    assert set(reasons) == {"plain.txt", "subdir", "dangling", "pipe", "dirlink"}
    assert "not executable" in reasons["plain.txt"]
    assert "chmod +x hooks/plain.txt" in reasons["plain.txt"]
    assert "directory" in reasons["subdir"]
    assert "directory" in reasons["dirlink"]
    assert "dangling" in reasons["dangling"]
    assert "not a regular file" in reasons["pipe"]
    # Skipped entries are reported in the same sorted order.
    assert [s.name for s in skipped] == ["dangling", "dirlink", "pipe", "plain.txt", "subdir"]


def test_scan_sorts_by_utf16_code_units(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    # U+1F600 is a surrogate pair (D83D DE00) in UTF-16 and sorts before U+FF61, although its
    # code point is larger; uppercase sorts before "_" and lowercase.
    given = ["b", "｡", "a", "B", "😀", "é", "_x", "Z", "A", "10", "9", "a.sh", "a-b"]
    for name in given:
        script(hooks, name)
    found, _ = scan_hooks(hooks)
    expected = ["10", "9", "A", "B", "Z", "_x", "a", "a-b", "a.sh", "b", "é", "😀", "｡"]
    assert names(found) == expected
    assert sorted(given) != expected  # code-point order would differ (😀 after ｡)


def test_hook_file_stem() -> None:
    assert HookFile("notes.py", Path("x")).stem == "notes"
    assert HookFile("archive.tar.gz", Path("x")).stem == "archive.tar"
    assert HookFile("noext", Path("x")).stem == "noext"
    assert HookFile("trailing.", Path("x")).stem == "trailing"


# ---------------------------------------------------------------------------------------------
# registration_from


def hook_file(name: str = "notes.py") -> HookFile:
    return HookFile(name, Path("/ws/hooks") / name)


def test_registration_from_full_result() -> None:
    reg = registration_from(
        hook_file(),
        {
            "name": "memo",
            "test": "memo_test.py",
            "tools": [
                {
                    "name": "add",
                    "description": "Add a note",
                    "parameters": {"text": "the text", "level": {"enum": ["low", "high"], "optional": True}},
                    "permission": {"arg": "level"},
                },
                {"name": "list"},
            ],
            "ignored": "other keys are ignored",
        },
        None,
    )
    assert reg.name == "memo"
    assert reg.test == "memo_test.py"
    assert reg.problems == []
    assert [t.name for t in reg.tools] == ["memo_add", "memo_list"]
    add, lst = reg.tools
    assert (add.hook, add.file, add.short, add.description) == ("memo", "notes.py", "add", "Add a note")
    assert add.parameters == {"text": "the text", "level": {"enum": ["low", "high"], "optional": True}}
    assert add.schema["properties"]["level"] == {
        "type": "string",
        "enum": ["low", "high"],
        "description": "level",
    }
    assert add.schema["required"] == ["text"]
    assert add.permission == {"arg": "level"}
    assert lst.description == ""
    assert lst.parameters == {}
    assert lst.schema["properties"] == {}
    assert lst.permission is None


def test_registration_defaults_from_empty_result() -> None:
    reg = registration_from(hook_file("x.sh"), {}, None)
    assert (reg.name, reg.test, reg.tools, reg.problems) == ("x", None, [], [])


@pytest.mark.parametrize(
    ("result", "error"), [(None, "exit 1"), (None, "timeout"), ({"name": "n"}, "exit 2")]
)
def test_registration_defaults_on_failure(result: dict[str, Any] | None, error: str) -> None:
    reg = registration_from(hook_file("notes.py"), result, error)
    assert reg.name == "notes"
    assert reg.test is None
    assert reg.tools == []
    assert len(reg.problems) == 1
    assert "discover failed" in reg.problems[0]
    assert error in reg.problems[0]


def test_registration_bad_name_and_test_types() -> None:
    reg = registration_from(hook_file(), {"name": 5, "test": ["t.py"], "tools": {"name": "x"}}, None)
    assert reg.name == "notes"
    assert reg.test is None
    assert reg.tools == []
    assert len(reg.problems) == 3
    assert any("'name'" in p for p in reg.problems)
    assert any("'test'" in p for p in reg.problems)
    assert any("'tools' must be a list" in p for p in reg.problems)


def test_registration_empty_name_falls_back_to_stem() -> None:
    reg = registration_from(hook_file(), {"name": "", "test": ""}, None)
    assert reg.name == "notes"
    assert reg.test is None


def test_malformed_tools_are_skipped_with_problems() -> None:
    reg = registration_from(
        hook_file(),
        {
            "name": "n",
            "tools": [
                "not an object",
                {"description": "no name"},
                {"name": ""},
                {"name": 7},
                {"name": "good", "parameters": {"p": "desc"}},
                {"name": "badparams", "parameters": ["p"]},
                {"name": "badspec", "parameters": {"p": 5}},
                {"name": "badenum", "parameters": {"p": {"enum": [1, 2]}}},
                {"name": "also_good"},
            ],
        },
        None,
    )
    assert [t.name for t in reg.tools] == ["n_good", "n_also_good"]
    assert len(reg.problems) == 7
    assert all("skipped" in p for p in reg.problems)
    assert any("#1" in p and "object" in p for p in reg.problems)
    assert any("'n_badspec'" in p and '"p"' in p for p in reg.problems)


@pytest.mark.parametrize(
    "short", ["has space", "dot.ted", "slash/y", "ünïcode", "x" * 63, "semi;colon", "new\nline"]
)
def test_invalid_tool_names_are_skipped(short: str) -> None:
    reg = registration_from(hook_file(), {"name": "n", "tools": [{"name": short}, {"name": "ok"}]}, None)
    assert [t.name for t in reg.tools] == ["n_ok"]
    assert len(reg.problems) == 1
    assert "letters, digits, _ and -" in reg.problems[0]


def test_tool_name_with_trailing_newline_is_skipped() -> None:
    reg = registration_from(hook_file(), {"name": "n", "tools": [{"name": "ok\n"}]}, None)
    assert reg.tools == []
    assert len(reg.problems) == 1


@pytest.mark.parametrize("short", ["a", "with-dash", "Under_Score", "x" * 62])
def test_valid_tool_names(short: str) -> None:
    reg = registration_from(hook_file(), {"name": "n", "tools": [{"name": short}]}, None)
    assert [t.name for t in reg.tools] == [f"n_{short}"]
    assert len(reg.tools[0].name) <= 64
    assert reg.problems == []


def test_registration_name_makes_tool_names_invalid() -> None:
    reg = registration_from(hook_file(), {"name": "bad name", "tools": [{"name": "t"}]}, None)
    assert reg.name == "bad name"
    assert reg.tools == []
    assert len(reg.problems) == 1


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
    write_file(hooks / "broken.sh", "#!/bin/sh\nexit 3\n")
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
    write_file(ws / "hooks" / "noshebang.sh", "echo '{}'\n")
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
        ws / "hooks" / "declared.py", RECORDER.replace("DISCOVER", repr({"stages": ["mutate_request"]}))
    )
    write_file(ws / "hooks" / "every.py", RECORDER.replace("DISCOVER", "{}"))
    write_file(ws / "hooks" / "bad.py", RECORDER.replace("DISCOVER", repr({"stages": "mutate_request"})))
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


def test_a_bad_stages_list_means_every_stage_with_a_problem(tmp_path: Path) -> None:
    reg = registration_from(hook_file(), {"stages": "mutate_request"}, None)
    assert reg.stages is None and reg.handles("tool_before")
    assert reg.problems == [
        "discover: 'stages' must be a list of stage names, got 'mutate_request'; every stage"
    ]
    reg = registration_from(hook_file(), {"stages": ["idle"]}, None)
    assert reg.stages == frozenset({"idle"}) and not reg.handles("tool_after") and reg.problems == []


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
