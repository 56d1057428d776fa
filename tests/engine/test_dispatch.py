"""Tests for engine.dispatch (merge, build_input, recover) and the engine's stages and system prompts.

Hooks are small real scripts in a temporary workspace; they record every stdin document they get in
`$EVOLVE_TEST_OUT` (outside the workspace) so that the tests can look at exactly what was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine.hooks.dispatch import Dispatcher
from engine.runtime import Engine
from tests.support.in_process import run_engine
from tests.support.workspace import Files, make_ws, write_file

# scripts/test.sh runs these tests a second time with warm starts off.
pytestmark = pytest.mark.hooks

T = TypeVar("T")

# A generic hook: logs "<file> <stage>" to calls.log, appends its raw stdin to <file>.<stage>.jsonl,
# then answers from SPEC: a list of JSON lines for the stage, or an int exit code.
PY_HOOK = (
    f"#!{sys.executable}\n"
    + """import json, os, sys
stage = sys.argv[1]
raw = sys.stdin.read()
name = os.path.basename(sys.argv[0])
out = os.environ["EVOLVE_TEST_OUT"]
with open(os.path.join(out, "calls.log"), "a") as f:
    f.write(name + " " + stage + "\\n")
with open(os.path.join(out, name + "." + stage + ".jsonl"), "a") as f:
    f.write(raw + "\\n")
spec = json.loads(__SPEC__).get(stage, [])
if isinstance(spec, int):
    sys.exit(spec)
for line in spec:
    print(json.dumps(line))
