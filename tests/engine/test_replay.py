"""Tests for replay (engine.replay, engine.replay_inputs, engine.replay_compare, engine.worddiff): a change
played on the journal's recorded inputs, before and after, in copies of the workspace.

Real engines (in-process, as in test_dispatch, and one subprocess for the API and the command line),
real hooks, real git, real SQLite. Hooks of these tests run with this Python (`#!sys.executable`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine.protocol.records import ReplayResult, StageComparison
from engine.replay.inputs import UnknownStage
from engine.replay.replayer import ReplayError
from engine.runtime import Engine
from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env
from tests.support.processes import pid_alive, wait_gone
from tests.support.segments import ops

T = TypeVar("T")
EXAMPLE = REPO / "engine" / "example"
PROMPTS = {
    "preamble": "You are a test agent.",
    "chat": "Chat with the user.",
    "heartbeat": "Heartbeat task.",
    "compaction": "Summarise.",
    "recover": "A hook failed; recover.",
}

# Says what time it is and a random id in every system prompt: noise that is not a change.
# The request id is one word of 32 hex digits: written with its hyphens, its 4-digit groups (the
# version group has 3 random ones) came out alike in two runs about once in a few hundred replays,
# and a group alike in both runs is no longer volatile.
CLOCK_HOOK = (
    f"#!{sys.executable}\n"
    + """import json, sys, time, uuid
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "clock", "stages": ["mutate_request"]}))
elif stage == "mutate_request":
    print(json.dumps({"system": [f"It is {time.time_ns()} now (request {uuid.uuid4().hex}). GREETING"]}))
"""
)

# Records its pid, then takes a minute over mutate_request (for cancelling).
SLOW_HOOK = (
    f"#!{sys.executable}\n"
    + """import json, os, sys, time
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "clock", "stages": ["mutate_request"]}))
elif stage == "mutate_request":
    with open(os.environ["EVOLVE_TEST_OUT"] + "/slow." + str(os.getpid()), "w") as f:
        f.write("started")
    time.sleep(60)
