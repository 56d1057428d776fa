"""Behaviour checks, short of running opencode (tests/e2e/test_evals.py runs it): a version's copy is the
commit's whole tree from git, the scenarios through the API with their errors, and a check that cannot
run says why, without leaving anything behind."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from engine.changes.gitstore import GitStore
from engine.evals.copies import CopyError, Held, VersionSpec, make_copy
from engine.opencode.setup import installed_binary
from engine.protocol.records import ToolCall
from engine.runtime import Engine
from tests.support.engine_process import EngineProcess
from tests.support.environment import EVOLVE, REPO, isolated_env, run_git
from tests.support.in_process import run_engine


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path / "home", TMPDIR=str(_made(tmp_path / "tmp")))


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def ws(tmp_path: Path, env: dict[str, str]) -> Path:
    root = tmp_path / "ws"
    subprocess.run([*EVOLVE, "init", str(root)], env=env, check=True, capture_output=True, cwd=REPO)
    return root


def commit_all(ws: Path, env: dict[str, str], message: str) -> str:
    run_git(ws, "add", "-A", env=env)
    run_git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message, env=env)
    return run_git(ws, "rev-parse", "HEAD", env=env).strip()


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), os.access(p, os.X_OK))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_copy_is_the_commits_whole_tree_never_the_live_files(
    ws: Path, env: dict[str, str], tmp_path: Path
) -> None:
    first = run_git(ws, "rev-parse", "HEAD", env=env).strip()
    chat = ws / "prompts" / "chat.md"
    chat.write_text(chat.read_text() + "Never delete a note.\n")
    (ws / "notes").mkdir()
    (ws / "notes" / "notes.json").write_text('{"notes": []}')
    second = commit_all(ws, env, "edit prompt chat.md")
    chat.write_text("an edit nobody committed\n")  # the live workspace differs from both versions
    (ws / "state" / "journal.sqlite3").parent.mkdir(exist_ok=True)

    make_copy(GitStore(ws), VersionSpec(first), tmp_path / "before")
    make_copy(GitStore(ws), VersionSpec(second), tmp_path / "after")
    listed = run_git(ws, "ls-tree", "-r", "--name-only", second, env=env).split()
    after = tree(tmp_path / "after")
    assert sorted(after) == sorted(listed)
    assert after["prompts/chat.md"][0].endswith(b"Never delete a note.\n")
    assert after["hooks/notes.py"][1] and after["tests/notes_test.py"][1]  # executables stay so
    assert "notes/notes.json" not in tree(tmp_path / "before")
    assert not (tmp_path / "after" / ".git").exists() and not (tmp_path / "after" / "state").exists()

    held = VersionSpec(
        second, [Held("evals/new.jsonc", b'{"messages": "hi"}'), Held("hooks/notes.py", b"#!x", True)]
    )
    make_copy(GitStore(ws), held, tmp_path / "held")
    found = tree(tmp_path / "held")
    assert found["evals/new.jsonc"] == (b'{"messages": "hi"}', False)
    assert found["hooks/notes.py"] == (b"#!x", True)
    assert chat.read_text() == "an edit nobody committed\n"  # the live workspace is untouched


def test_a_copy_never_writes_outside_itself(ws: Path, env: dict[str, str], tmp_path: Path) -> None:
    head = run_git(ws, "rev-parse", "HEAD", env=env).strip()
    with pytest.raises(CopyError, match="not a path inside the workspace"):
        make_copy(GitStore(ws), VersionSpec(head, [Held("../escape.txt", b"x")]), tmp_path / "a")
    assert not (tmp_path / "escape.txt").exists()
    (ws / "prompts" / "outside").symlink_to(tmp_path)
    linked = commit_all(ws, env, "a link out of the workspace")
    with pytest.raises(CopyError, match="cannot copy"):
        make_copy(GitStore(ws), VersionSpec(linked), tmp_path / "b")


def test_the_scenarios_through_the_api_with_the_errors_of_a_wrong_file(
    ws: Path, env: dict[str, str], tmp_path: Path
) -> None:
    (ws / "evals" / "broken.jsonc").write_text('{\n  "messages": "hi",\n  "expect": [{"called": 3}],\n}\n')
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    try:
        listed = engine.request("GET", "/v1/scenarios").json()
        names = [s["name"] for s in listed["scenarios"]]
        assert names == [
            "count the notes",
            "forget a note",
            "remember a deadline",
            "two errands",
            "what's on my list",
        ]
        forget = listed["scenarios"][1]
        assert forget["file"] == "evals/forget-a-note.jsonc"
        assert forget["messages"] == [
            "Add a note: book the dentist.",
            "I did it: book the dentist. You can drop that note.",
        ]
        assert forget["expectations"] == [
            'calls notes_add with text containing "dentist"',
            "calls notes_forget",
        ]
        assert listed["errors"] == [
            "evals/broken.jsonc:3:25: field 'expect[0].called': expected a tool name, got number 3"
        ]
    finally:
        engine.stop()


def test_a_check_that_cannot_run_says_why_and_leaves_nothing(
    ws: Path, env: dict[str, str], tmp_path: Path
) -> None:
    chat = ws / "prompts" / "chat.md"
    chat.write_text(chat.read_text() + "Never delete a note.\n")
    sha = commit_all(ws, env, "edit prompt chat.md")
    engine = EngineProcess(
        ws, {**env, "EVOLVE_CACHE_DIR": str(tmp_path / "no-cache")}, tmp_path / "engine.log"
    ).start()
    try:
        first = run_git(ws, "rev-list", "--max-parents=0", "HEAD", env=env).strip()
        resp = engine.request("POST", f"/v1/changes/{first}/eval", {}, check=False)
        assert resp.status_code == 409 and "is the first commit" in resp.json()["error"]
        resp = engine.request("POST", "/v1/changes/nothing-like-it/eval", {}, check=False)
        assert resp.status_code == 409 and "no commit 'nothing-like-it'" in resp.json()["error"]
        resp = engine.request("POST", f"/v1/changes/{sha}/eval", {"repeat": 0}, check=False)
        assert resp.status_code == 400 and "'repeat' must be a positive integer" in resp.json()["error"]
        resp = engine.request(
            "POST", f"/v1/changes/{sha}/eval", {"turns": 2, "scenarios": ["x"]}, check=False
        )
        assert resp.status_code == 400
        assert engine.request("GET", f"/v1/changes/{sha}/eval", check=False).status_code == 404

        started = engine.request("POST", f"/v1/changes/{sha}/eval", {"wait": True}).json()
        assert started["state"] == "failed"
        assert "is not installed" in started["error"] and "evolve opencode install" in started["error"]
        assert started["summary"] == f"evals could not run: {started['error']}"
        latest = engine.request("GET", "/v1/changes/HEAD/eval").json()
        assert latest["id"] == started["id"] and latest["state"] == "failed"
        assert engine.request("GET", f"/v1/evals/{started['id']}").json()["target"] == sha
        resp = engine.request("POST", f"/v1/evals/{started['id']}/cancel", check=False)
        assert resp.status_code == 409 and "is not running (it is failed)" in resp.json()["error"]
        assert engine.request("POST", "/v1/evals/evl_none/cancel", check=False).status_code == 404
    finally:
        engine.stop()
    assert list((tmp_path / "tmp").iterdir()) == []  # no copy left in the temporary directory


def test_evolve_eval_refuses_a_mistake_before_it_starts_anything(
    ws: Path, env: dict[str, str], tmp_path: Path
) -> None:
    chat = ws / "prompts" / "chat.md"
    chat.write_text(chat.read_text() + "Never delete a note.\n")
    commit_all(ws, env, "edit prompt chat.md")
    fake_install = tmp_path / "cache"
    run = subprocess.run(
        [*EVOLVE, "eval", "HEAD", "--workspace", str(ws), "--scenario", "nope"],
        env={**env, "EVOLVE_CACHE_DIR": str(fake_install)},
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 2
    assert "no scenario 'nope' (the workspace has: count the notes, forget a note," in run.stderr
    assert not fake_install.exists()  # nothing was installed for a command that could not run
    bad = subprocess.run(
        [*EVOLVE, "eval", "HEAD", "--workspace", str(ws), "--repeat", "0"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert bad.returncode == 2 and "--repeat must be at least 1" in bad.stderr
    missing = subprocess.run(
        [*EVOLVE, "eval", "chg_missing", "--workspace", str(ws)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert missing.returncode == 2 and "no pending change 'chg_missing'" in missing.stderr


def test_without_the_agents_opencode_project_the_check_says_where_to_name_it(
    ws: Path, env: dict[str, str], tmp_path: Path
) -> None:
    if installed_binary() is None:
        pytest.skip("opencode is not installed (the end-to-end tests install it)")
    chat = ws / "prompts" / "chat.md"
    chat.write_text(chat.read_text() + "Never delete a note.\n")
    sha = commit_all(ws, env, "edit prompt chat.md")
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    try:
        found = engine.request("POST", f"/v1/changes/{sha}/eval", {"wait": True}).json()
        assert found["state"] == "failed"
        assert "connect opencode to this engine, or set evals_project" in found["error"]
        (tmp_path / "project").mkdir()
        (tmp_path / "project" / "opencode.json").write_text('{"provider": {}}')
        found = engine.request(
            "POST", f"/v1/changes/{sha}/eval", {"wait": True, "project": str(tmp_path / "project")}
        ).json()
        assert found["state"] == "failed" and "no model for the agent" in found["error"]
    finally:
        engine.stop()
    assert list((tmp_path / "tmp").iterdir()) == []


# ---- the agent's tools ------------------------------------------------------------------------------

EVAL_TOOLS = {
    "evolve_eval_list",
    "evolve_eval_read",
    "evolve_eval_write",
    "evolve_eval_edit",
    "evolve_eval_run",
}


def set_config(ws: Path, text: str) -> None:
    (ws / "config" / "evolve.jsonc").write_text(text)


def test_the_eval_tools_are_offered_only_with_evals_agent_tools(ws: Path, env: dict[str, str]) -> None:
    async def offered(engine: Engine) -> set[str]:
        return {s.name for s in engine.tools.specs()}

    names = run_engine(ws, offered, env)
    assert not names & EVAL_TOOLS
    refused = run_engine(ws, lambda e: e.tools.call("evolve_eval_list", {}), env)
    assert refused.output == "unknown tool: evolve_eval_list"
    set_config(ws, '{"evals_agent_tools": true}')
    names = run_engine(ws, offered, env)
    assert names >= EVAL_TOOLS
    assert run_engine(
        ws,
        lambda e: asyncio.sleep(
            0, e.tools.permission_request("evolve_eval_run", {"file": "prompts/chat.md"})
        ),
        env,
    ) == {
        "permission": "evolve_eval_run",
        "patterns": ["prompts/chat.md"],
    }


def test_the_agent_lists_reads_writes_and_edits_its_scenarios_validated_and_committed(
    ws: Path, env: dict[str, str]
) -> None:
    set_config(ws, '{"evals_agent_tools": true}')
    commit_all(ws, env, "config: eval tools")

    async def body(engine: Engine) -> list[ToolCall]:
        new = '{\n  "messages": "Pin my passport note.",\n  "expect": [{"called": "notes_add", "with": {"pin": true}}],\n}\n'
        return [
            await engine.tools.call("evolve_eval_list", {}, session="ses_1"),
            await engine.tools.call("evolve_eval_read", {"scenario": "forget-a-note.jsonc", "limit": 1}),
            await engine.tools.call(
                "evolve_eval_write", {"scenario": "pin.jsonc", "content": '{"messages": 1}'}
            ),
            await engine.tools.call(
                "evolve_eval_write", {"scenario": "pin.jsonc", "content": new}, session="ses_1"
            ),
            await engine.tools.call(
                "evolve_eval_edit", {"scenario": "pin.jsonc", "oldString": "passport", "newString": "visa"}
            ),
            await engine.tools.call("evolve_eval_read", {"scenario": "../config/evolve.jsonc"}),
            await engine.tools.call("evolve_eval_run", {"file": "/etc/passwd", "content": "x"}),
        ]

    listed, read, bad, written, edited, outside, run = run_engine(ws, body, env)
    assert listed.error is None and listed.output.startswith("5 scenarios in evals/:")
    assert '- forget a note (evals/forget-a-note.jsonc): ["Add a note: book the dentist.",' in listed.output
    assert "    expects: calls notes_forget" in listed.output
    assert read.output == "{"
    assert bad.error == "failed: the scenario would not read:"
    assert "evals/pin.jsonc:1:14: field 'messages': expected the user messages" in bad.output
    assert (written.error, written.output) == (None, "successfully wrote pin.jsonc")
    assert written.commit is not None and edited.commit is not None
    assert (ws / "evals" / "pin.jsonc").read_text().count("visa") == 1
    assert run_git(ws, "log", "-1", "--format=%s", env=env).strip() == "edit scenario pin.jsonc"
    message = run_git(ws, "log", "-1", "--format=%B", written.commit, env=env)
    assert "Evolve-File: evals/pin.jsonc" in message and "Evolve-Session: ses_1" in message
    assert outside.error is not None and "a scenario is a file of evals/" in outside.output
    assert run.error is not None and "a proposal is a file of prompts/, hooks/, evals/" in run.output


def test_under_the_review_gate_a_new_scenario_is_held_like_a_prompt(ws: Path, env: dict[str, str]) -> None:
    set_config(ws, '{"evals_agent_tools": true, "review": "gate"}')
    commit_all(ws, env, "config: gate")
    content = '{"messages": "hi", "expect": [{"max_steps": 1}]}'
    done = run_engine(
        ws, lambda e: e.tools.call("evolve_eval_write", {"scenario": "hi.jsonc", "content": content}), env
    )
    assert done.pending is not None and "awaits review by the operator" in done.output
    assert not (ws / "evals" / "hi.jsonc").exists()
    held = json.loads((ws / "state" / "pending" / f"{done.pending}.json").read_text())
    assert (held["file"], held["content"]) == ("evals/hi.jsonc", content)


def test_doctor_names_a_scenario_file_that_does_not_read(ws: Path, env: dict[str, str]) -> None:
    (ws / "evals" / "broken.jsonc").write_text('{"messages": "hi", "expect": [{"max_steps": 0}]}')
    proc = subprocess.run(
        [*EVOLVE, "doctor", "--workspace", str(ws), "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 1
    findings = json.loads(proc.stdout)["findings"]
    assert {
        "level": "error",
        "where": "evals",
        "message": "evals/broken.jsonc:1:45: field 'expect[0].max_steps': expected a whole number of steps, at least 1, got 0",
    } in findings


def test_a_scenario_that_needs_a_tool_outside_the_copy_is_refused_and_says_so(
    ws: Path, env: dict[str, str], tmp_path: Path
) -> None:
    if installed_binary() is None:
        pytest.skip("opencode is not installed (the end-to-end tests install it)")
    (ws / "evals" / "shell.jsonc").write_text(
        '{"messages": "List the files.", "expect": [{"called": "bash"}]}'
    )
    sha = commit_all(ws, env, "a scenario that wants a shell")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "opencode.json").write_text('{"model": "mock/mock"}')
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    try:
        body = {"wait": True, "scenarios": ["shell"], "project": str(tmp_path / "project")}
        found = engine.request("POST", f"/v1/changes/{sha}/eval", body).json()
    finally:
        engine.stop()
    assert found["state"] == "done", found["error"]
    (refused,) = found["scenarios"]
    assert refused["status"] == "refused" and refused["runs"] == []
    assert refused["note"] == (
        "refused: it expects a call of bash, which evals never give the agent (nothing outside the copy: "
        "no shell, no web)"
    )
    assert found["summary"] == "evals 0/0 → 0/0: 1 refused"
    # Nothing was started: each version was copied (its scenarios read), then removed.
    assert {version: set(figures) for version, figures in found["timings"].items()} == {
        "before": {"copy_ms", "stop_ms"},
        "after": {"copy_ms", "stop_ms"},
    }
    assert list((tmp_path / "tmp").iterdir()) == []