"""
)

PROMPTS = {
    "preamble": "You are a test agent.",
    "chat": "Chat with the user.",
    "heartbeat": "Heartbeat task.",
    "compaction": "Summarise.",
    "recover": "A hook failed; recover.",
}


def py_hook(ws: Path, name: str, spec: dict[str, Any] | None = None) -> Path:
    text = PY_HOOK.replace("__SPEC__", repr(json.dumps(spec or {})))
    return write_file(ws / "hooks" / name, text, 0o755)


def prompt_files(texts: dict[str, str] | None = None) -> Files:
    """prompts/<stage>.md for each stage of `texts` (PROMPTS by default)."""
    return {f"prompts/{stage}.md": text for stage, text in (PROMPTS if texts is None else texts).items()}


def out_dir(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return out


def inputs(out: Path, hook: str, stage: str) -> list[dict[str, Any]]:
    path = out / f"{hook}.{stage}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def calls(out: Path) -> list[str]:
    path = out / "calls.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def stage_calls(out: Path, stage: str) -> list[str]:
    return [line.split(" ")[0] for line in calls(out) if line.split(" ")[1] == stage]


def run_recorded(ws: Path, out: Path, body: Callable[[Engine], Awaitable[T]]) -> T:
    """`body(engine)` with an engine whose hooks record what they get in `out`."""
    result: T = run_engine(ws, body, env={**os.environ, "EVOLVE_TEST_OUT": str(out)})
    return result


# ---------------------------------------------------------------------------------------------
# merge


# ---------------------------------------------------------------------------------------------
# build_input


# ---------------------------------------------------------------------------------------------
# recover_defaults


# ---------------------------------------------------------------------------------------------
# What hooks receive, through a real Engine


def test_discover_input_is_exactly_hook_discover(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py")
    run_recorded(ws, out, lambda e: asyncio.sleep(0))
    raw = (out / "a.py.discover.jsonl").read_text(encoding="utf-8")
    # One document, no trailing newline on stdin (the one newline here is the recorder's).
    assert raw.endswith("}\n")
    assert raw.count("\n") == 1
    assert json.loads(raw) == {"hook": "discover"}


def test_input_key_order_and_content(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py")

    async def body(engine: Engine) -> None:
        engine.sessions.set_history("s1", [{"role": "user", "agent": "build", "parts": []}])
        await engine.stages.dispatch(
            "idle", {"session": {"id": "s1", "agent": "build"}, "answer": "hi"}, session="s1"
        )

    run_recorded(ws, out, body)
    [payload] = inputs(out, "a.py", "idle")
    assert list(payload) == ["hook", "prompts", "session", "answer", "history"]
    assert payload["hook"] == "idle"
    assert payload["prompts"] == PROMPTS
    assert list(payload["prompts"]) == ["preamble", "chat", "heartbeat", "compaction", "recover"]
    assert payload["session"] == {"id": "s1", "agent": "build"}
    assert payload["history"] == [{"role": "user", "agent": "build", "parts": []}]


def test_prompts_omit_missing_files(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files({"preamble": "P", "recover": "R"})), out_dir(tmp_path)
    py_hook(ws, "a.py")
    run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    [payload] = inputs(out, "a.py", "heartbeat")
    assert payload["prompts"] == {"preamble": "P", "recover": "R"}


def test_prompts_are_reread_on_every_call(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files({"chat": "one"})), out_dir(tmp_path)
    py_hook(ws, "a.py")

    async def body(engine: Engine) -> None:
        await engine.stages.dispatch("heartbeat")
        (ws / "prompts" / "chat.md").write_text("two", encoding="utf-8")
        await engine.stages.dispatch("heartbeat")

    run_recorded(ws, out, body)
    assert [p["prompts"] for p in inputs(out, "a.py", "heartbeat")] == [{"chat": "one"}, {"chat": "two"}]


def test_history_only_when_a_session_is_bound(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py")

    async def body(engine: Engine) -> None:
        await engine.stages.dispatch("idle", {"answer": "no session"})
        await engine.stages.dispatch("idle", {"answer": "unknown session"}, session="fresh")
        engine.sessions.set_history("s1", [{"role": "assistant"}])
        await engine.stages.dispatch("idle", {"answer": "known session"}, session="s1")
        # The dispatcher itself ignores a history that comes without a session.
        dispatcher = Dispatcher(engine.workspace, engine.registry.hooks_for, engine.runner.run)
        await dispatcher.dispatch("idle", {"answer": "history, no session"}, history=[1])

    run_recorded(ws, out, body)
    got = {p["answer"]: p for p in inputs(out, "a.py", "idle")}
    assert "history" not in got["no session"]
    assert got["unknown session"]["history"] == []
    assert got["known session"]["history"] == [{"role": "assistant"}]
    assert "history" not in got["history, no session"]


@pytest.mark.parametrize("stage", ["format_notification", "recover"])
def test_no_history_for_sessionless_stages_even_with_a_session(tmp_path: Path, stage: str) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py")

    async def body(engine: Engine) -> None:
        engine.sessions.set_history("s1", [{"role": "user"}])
        await engine.stages.dispatch(stage, {"notifications": ["n"]}, session="s1")

    run_recorded(ws, out, body)
    [payload] = inputs(out, "a.py", stage)
    assert "history" not in payload
    assert payload["notifications"] == ["n"]


def test_history_absent_for_recover_triggered_by_a_session_stage(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": 1})

    async def body(engine: Engine) -> None:
        engine.sessions.set_history("s1", [{"role": "user"}])
        await engine.stages.dispatch(
            "mutate_request", {"session": {"id": "s1"}, "system": ["x"]}, session="s1"
        )

    run_recorded(ws, out, body)
    [request] = inputs(out, "a.py", "mutate_request")
    assert request["history"] == [{"role": "user"}]
    [recover] = inputs(out, "a.py", "recover")
    assert list(recover) == ["hook", "prompts", "error", "failed_hook"]


# ---------------------------------------------------------------------------------------------
# Merging and ordering across hooks


A_SH = """#!/bin/sh
cat >/dev/null
case "$1" in
  heartbeat)
    echo '{"system": ["from a"]}'
    echo '{"notify": ["a1", "a2"]}'
    echo '{"user": "user a"}'
    echo '{"error": "error a"}'
    echo '{"count": 1}'
    echo '{"flag": true}'
    echo '{"obj": {"x": 1}}'
    echo '{"mixed": "text"}'
    echo '{"only_a": "kept"}'
    ;;
