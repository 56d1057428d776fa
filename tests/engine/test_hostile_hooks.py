"""Hostile hooks, as real scripts in a real engine: nothing a hook prints can stop the engine from
starting, turn a stage into a 500, go unjournaled, or make a listing fail; a process a hook starts in
a new session dies with it at the timeout."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env
from tests.support.processes import pid_alive
from tests.support.waiting import wait_for
from tests.support.workspace import write_file

PY = f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n"

# name -> what it prints, for discover and for every other stage alike.
PRINTS: dict[str, str] = {
    "deep.py": "'{\"a\":' * 10000 + '1' + '}' * 10000",
    "deep_list.py": "'[' * 100000 + ']' * 100000",
    "nan.py": '\'{"name": NaN, "system": [NaN]}\'',
    "infinity.py": "'{\"x\": -Infinity}'",
    "huge_float.py": "'{\"system\": [1e999]}'",
    "digits.py": "'{\"x\": ' + '1' * 5000 + '}'",
    "surrogate.py": '\'{"name": "s\\\\ud800", "system": ["\\\\udfff"]}\'',
    "nul.py": '\'{"system": ["a\\\\u0000b"]}\'',
    "not_object.py": "'[1, 2, 3]'",
    "weird_discover.py": ('\'{"name": ["x"], "test": 5, "stages": "all", "tools": {"a": 1}, "system": 7}\''),
    "deep_tool.py": (
        '\'{"tools": [{"name": "t", "parameters": {"p": \' + \'{"type": "object", "properties": {"q": \' * 45'
        " + '\"x\"' + '}}' * 45 + '}}]}'"
    ),
    "log_nan.py": "'{\"log\": NaN}\\n{\"log\": [' * 1 + '1' + ']}'",
}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    for name, expression in PRINTS.items():
        write_file(ws / "hooks" / name, PY + f"print({expression})\n", 0o755)
    write_file(ws / "hooks" / "binary.sh", "#!/bin/sh\ncat >/dev/null\nprintf '\\377\\376\\000{\\n'\n", 0o755)
    write_file(ws / "prompts" / "preamble.md", "P", 0o644)
    return ws


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    started: list[EngineProcess] = []

    def go(ws: Path, **env: str) -> EngineProcess:
        process = EngineProcess(
            ws, isolated_env(tmp_path / "home", PYTHONPATH=str(REPO), **env), tmp_path / "engine.log"
        )
        started.append(process)
        return process.start()

    yield go
    for process in started:
        process.stop()


def test_nothing_a_hook_prints_bricks_the_engine(workspace: Path, start: Any) -> None:
    engine = start(workspace)
    hooks = {h["file"]: h for h in engine.get("/v1/status")["hooks"]}
    assert set(hooks) == {*PRINTS, "binary.sh"}
    for name in ["deep.py", "deep_list.py", "nan.py", "huge_float.py", "binary.sh"]:
        assert any("discover failed" in p for p in hooks[name]["problems"]), (name, hooks[name])
    assert any("nested deeper than 100 levels" in p for p in hooks["deep.py"]["problems"])
    assert any("NaN is not a JSON value" in p for p in hooks["nan.py"]["problems"])
    assert any("too large" in p for p in hooks["huge_float.py"]["problems"])
    assert hooks["deep_tool.py"]["tools"] == ["deep_tool_t"]  # 92 levels: within the limit

    for stage in ["mutate_request", "tool_after", "observe_message"]:
        result = engine.stage(stage, {"x": 1}, session="ses_h")
        runs = {r["hook"]: r for r in result["run_records"]}
        assert set(runs) >= set(PRINTS) | {"binary.sh"}, stage
        for name in ["deep.py", "deep_list.py", "nan.py", "infinity.py", "huge_float.py", "not_object.py"]:
            assert runs[name]["error"], (stage, name, runs[name])
            assert runs[name]["result"] is None
        assert runs["surrogate.py"]["error"] is None
        assert runs["surrogate.py"]["result"] == {"name": "s\ud800", "system": ["\udfff"]}
    for path in ["/v1/runs", "/v1/dispatches", "/v1/status", "/v1/changes"]:
        engine.get(path, limit=500)
    failed = engine.get("/v1/runs", failed="1", limit=500)["runs"]
    assert {r["hook"] for r in failed} >= {"deep.py", "nan.py", "binary.sh"}
    engine.stop()
    engine = start(workspace)  # and again, with all of it in the journal
    assert len(engine.get("/v1/runs", limit=500)["runs"]) > 40


def test_a_setsid_child_of_a_warm_started_python_hook_dies_with_it(tmp_path: Path, start: Any) -> None:
    """A Python hook forked from a ready interpreter carries its run's tag too (set in the fork), so
    what it starts in a session of its own is found and killed at the timeout."""
    ws = tmp_path / "ws"
    pidfile = tmp_path / "child.pid"
    write_file(
        ws / "hooks" / "escape.py",
        f"#!{sys.executable}\n"
        "import subprocess, sys, time\n"
        "sys.stdin.read()\n"
        "if sys.argv[1] == 'discover':\n"
        "    print('{}')\n"
        "    sys.exit(0)\n"
        f"subprocess.Popen(['setsid', 'sh', '-c', 'echo $$ > {pidfile}; exec sleep 300'],"
        " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "time.sleep(300)\n",
        0o755,
    )
    engine = start(ws, EVOLVE_HOOK_TIMEOUT="3000", EVOLVE_HOOK_WARM_START="1")
    engine.stage("idle", {}, session="ses_w")  # the first run may start cold while the server starts
    pidfile.unlink(missing_ok=True)
    result = engine.stage("idle", {}, session="ses_w")
    (run,) = result["run_records"]
    assert run["error"].startswith("timeout after 3000 ms")
    child = int(
        wait_for("the child's pid", lambda: pidfile.read_text().strip() if pidfile.exists() else None)
    )
    wait_for("the warm hook's setsid child to be killed with it", lambda: not pid_alive(child), timeout=10)


def test_a_setsid_child_dies_with_the_timed_out_hook(tmp_path: Path, start: Any) -> None:
    ws = tmp_path / "ws"
    pidfile = tmp_path / "child.pid"
    write_file(
        ws / "hooks" / "escape.sh",
        "#!/bin/sh\ncat >/dev/null\n"
        'if [ "$1" = discover ]; then echo "{}"; exit 0; fi\n'
        # A child in a session (and process group) of its own, then hang past the timeout.
        f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' </dev/null >/dev/null 2>&1 &\n"
        "sleep 300\n",
        0o755,
    )
    engine = start(ws, EVOLVE_HOOK_TIMEOUT="1500")
    result = engine.stage("idle", {}, session="ses_t")
    (run,) = result["run_records"]
    assert run["error"].startswith("timeout after 1500 ms")
    child = int(
        wait_for("the child's pid", lambda: pidfile.read_text().strip() if pidfile.exists() else None)
    )
    wait_for("the hook's setsid child to be killed with it", lambda: not pid_alive(child), timeout=10)