"""
)


def run(body: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(body())  # type: ignore[arg-type]


def example_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    return ws


def bare_workspace(tmp_path: Path, hook: str) -> Path:
    ws = tmp_path / "ws"
    for stage, text in PROMPTS.items():
        (ws / "prompts").mkdir(parents=True, exist_ok=True)
        (ws / "prompts" / f"{stage}.md").write_text(text, encoding="utf-8")
    (ws / "hooks").mkdir()
    (ws / "hooks" / "clock.py").write_text(hook, encoding="utf-8")
    (ws / "hooks" / "clock.py").chmod(0o755)
    return ws


@asynccontextmanager
async def started(ws: Path, tmp_path: Path, **env: str) -> AsyncIterator[Engine]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    engine = Engine(ws, env={**isolated_env(tmp_path / "home"), "EVOLVE_TEST_OUT": str(out), **env})
    await engine.start()
    try:
        yield engine
    finally:
        await engine.close()


async def record_requests(engine: Engine, sessions: int) -> None:
    """`sessions` system prompt requests, as opencode makes them, one per session."""
    for i in range(sessions):
        sid = f"ses_{i}"
        await engine.stages.dispatch(
            "mutate_request", {"session": {"id": sid}, "system": ["You are opencode."]}, session=sid
        )


async def call(engine: Engine, tool: str, **args: Any) -> str:
    done = await engine.tools.call(tool, args, origin="operator")
    assert done.error is None, done.output
    return str(done.output)


async def replay_head(engine: Engine, **kwargs: Any) -> ReplayResult:
    head = engine.git.head()
    assert head is not None
    return await engine.replays.replay(await engine.replays.commit(head), **kwargs)


def stage(result: ReplayResult, name: str) -> StageComparison:
    found = {s.stage: s for s in result.stages}
    assert name in found, f"{name} not replayed; stages: {list(found)}; warnings: {result.warnings}"
    return found[name]


# ---- the word-level comparison ----------------------------------------------------------------


# ---- replays of commits -----------------------------------------------------------------------


def test_a_prompt_edit_reports_the_changed_system_prompts(tmp_path: Path) -> None:
    ws = example_workspace(tmp_path)

    async def body() -> ReplayResult:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 4)
            await engine.stages.dispatch("compacting", {"session": {"id": "ses_1"}}, session="ses_1")
            await call(
                engine,
                "evolve_prompt_edit",
                prompt="chat.md",
                oldString="Answer plainly",
                newString="Answer tersely",
            )
            return await replay_head(engine)

    result = run(body)
    assert result.state == "done", result.error
    assert result.files == ["prompts/chat.md"]
    assert [s.stage for s in result.stages] == [
        "mutate_request",
        "heartbeat",
        "compacting",
        "format_notification",
        "recover",
    ], "a prompt replays every stage but discover"
    requests = stage(result, "mutate_request")
    assert (requests.inputs, requests.changed, requests.unchanged, requests.failed) == (4, 4, 0, 0)
    assert {c.session for c in requests.comparisons} == {"ses_0", "ses_1", "ses_2", "ses_3"}
    for found in requests.comparisons:
        assert [d.label for d in found.diffs] == ["system prompt"]
        segments = found.diffs[0].segments
        assert (ops(segments, "-"), ops(segments, "+")) == ("plainly", "tersely")
        assert "You are talking with the person you work for." in ops(segments, "=")
    compacting = stage(result, "compacting")
    assert (compacting.inputs, compacting.changed, compacting.unchanged) == (1, 0, 1)
    assert stage(result, "heartbeat").note == "no recorded inputs in the journal"


def test_a_tool_description_edit_changes_discover_and_not_the_system_prompt(tmp_path: Path) -> None:
    ws = example_workspace(tmp_path)

    async def body() -> ReplayResult:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 3)
            await call(
                engine,
                "evolve_hook_edit",
                hook="notes.py",
                oldString='"description": "Delete a note by its number (as shown by notes_list).',
                newString='"description": "Remove a note for good, by its number (as shown by notes_list).',
            )
            return await replay_head(engine)

    result = run(body)
    assert result.state == "done", result.error
    discover = stage(result, "discover")
    assert (discover.inputs, discover.changed) == (1, 1)
    [diff] = discover.comparisons[0].diffs
    assert diff.key == "tool notes_forget"
    changes = [s for s in diff.segments if s[0] != "="]
    assert changes == [["-", "Delete"], ["+", "Remove"], ["+", "for good, "]], diff.segments
    requests = stage(result, "mutate_request")
    assert (requests.inputs, requests.changed, requests.unchanged, requests.failed) == (3, 0, 3, 0)
    # The stages the example hook declares, the contained ones; the others are named, not run.
    assert [s.stage for s in result.stages] == [
        "discover",
        "mutate_request",
        "heartbeat",
        "compacting",
        "format_notification",
        "recover",
    ]
    assert any("execute_tool" in w and "observe_message" in w and "idle" in w for w in result.warnings)


def test_a_hook_that_prints_the_time_shows_no_difference_against_itself(tmp_path: Path) -> None:
    ws = bare_workspace(tmp_path, CLOCK_HOOK)
    source = CLOCK_HOOK

    async def body() -> tuple[ReplayResult, ReplayResult]:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 5)
            # The same behaviour, another text: a comment.
            await call(engine, "evolve_hook_write", hook="clock.py", content=source + "# tidied\n")
            same = await replay_head(engine)
            await call(
                engine, "evolve_hook_write", hook="clock.py", content=source.replace("GREETING", "Be brief.")
            )
            return same, await replay_head(engine)

    same, changed = run(body)
    requests = stage(same, "mutate_request")
    assert (requests.inputs, requests.changed, requests.unchanged) == (5, 0, 5)
    assert requests.volatile == ["system prompt"]
    requests = stage(changed, "mutate_request")
    assert (requests.inputs, requests.changed) == (5, 5)
    for found in requests.comparisons:
        segments = found.diffs[0].segments
        assert (ops(segments, "-"), ops(segments, "+")) == ("GREETING", "Be brief.")
        assert ops(segments, "~"), "the time and the id are marked volatile, not changed"


def test_a_failing_after_version_is_reported_as_failures_not_differences(tmp_path: Path) -> None:
    ws = bare_workspace(tmp_path, CLOCK_HOOK)
    broken = CLOCK_HOOK.replace(
        'elif stage == "mutate_request":\n',
        'elif stage == "mutate_request":\n    raise SystemExit("no prompt today")\n',
    )

    async def body() -> ReplayResult:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 3)
            await call(engine, "evolve_hook_write", hook="clock.py", content=broken)
            return await replay_head(engine)

    requests = stage(run(body), "mutate_request")
    assert (requests.inputs, requests.changed, requests.unchanged, requests.failed) == (3, 0, 0, 3)
    assert (requests.failed_before, requests.failed_after) == (0, 3)
    for found in requests.comparisons:
        assert found.status == "failed" and not found.diffs
        assert found.errors_after == ["hooks/clock.py mutate_request: exit 1 (no prompt today)"]


def test_a_replay_changes_neither_the_workspace_nor_its_history_nor_the_journal(tmp_path: Path) -> None:
    ws = example_workspace(tmp_path)
    env = isolated_env(tmp_path / "home")

    def files() -> dict[str, tuple[int, bytes]]:
        out = {}
        for path in sorted(ws.rglob("*")):
            rel = path.relative_to(ws).as_posix()
            if path.is_file() and not rel.startswith("state/"):
                out[rel] = (path.stat().st_mode, path.read_bytes())
        return out

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ws, env=env, capture_output=True, text=True, check=True
        ).stdout

    async def body() -> None:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 3)
            # A note makes the hook's notebook part of the workspace; the hooks of the copies read theirs.
            await call(engine, "notes_add", text="keep it short", priority="high")
            await call(
                engine,
                "evolve_prompt_edit",
                prompt="chat.md",
                oldString="Answer plainly",
                newString="Answer tersely",
            )
            journal = engine.journal
            assert journal is not None
            journal.flush()
            runs = {r.id: r.to_dict() for r in journal.runs(limit=10_000)}
            dispatches = {d.id: d.to_dict() for d in journal.dispatches(limit=10_000)}
            before = (files(), git("rev-parse", "HEAD"), git("for-each-ref"), git("status", "--porcelain"))
            result = await replay_head(engine)
            assert stage(result, "mutate_request").changed == 3
            journal.flush()
            assert (
                files(),
                git("rev-parse", "HEAD"),
                git("for-each-ref"),
                git("status", "--porcelain"),
            ) == before
            assert {r.id: r.to_dict() for r in journal.runs(limit=10_000)} == runs, (
                "replay runs are not journaled"
            )
            assert {d.id: d.to_dict() for d in journal.dispatches(limit=10_000)} == dispatches
            kept = ReplayResult.from_dict(
                json.loads((ws / "state" / "replays" / f"{result.target}.json").read_text())
            )
            assert kept.id == result.id and kept.stages == result.stages

    run(body)


def test_stage_names_are_checked_and_uncontained_stages_come_with_a_warning(tmp_path: Path) -> None:
    ws = bare_workspace(tmp_path, CLOCK_HOOK)

    async def body() -> ReplayResult:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 1)
            await call(engine, "evolve_hook_write", hook="clock.py", content=CLOCK_HOOK + "# x\n")
            head = engine.git.head()
            assert head is not None
            change = await engine.replays.commit(head)
            with pytest.raises(UnknownStage, match="unknown stage 'mutate'"):
                engine.replays.start(change, ["mutate"])
            with pytest.raises(ReplayError, match="no commit 'nope'"):
                await engine.replays.commit("nope")
            return await engine.replays.replay(change, ["tool_after", "mutate_request"], limit=5)

    result = run(body)
    assert [s.stage for s in result.stages] == ["tool_after", "mutate_request"]
    assert any(w.startswith("tool_after: replayed because you asked") for w in result.warnings)
    assert stage(result, "tool_after").note == "no recorded inputs in the journal"


def test_a_replay_can_be_cancelled_and_kills_its_hooks(tmp_path: Path) -> None:
    ws = bare_workspace(tmp_path, CLOCK_HOOK)
    out = tmp_path / "out"

    async def body() -> ReplayResult:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 2)
            await call(engine, "evolve_hook_write", hook="clock.py", content=SLOW_HOOK)
            head = engine.git.head()
            assert head is not None
            started_replay = engine.replays.start(await engine.replays.commit(head))
            deadline = time.monotonic() + 30
            while not list(out.glob("slow.*")):
                assert time.monotonic() < deadline, "the slow hook never started"
                await asyncio.sleep(0.05)
            assert engine.replays.cancel(started_replay.id)
            result = await engine.replays.wait(started_replay.id)
            assert not engine.replays.cancel(started_replay.id), "a finished replay cannot be cancelled"
            return result

    result = run(body)
    assert result.state == "cancelled"
    pids = [int(p.name.split(".")[1]) for p in out.glob("slow.*")]
    assert wait_gone(*pids, timeout=5), [p for p in pids if pid_alive(p)]


def test_a_change_held_for_review_is_replayed_at_once(tmp_path: Path) -> None:
    ws = example_workspace(tmp_path)

    async def body() -> ReplayResult:
        async with started(ws, tmp_path, EVOLVE_REVIEW="gate") as engine:
            await record_requests(engine, 2)
            held = await engine.tools.call(
                "evolve_prompt_edit",
                {"prompt": "chat.md", "oldString": "Answer plainly", "newString": "Answer tersely"},
                session="ses_agent",
            )
            assert "awaits review" in str(held.output)
            [pending] = engine.changes.pending()
            deadline = time.monotonic() + 60
            while True:
                found = engine.replays.latest(pending.id)
                if found is not None and found.state != "running":
                    return found
                assert time.monotonic() < deadline, "the held change was never replayed"
                await asyncio.sleep(0.05)

    result = run(body)
    assert (result.kind, result.state, result.files) == ("pending", "done", ["prompts/chat.md"])
    assert stage(result, "mutate_request").changed == 2


# ---- the API and the command line, on a running engine -----------------------------------------


def test_replay_through_the_api_and_the_command_line(tmp_path: Path) -> None:
    ws = example_workspace(tmp_path)
    engine = EngineProcess(ws, isolated_env(tmp_path / "home", PYTHONPATH=str(REPO)), tmp_path / "engine.log")
    engine.start()
    try:
        for i in range(2):
            engine.stage(
                "mutate_request", {"session": {"id": f"ses_{i}"}, "system": ["x"]}, session=f"ses_{i}"
            )
        engine.call_tool(
            "evolve_prompt_edit",
            {"prompt": "chat.md", "oldString": "Answer plainly", "newString": "Answer tersely"},
            origin="operator",
        )
        head = engine.head()
        done = engine.post(f"/v1/changes/{head[:8]}/replay", {"wait": True, "stages": ["mutate_request"]})
        assert (done["target"], done["state"]) == (head, "done")
        assert done["stages"][0]["changed"] == 2 and done["stages"][0]["comparisons"]
        assert engine.get(f"/v1/changes/{head}/replay")["id"] == done["id"]
        assert engine.get(f"/v1/replays/{done['id']}")["stages"] == done["stages"]
        refused = engine.request("POST", f"/v1/replays/{done['id']}/cancel", check=False)
        assert refused.status_code == 409 and "not running" in refused.json()["error"]
        bad = engine.request("POST", f"/v1/changes/{head}/replay", {"stages": ["nope"]}, check=False)
        assert bad.status_code == 400 and "unknown stage 'nope'" in bad.json()["error"]
        missing = engine.request("POST", "/v1/pending/chg_nope/replay", check=False)
        assert missing.status_code == 409 and "no pending change" in missing.json()["error"]

        printed = engine.cli("replay", "HEAD", "--stage", "mutate_request").stdout
        assert "mutate_request: 2 of 2 results changed" in printed, printed
        assert "Answer [-plainly-]{+tersely+} and briefly" in printed, printed
        assert engine.get(f"/v1/changes/{head}/replay")["id"] != done["id"], (
            "the command replays in the engine"
        )
        for args, message in (
            (["nope"], "evolve replay: no commit 'nope' in"),
            (["chg_nope"], "evolve replay: no pending change 'chg_nope' in"),
            (["HEAD", "--stage", "mutate"], "evolve replay: unknown stage 'mutate'; stages: discover,"),
        ):
            proc = subprocess.run(
                [sys.executable, "-m", "engine", "replay", *args, "--workspace", str(ws)],
                env=engine.env,
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert (proc.returncode, proc.stderr.startswith(message)) == (2, True), proc.stderr
    finally:
        engine.stop()


def test_replay_without_an_engine_reads_the_journal_and_writes_nothing_else(tmp_path: Path) -> None:
    ws = example_workspace(tmp_path)
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))

    async def record() -> None:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 2)
            engine.sessions.update("ses_0", title="Fix the flaky parser")
            await call(
                engine,
                "evolve_prompt_edit",
                prompt="chat.md",
                oldString="Answer plainly",
                newString="Answer tersely",
            )

    run(record)
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "replay", "HEAD", "--workspace", str(ws), "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = ReplayResult.from_dict(json.loads(proc.stdout))
    requests = stage(result, "mutate_request")
    assert requests.changed == 2
    titles = {c.session: c.session_title for c in requests.comparisons}
    assert titles == {"ses_0": "Fix the flaky parser", "ses_1": None}, (
        "sessions named as the operator knows them"
    )
    assert (ws / "state" / "replays" / f"{result.target}.json").is_file()
    assert not (ws / "state" / "engine.json").exists(), "no engine was started"
    assert os.listdir(ws / "state" / "replays") == [f"{result.target}.json"]


def test_the_command_warns_for_hcps_tool_and_stop_stages_as_for_their_older_forms(tmp_path: Path) -> None:
    """`evolve replay --stage after_tool` (before_tool, before_stop) says that the hook's side effects are
    not contained, in the words it uses for tool_after: the same moments under hcp's names."""
    ws = bare_workspace(tmp_path, CLOCK_HOOK)

    async def record() -> None:
        async with started(ws, tmp_path) as engine:
            await record_requests(engine, 1)
            await call(engine, "evolve_hook_write", hook="clock.py", content=CLOCK_HOOK + "# x\n")

    run(record)
    notes = {}
    for stages in (["tool_after"], ["after_tool", "before_tool", "before_stop"]):
        proc = subprocess.run(
            [sys.executable, "-m", "engine", "replay", "HEAD", "--workspace", str(ws)]
            + [arg for stage in stages for arg in ("--stage", stage)],
            env=isolated_env(tmp_path / "home", PYTHONPATH=str(REPO)),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        notes[", ".join(stages)] = [line for line in proc.stdout.splitlines() if line.startswith("  note: ")]
    [told] = notes["tool_after"]
    assert told.startswith("  note: tool_after: replayed because you asked; a hook's side effects")
    assert notes["after_tool, before_tool, before_stop"] == [
        told.replace("tool_after", "after_tool, before_tool, before_stop")
    ]