esac
"""
B_SH = """#!/bin/sh
cat >/dev/null
case "$1" in
  heartbeat)
    echo '{"log": "b is logging"}'
    echo '{"system": ["from b"], "notify": ["b1"]}'
    echo '{"user": "user b", "error": "error b"}'
    echo '{"count": 2, "flag": false, "obj": {"y": 2}, "mixed": ["list"], "only_b": null}'
    ;;
esac
"""


def test_two_hooks_merge_in_sorted_order(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    # Written in reverse order: the dispatch order comes from the sorted scan, not creation time.
    write_file(ws / "hooks" / "b.sh", B_SH, 0o755)
    write_file(ws / "hooks" / "a.sh", A_SH, 0o755)
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.hooks == ["a.sh", "b.sh"]
    assert result.failed == []
    assert result.recovered is False
    assert result.merged == {
        "system": ["from a", "from b"],
        "notify": ["a1", "a2", "b1"],
        "user": "user a\nuser b",
        "error": "error a\nerror b",
        "count": 2,
        "flag": False,
        "obj": {"y": 2},
        "mixed": ["list"],
        "only_a": "kept",
        "only_b": None,
    }


def test_a_result_key_error_is_not_a_failure(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": [{"error": "just a key"}]})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("mutate_request", {"session": {"id": "s"}}))
    assert result.failed == []
    assert result.recovered is False
    assert result.merged == {"error": "just a key"}
    assert stage_calls(out, "recover") == []


ORDER_SH = """#!/bin/sh
cat >/dev/null
if [ "$1" = heartbeat ]; then
  echo "start NAME" >> "$EVOLVE_TEST_OUT/order"
  sleep 0.1
  echo "end NAME" >> "$EVOLVE_TEST_OUT/order"
