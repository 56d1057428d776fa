"""evolve as an hcp host, end to end: real opencode 1.18.33, the shim, the engine it starts, the example
workspace's opencode-evolve hook next to an hcp hook (tests/fixtures/hcp_probe.py, which answers what
each test plans), and the mock LLM, at whose side every behaviour is checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from evolve_demo.scripted_model import Reply, Request
from tests.e2e.conftest import Project, hook_system, last_user_text, tool_call_ids, tool_results
from tests.support.waiting import wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def add_probe(project: Project, plan: dict[str, Any]) -> None:
    """The hcp hook in the workspace (committed, as a person adding a hook would), with its plan."""
    shutil.copy(FIXTURES / "hcp_probe.py", project.ws / "hooks" / "probe.py")
    (project.ws / "hooks" / "probe.py").chmod(0o755)
    (project.ws / "state").mkdir(exist_ok=True)
    (project.ws / "state" / "hcp-plan.json").write_text(json.dumps(plan))
    project.git("add", "hooks/probe.py")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "add the hcp probe")


def probe_log(project: Project, stage: str) -> list[dict[str, Any]]:
    path = project.ws / "state" / "hcp-probe.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e["payload"] for e in entries if e["argv"] == stage]


def results_by_call(req: Request, tool: str) -> list[str]:
    results = tool_results(req)
    return [results[c] for c in tool_call_ids(req, tool)]


def test_before_tool_deny_and_args_and_after_tool_result_reach_the_model(project: Project) -> None:
    """A deny's reason is what the model receives for the call; rewritten arguments are what the tool
    (opencode's own `read`) receives; an after_tool result is what the model receives instead of the
    tool's output. Each call is recorded in the journal as opencode's."""
    secret, old, new, magic = (project.dir / f for f in ("secret.txt", "old.txt", "new.txt", "magic.txt"))
    secret.write_text("the secret\n")
    old.write_text("old content\n")
    new.write_text("new content\n")
    magic.write_text("MAGIC content\n")
    add_probe(
        project,
        {
            "stages": ["before_tool", "after_tool"],
            "before_tool": [
                {
                    "when": {"args": "~secret.txt"},
                    "answer": {"deny": {"reason": "DENIED: secrets stay closed"}},
                },
                {"when": {"args": "~old.txt"}, "answer": {"args": {"filePath": str(new)}}},
            ],
            "after_tool": [{"when": {"result": "~MAGIC"}, "answer": {"result": "REPLACED-BY-HOOK"}}],
        },
    )
    project.mock.script(
        Reply(tool_calls=[("read", {"filePath": str(secret)})]),
        Reply(tool_calls=[("read", {"filePath": str(old)})]),
        Reply(tool_calls=[("read", {"filePath": str(magic)})]),
        Reply(text="Read them all."),
    )
    with project.serve() as server:
        sid = server.create_session("hcp tools")
        server.prompt(sid, "read", "the", "files")

    main = project.mock.main_requests()
    assert len(main) == 4
    (denied,) = results_by_call(main[1], "read")
    assert denied == "DENIED: secrets stay closed"
    _denied_again, rewritten = results_by_call(main[2], "read")
    assert "new content" in rewritten and "old content" not in rewritten
    replaced = results_by_call(main[3], "read")[-1]
    assert replaced == "REPLACED-BY-HOOK"

    before = probe_log(project, "before_tool")
    assert [b["args"]["filePath"] for b in before] == [str(secret), str(old), str(magic)]
    assert all(b["tool"] == "read" and b["call_id"] and b["session"]["id"] == sid for b in before)
    assert [b["turn"] for b in before] == [1, 2, 3]
    (after_magic,) = [a for a in probe_log(project, "after_tool") if "MAGIC" in a["result"]]
    assert after_magic["duration_ms"] >= 0 and after_magic["args"] == {"filePath": str(magic)}

    def recorded(journal: Any) -> list[Any] | None:
        calls = [c for c in journal.tool_calls(tool="read") if c.output is not None]
        return calls if len(calls) == 3 else None

    calls = {c.args["filePath"]: c for c in project.poll_journal("three read calls", recorded)}
    assert {c.origin for c in calls.values()} == {"opencode"}
    assert calls[str(secret)].error == "DENIED: secrets stay closed"
    assert calls[str(new)].model_args == {"filePath": str(old)}
    assert calls[str(magic)].output == "REPLACED-BY-HOOK" and "MAGIC" in str(calls[str(magic)].tool_output)


def test_before_stop_continue_makes_another_turn_under_serve(project: Project) -> None:
    add_probe(
        project,
        {
            "stages": ["before_stop"],
            "before_stop": [
                {"once": True, "when": {"exit_reason": "stop"}, "answer": {"continue": "CONTINUE-FROM-HCP"}}
            ],
        },
    )
    project.mock.script(Reply(text="First answer."), Reply(text="Continued."))
    with project.serve() as server:
        sid = server.create_session("hcp before_stop")
        server.prompt(sid, "hello")

        def continued() -> list[Request]:
            return [r for r in project.mock.main_requests() if last_user_text(r) == "CONTINUE-FROM-HCP"]

        (request,) = wait_for("the continue's turn", continued, timeout=30)
    assert request.session == sid
    assert "notes_add" in request.tools  # the chat agent's turn
    first = probe_log(project, "before_stop")[0]
    assert first["exit_reason"] == "stop" and first["final"] is False and first["answer"] == "First answer."


def test_on_permission_deny_blocks_and_allow_runs_without_a_prompt(make_project: Any) -> None:
    """`bash` asks (opencode's permission config); the hcp hook denies one call and allows the other
    through opencode's reply route. The synchronous prompt returns, so nobody was asked."""
    project = make_project({"permission": {"bash": "ask"}})
    add_probe(
        project,
        {
            "stages": ["on_permission"],
            "on_permission": [
                {"when": {"args": "~deny-me"}, "answer": {"decision": "deny", "reason": "HOOK SAYS NO"}},
                {"when": {"args": "~allow-me"}, "answer": {"decision": "allow"}},
            ],
        },
    )
    project.mock.script(
        Reply(tool_calls=[("bash", {"command": "echo deny-me > denied.txt", "description": "write a file"})]),
        Reply(tool_calls=[("bash", {"command": "echo allow-me", "description": "say it"})]),
        Reply(text="Done."),
    )
    with project.serve() as server:
        sid = server.create_session("hcp permission")
        server.prompt(sid, "run", "two", "commands")
        assert server.request("GET", "/permission") == []

    main = project.mock.main_requests()
    assert len(main) == 3
    (denied,) = results_by_call(main[1], "bash")
    assert "HOOK SAYS NO" in denied
    assert not (project.dir / "denied.txt").exists()
    allowed = results_by_call(main[2], "bash")[-1]
    assert "allow-me" in allowed
    asked = probe_log(project, "on_permission")
    assert [a["tool"] for a in asked] == ["bash", "bash"] and asked[0]["pattern_matched"]

    def decided(journal: Any) -> list[Any] | None:
        calls = [c for c in journal.tool_calls(tool="bash") if c.output is not None]
        return calls if len(calls) == 2 else None

    calls = sorted(project.poll_journal("both bash calls", decided), key=lambda c: c.started_at)
    assert [(c.permission, c.permission_by) for c in calls] == [
        ("denied", "hook probe.py"),
        ("allowed", "hook probe.py"),
    ]


def test_mutate_request_appends_under_run_and_cancel_skips_the_model(project: Project) -> None:
    """Next to the example's opencode-evolve hook (which replaces opencode's prompt), an hcp hook's
    `system` is appended after it; a cancel skips the LLM call and ends the turn with its text."""
    notes_prompt = hook_system(project)
    add_probe(
        project,
        {
            "stages": ["mutate_request", "before_tool"],
            "mutate_request": [
                {
                    "when": {"user": "~forbidden"},
                    "answer": {"cancel": {"reason": "no"}, "result": "CANCELLED-BY-HCP"},
                },
                {"answer": {"system": ["APPENDED-BY-HCP"]}},
            ],
        },
    )
    cancelled = project.run("a", "forbidden", "question", check=False)
    assert cancelled.returncode != 0
    assert "CANCELLED-BY-HCP" in cancelled.stdout + cancelled.stderr
    assert project.mock.main_requests() == []

    project.mock.script(Reply(text="Fine."))
    project.run("an", "allowed", "question")
    (main,) = project.mock.main_requests()
    assert main.system[0] == notes_prompt[0]
    assert "APPENDED-BY-HCP" in "\n".join(main.system[1:])
    payload = probe_log(project, "mutate_request")[-1]
    assert payload["user"] == "an allowed question"
    assert payload["model"] == "mock/mock"
    assert list(payload)[:4] == ["hook", "session", "host", "cwd"] and payload["cwd"] == str(project.ws)
    with project.journal() as journal:
        assert journal.runs(failed=True) == []  # the example's hook never got an hcp name


def test_after_turn_stop_ends_the_loop_under_serve(project: Project) -> None:
    """A `stop` from after_turn while the loop goes on (the response called a tool) cancels the
    session's turn: the next response (held back by the mock) is aborted and nothing follows it."""
    target = project.dir / "f.txt"
    target.write_text("content\n")
    add_probe(
        project,
        {
            "stages": ["after_turn"],
            "after_turn": [{"when": {"turn": 1}, "answer": {"stop": {"reason": "enough"}}}],
        },
    )
    project.mock.script(
        Reply(tool_calls=[("read", {"filePath": str(target)})]),
        Reply(text="Too late.", delay=4.0),
        Reply(text="Never asked."),
    )
    with project.serve() as server:
        sid = server.create_session("hcp after_turn")
        server.prompt(sid, "read", "it")
        messages = server.messages(sid)

    assert len(project.mock.main_requests()) <= 2
    last = messages[-1]["info"]
    assert last["role"] == "assistant" and (last.get("error") or {}).get("name") == "MessageAbortedError", (
        last
    )
    (payload,) = probe_log(project, "after_turn")[:1]
    assert payload["assistant"]["tool_calls"][0]["name"] == "read"


def test_before_turn_system_reaches_that_request_only(project: Project) -> None:
    target = project.dir / "f.txt"
    target.write_text("content\n")
    add_probe(
        project,
        {
            "stages": ["before_turn"],
            "before_turn": [{"when": {"turn": 2}, "answer": {"system": ["TURN-TWO-ONLY"]}}],
        },
    )
    project.mock.script(Reply(tool_calls=[("read", {"filePath": str(target)})]), Reply(text="Done."))
    project.run("read", "it")

    first, second = project.mock.main_requests()
    assert "TURN-TWO-ONLY" not in "\n".join(first.system)
    assert "TURN-TWO-ONLY" in "\n".join(second.system)
    turns = probe_log(project, "before_turn")
    assert [t["turn"] for t in turns] == [1, 2]
    assert turns[1]["history"][-1]["role"] == "assistant" and "read" in turns[1]["tools"]