fi
"""


def test_hooks_run_serially_in_discovery_order(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    names = ["c.sh", "B.sh", "a.sh", "_d.sh"]
    for name in names:
        write_file(ws / "hooks" / name, ORDER_SH.replace("NAME", name), 0o755)
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    expected = ["B.sh", "_d.sh", "a.sh", "c.sh"]  # code-unit order: uppercase, "_", lowercase
    assert result.hooks == expected
    lines = (out / "order").read_text(encoding="utf-8").splitlines()
    assert lines == [f"{edge} {name}" for name in expected for edge in ("start", "end")]


def test_no_hooks_gives_an_empty_result(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.hooks == []
    assert result.merged == {}


WRITER_SH = """#!/bin/sh
cat >/dev/null
if [ "$1" = heartbeat ]; then mkdir -p notes && echo "written by a hook" > notes/n.md; fi
exit 0
"""


def test_files_changed_by_hooks_are_committed_after_the_stage(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    write_file(ws / "hooks" / "w.sh", WRITER_SH, 0o755)

    async def body(engine: Engine) -> Any:
        await engine.stages.dispatch("heartbeat", {"session": {"id": "s1"}}, session="s1")
        await engine.stages.dispatch(
            "heartbeat", {"session": {"id": "s1"}}, session="s1"
        )  # no change: no commit
        return engine.git

    store = run_recorded(ws, out, body)  # close() waits for the commit
    log = store.log()
    assert [str(c["message"]).splitlines()[0] for c in log] == [
        "hooks changed files during heartbeat",
        "initial",
    ]
    assert log[0]["files"] == ["notes/n.md"]
    assert log[0]["trailers"] == {"origin": "hook", "stage": "heartbeat", "session": "s1"}


# ---------------------------------------------------------------------------------------------
# Recover


def test_recover_runs_on_all_hooks_and_is_merged(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": 3, "recover": [{"system": ["recovered by a"]}]})
    py_hook(ws, "b.py", {"mutate_request": [{"system": ["b normal"]}], "recover": [{"user": "b says"}]})
    py_hook(ws, "c.py", {"mutate_request": [], "recover": [{"system": ["recovered by c"]}]})
    result = run_recorded(
        ws,
        out,
        lambda e: e.stages.dispatch("mutate_request", {"session": {"id": "s1"}, "system": []}, session="s1"),
    )
    assert result.failed == ["a.py"]
    assert result.recovered is True
    # The recovery is merged at the failing hook's place in the fold, before b's own answer.
    assert result.merged == {"system": ["recovered by a", "recovered by c", "b normal"], "user": "b says"}
    assert stage_calls(out, "recover") == ["a.py", "b.py", "c.py"]
    for hook in ("a.py", "b.py", "c.py"):
        [payload] = inputs(out, hook, "recover")
        assert payload == {
            "hook": "recover",
            "prompts": PROMPTS,
            "error": "exit 3",
            "failed_hook": "mutate_request",
        }
    # All hooks ran for the stage itself, and the recover runs are part of the dispatch.
    assert result.hooks == ["a.py", "b.py", "c.py"]
    assert len(result.runs) == 6


def test_recover_defaults_when_hooks_give_nothing(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": 1, "recover": [{"log": "only a log"}]})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("mutate_request", {"session": {"id": "s"}}))
    assert result.recovered is True
    assert result.merged == {
        "system": [PROMPTS["preamble"], PROMPTS["recover"]],
        "user": PROMPTS["recover"],
    }


def test_recover_defaults_with_missing_prompts(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files({"recover": "only recover"})), out_dir(tmp_path)
    py_hook(ws, "a.py", {"heartbeat": 1})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.merged == {"system": ["only recover"], "user": "only recover"}

    ws2 = make_ws(tmp_path / "two", {})
    py_hook(ws2, "a.py", {"heartbeat": 1})
    result = run_recorded(ws2, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.recovered is True
    assert result.merged == {}


def test_recover_runs_once_per_failing_hook(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"heartbeat": 1, "recover": [{"notify": ["ra"]}]})
    py_hook(ws, "b.py", {"heartbeat": 2, "recover": [{"notify": ["rb"]}]})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.failed == ["a.py", "b.py"]
    assert stage_calls(out, "recover") == ["a.py", "b.py", "a.py", "b.py"]
    assert [p["error"] for p in inputs(out, "a.py", "recover")] == ["exit 1", "exit 2"]
    assert result.merged["notify"] == ["ra", "rb", "ra", "rb"]
    # Each recovery got the defaults; the two user strings were joined by the merge.
    assert result.merged["system"] == [PROMPTS["preamble"], PROMPTS["recover"]] * 2
    assert result.merged["user"] == PROMPTS["recover"] + "\n" + PROMPTS["recover"]


def test_recover_gets_the_failure_reason(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    write_file(
        ws / "hooks" / "a.sh",
        '#!/bin/sh\ncat >/dev/null\n[ "$1" = heartbeat ] && echo "not json"\nexit 0\n',
        0o755,
    )
    py_hook(ws, "b.py")
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.failed == ["a.sh"]
    [payload] = inputs(out, "b.py", "recover")
    assert payload["failed_hook"] == "heartbeat"
    assert "stdout line 1 is not JSON" in payload["error"]


@pytest.mark.parametrize(
    "stage", ["observe_message", "idle", "compacting", "tool_before", "tool_after", "format_notification"]
)
def test_no_recover_for_observational_stages(tmp_path: Path, stage: str) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {stage: 1})
    py_hook(ws, "b.py", {stage: [{"message": "b"}]})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch(stage, {"session": {"id": "s"}}, session="s"))
    assert result.failed == ["a.py"]
    assert result.recovered is False
    assert result.merged == {"message": "b"}
    assert stage_calls(out, "recover") == []
    assert stage_calls(out, stage) == ["a.py", "b.py"]


def test_failure_inside_recover_is_swallowed(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": 1, "recover": 5})
    py_hook(ws, "b.py", {"mutate_request": [{"system": ["b"]}], "recover": [{"user": "from b"}]})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("mutate_request", {"session": {"id": "s"}}))
    assert result.recovered is True
    # Only the stage's own failure counts; no recover of the recover.
    assert result.failed == ["a.py"]
    assert stage_calls(out, "recover") == ["a.py", "b.py"]
    assert result.merged == {"system": [PROMPTS["preamble"], PROMPTS["recover"], "b"], "user": "from b"}


def test_recover_that_fails_everywhere_still_gets_defaults(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"heartbeat": 1, "recover": 1})
    result = run_recorded(ws, out, lambda e: e.stages.dispatch("heartbeat"))
    assert result.recovered is True
    assert result.merged == {
        "system": [PROMPTS["preamble"], PROMPTS["recover"]],
        "user": PROMPTS["recover"],
    }


# ---------------------------------------------------------------------------------------------
# request_system: freeze and abstain

COUNTING_HOOK = (
    f"#!{sys.executable}\n"
    + """import json, os, sys
stage = sys.argv[1]
data = json.loads(sys.stdin.read() or "{}")
if stage != "mutate_request":
    sys.exit(0)
path = os.path.join(os.environ["EVOLVE_TEST_OUT"], "count")
n = int(open(path).read()) + 1 if os.path.exists(path) else 1
open(path, "w").write(str(n))
with open(os.path.join(os.environ["EVOLVE_TEST_OUT"], "requests.jsonl"), "a") as f:
    f.write(json.dumps(data) + "\\n")
MODE
"""
)


def counting_hook(ws: Path, mode: str) -> None:
    write_file(ws / "hooks" / "sys.py", COUNTING_HOOK.replace("MODE", mode), 0o755)


def count(out: Path) -> int:
    path = out / "count"
    return int(path.read_text()) if path.exists() else 0


def test_request_system_freezes_a_non_empty_system(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    # Each call would answer differently: the second answer must come from the freeze.
    counting_hook(ws, 'print(json.dumps({"system": ["call %d" % n, "second part"]}))')

    async def body(engine: Engine) -> list[Any]:
        first = await engine.bridge.request_system("s1", ["opencode system"])
        second = await engine.bridge.request_system("s1", ["a different opencode system"])
        frozen = engine.sessions.frozen("s1")
        other = await engine.bridge.request_system("s2", ["opencode system"])
        return [first, second, frozen, other]

    first, second, frozen, other = run_recorded(ws, out, body)
    assert first == ["call 1", "second part"]
    assert second == first
    assert frozen == first
    assert other == ["call 2", "second part"]
    assert count(out) == 2  # s1 asked once, s2 once
    [request, _] = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert list(request) == ["hook", "prompts", "session", "system", "history"]
    assert request["session"] == {"id": "s1"}
    assert request["system"] == ["opencode system"]
    assert request["history"] == []


@pytest.mark.parametrize(
    "mode",
    [
        "pass",
        'print(json.dumps({"system": []}))',
        'print(json.dumps({"user": "ignored", "notify": ["x"]}))',
        'print(json.dumps({"system": None}))',
    ],
    ids=["nothing", "empty-list", "no-system-key", "null"],
)
def test_request_system_abstain_is_not_frozen(tmp_path: Path, mode: str) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    counting_hook(ws, mode)

    async def body(engine: Engine) -> list[Any]:
        first = await engine.bridge.request_system("s1", ["opencode"])
        second = await engine.bridge.request_system("s1", ["opencode title prompt"])
        return [first, second, engine.sessions.frozen("s1")]

    first, second, frozen = run_recorded(ws, out, body)
    assert first is None
    assert second is None
    assert frozen is None
    assert count(out) == 2


def test_request_system_abstain_then_answer_freezes(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    counting_hook(ws, 'print(json.dumps({"system": ["now"]}) if n >= 2 else "")')

    async def body(engine: Engine) -> list[Any]:
        return [await engine.bridge.request_system("s1", ["x"]) for _ in range(4)]

    assert run_recorded(ws, out, body) == [None, ["now"], ["now"], ["now"]]
    assert count(out) == 2


def test_request_system_freezes_the_recovery(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": 1})

    async def body(engine: Engine) -> list[Any]:
        first = await engine.bridge.request_system("s1", ["opencode"])
        second = await engine.bridge.request_system("s1", ["opencode"])
        return [first, second]

    first, second = run_recorded(ws, out, body)
    assert first == [PROMPTS["preamble"], PROMPTS["recover"]]
    assert second == first
    assert stage_calls(out, "mutate_request") == ["a.py"]
    assert stage_calls(out, "recover") == ["a.py"]


def test_request_system_publishes_session_frozen(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    counting_hook(ws, 'print(json.dumps({"system": ["S"]}))')

    async def body(engine: Engine) -> list[Any]:
        sub = engine.bus.subscribe()
        await engine.bridge.request_system("s1", [])
        await engine.bridge.request_system("s1", [])
        events = []
        while (event := sub.get_nowait()) is not None:
            events.append(event)
        return [
            (e.data["session"]["id"], e.data["session"]["system"])
            for e in events
            if e.kind == "session" and e.data["change"] == "frozen"
        ]

    assert run_recorded(ws, out, body) == [("s1", ["S"])]


# ---------------------------------------------------------------------------------------------
# Journal and events


def test_dispatch_and_runs_are_journaled(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"mutate_request": 4})
    py_hook(ws, "b.py", {"mutate_request": [{"system": ["b"]}], "recover": [{"user": "u"}]})

    async def body(engine: Engine) -> Any:
        result = await engine.stages.dispatch("mutate_request", {"session": {"id": "s1"}}, session="s1")
        assert engine.journal is not None
        engine.journal.flush()
        return result, engine.journal.dispatch(result.id), engine.journal.runs(dispatch_id=result.id)

    result, stored, runs = run_recorded(ws, out, body)
    assert stored is not None
    assert stored.stage == "mutate_request"
    assert stored.session == "s1"
    assert stored.hooks == ["a.py", "b.py"]
    assert stored.failed == ["a.py"]
    assert stored.recovered is True
    assert stored.runs == result.runs
    assert stored.merged == result.merged
    assert {r.id for r in runs} == set(result.runs)
    by_stage = sorted((r.stage, r.hook) for r in runs)
    assert by_stage == [
        ("mutate_request", "a.py"),
        ("mutate_request", "b.py"),
        ("recover", "a.py"),
        ("recover", "b.py"),
    ]
    assert all(r.dispatch_id == result.id for r in runs)
    failed = [r for r in runs if not r.ok]
    assert [(r.hook, r.stage, r.error, r.exit_code) for r in failed] == [
        ("a.py", "mutate_request", "exit 4", 4)
    ]
    request_run = next(r for r in runs if r.stage == "mutate_request" and r.hook == "b.py")
    assert request_run.session == "s1"
    assert request_run.result == {"system": ["b"]}
    assert request_run.input["hook"] == "mutate_request"


def test_dispatch_publishes_events(tmp_path: Path) -> None:
    ws, out = make_ws(tmp_path, prompt_files()), out_dir(tmp_path)
    py_hook(ws, "a.py", {"heartbeat": [{"user": "a"}]})
    py_hook(ws, "b.py", {"heartbeat": [{"user": "b"}]})

    async def body(engine: Engine) -> Any:
        sub = engine.bus.subscribe()
        result = await engine.stages.dispatch("heartbeat")
        events = []
        while (event := sub.get_nowait()) is not None:
            events.append(event)
        return result, events

    result, events = run_recorded(ws, out, body)
    relevant = [e for e in events if e.kind in ("hook_run_started", "hook_run", "stage")]
    assert [(e.kind, e.data.get("hook")) for e in relevant] == [
        ("hook_run_started", "a.py"),
        ("hook_run", "a.py"),
        ("hook_run_started", "b.py"),
        ("hook_run", "b.py"),
        ("stage", None),
    ]
    assert [e.seq for e in relevant] == sorted(e.seq for e in relevant)
    stage_event = relevant[-1].data
    assert stage_event["id"] == result.id
    assert stage_event["stage"] == "heartbeat"
    assert stage_event["merged"] == {"user": "a\nb"}
    runs = [e.data for e in relevant if e.kind == "hook_run"]
    assert [r["id"] for r in runs] == result.runs
    assert all(r["dispatch_id"] == result.id and r["stage"] == "heartbeat" for r in runs)
    started_ids = [e.data["id"] for e in relevant if e.kind == "hook_run_started"]
    assert started_ids == result.runs
