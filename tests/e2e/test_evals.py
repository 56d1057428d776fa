"""Behaviour checks end to end: the example workspace's scenarios run through real opencode (1.18.33,
the evolve plugin, the scripted model of the demo's story) at the version before a change and after
it, each version in its throwaway copy with its own engine and opencode.

- The story's prompt edit "never delete a note" is caught: "forget a note" passes before and fails
  after, with the answer that shows why, on screen and in the result the engine keeps; the real
  workspace's files, its git history and its journal are the same after the checks as before.
- The review gate with `evals_on_review` and `evals_auto_approve` keeps the bad edit held (its author
  is told which scenario failed) and installs the neutral one, which regresses nothing, by itself.
- The last real turns are re-asked with their conversation.
- Ctrl-C of `evolve eval` stops every process the checks started and leaves no copy behind.
- A run that passes its time limit is aborted, and fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

from evolve_demo import story
from evolve_demo.scripted_model import Reply, Request
from tests.e2e.conftest import Project, evolve
from tests.support.environment import EVOLVE, REPO, without_settings
from tests.support.processes import pid_alive
from tests.support.waiting import wait_for

EVAL_TIMEOUT = 600.0
SCENARIOS = {"count the notes", "forget a note", "remember a deadline", "two errands", "what's on my list"}


def playing(project: Project) -> story.Story:
    agent = story.Story()
    project.mock.responder = agent.respond
    return agent


def workspace_state(project: Project) -> dict[str, Any]:
    """What a check must not change: every file of the workspace but the engine's own state/ (its log
    grows), the history, and the journal's records."""
    files = {}
    for path in sorted(project.ws.rglob("*")):
        rel = path.relative_to(project.ws).as_posix()
        if path.is_file() and not rel.startswith(("state/", ".git/")):
            files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    with project.journal() as journal:
        counts = journal.counts()
        sessions = sorted(s["id"] for s in journal.sessions(limit=1000))
    return {
        "files": files,
        "log": project.git("log", "--format=%H %s"),
        "refs": project.git("for-each-ref"),
        "journal": counts,
        "sessions": sessions,
    }


def chat_edit(project: Project, server: Any, text: str) -> str:
    """One chat turn in which the agent edits its prompt; the commit it made."""
    before = project.git("rev-parse", "HEAD").strip()
    session = server.create_session("chat")
    server.prompt(session, text)
    project.settle()
    sha = project.git("rev-parse", "HEAD").strip()
    assert sha != before, project.git("log", "-3", "--format=%s")
    return sha


def evaluate(project: Project, *args: str) -> tuple[int, dict[str, Any]]:
    proc = evolve("eval", *args, "--workspace", str(project.ws), "--json", check=False, timeout=EVAL_TIMEOUT)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def scenario(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in result["scenarios"] if s["name"] == name)


def copies_left(project: Project) -> list[Path]:
    """The checks' throwaway directories in the engine's temporary directory (opencode's home here)."""
    return sorted((project.home / ".tmp").glob("evolve-eval-*"))


def processes_under(path: Path) -> list[str]:
    """Live processes whose working directory or command line lies under `path`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if (str(path) in command or cwd.startswith(str(path))) and pid_alive(int(entry.name)):
            found.append(f"{entry.name}: {command.strip()} (in {cwd})")
    return found


def test_a_prompt_edit_that_makes_the_agent_refuse_is_caught_shown_and_kept(project: Project) -> None:
    playing(project)
    with project.serve() as server:
        chat_edit(project, server, story.OPENING[3])  # the neutral edit comes first, as in the story
        bad = chat_edit(project, server, story.OPENING[5])
        assert story.KEEP_RULE in (project.ws / "prompts" / "chat.md").read_text()
        state = workspace_state(project)
        sent = len(project.mock.main_requests())

        shown = evolve("eval", bad, "--workspace", str(project.ws), check=False, timeout=EVAL_TIMEOUT)
        assert shown.returncode == 1, shown.stdout + shown.stderr
        assert "done in" in shown.stdout and 'evals 5/5 → 4/5: "forget a note" fails after' in shown.stdout
        assert re.search(r"^forget a note +1/1 +0/1  REGRESSED$", shown.stdout, re.M), shown.stdout
        assert re.search(r"^count the notes +1/1 +1/1  passes$", shown.stdout, re.M), shown.stdout
        assert "I keep notes permanently" in shown.stdout  # the answer that shows why
        # The result as the engine keeps it for the change (what `--json` prints).
        result = project.engine_api(f"/v1/changes/{bad}/eval")
        assert result["state"] == "done", result["error"]
        assert result["summary"] == 'evals 5/5 → 4/5: "forget a note" fails after'
        assert result["regressed"] == ["forget a note"]
        assert result["model"] == "mock/mock"
        assert {s["name"] for s in result["scenarios"]} == SCENARIOS
        forget = scenario(result, "forget a note")
        assert (forget["passed_before"], forget["passed_after"]) == (1, 0)
        assert forget["failed_after"][0].startswith("calls notes_forget: no call of notes_forget")
        assert forget["answer_before"].startswith("Well done: I dropped it")
        assert (
            forget["answer_after"]
            == "Well done! I keep notes permanently, though: the note for 'book the dentist' stays."
        )
        assert any(op == "+" and "I keep notes permanently" in text for op, text in forget["answer_diff"])
        after = next(r for r in forget["runs"] if r["version"] == "after")
        assert [t["tool"] for t in after["tools"]] == ["notes_add"]
        assert {h["stage"] for h in after["hooks"]} >= {"mutate_request", "execute_tool"}
        assert after["steps"] == 3 and after["tokens"]["input"] > 0
        # The scripted model was sent each version's own prompt: the rule only after the change.
        requests = project.mock.main_requests()[sent:]
        with_rule = [r for r in requests if story.KEEP_RULE in "\n".join(r.system)]
        assert with_rule and len(with_rule) < len(requests)
        assert workspace_state(project) == state  # the real workspace, its history, its journal
    assert copies_left(project) == []


def test_the_gate_holds_the_bad_edit_and_installs_the_neutral_one_by_itself(project: Project) -> None:
    config = project.ws / "config" / "evolve.jsonc"
    config.write_text('{"review": "gate", "evals_on_review": true, "evals_auto_approve": true}\n')
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "operator: the gate with evals")
    playing(project)

    def pending() -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = project.engine_api("/v1/changes?limit=5")["pending"]
        return listed

    with project.serve() as server:
        keep = server.create_session("chat")
        server.prompt(keep, story.OPENING[5])
        (held,) = wait_for("the edit to be held", lambda: pending() or None, timeout=30)
        checked = wait_for(
            "its checks to end",
            lambda: next((p for p in pending() if p["id"] == held["id"] and p.get("evals")), None),
            timeout=EVAL_TIMEOUT,
        )
        assert checked["status"] == "pending"
        assert checked["evals"] == 'evals 5/5 → 4/5: "forget a note" fails after'
        assert story.KEEP_RULE not in (project.ws / "prompts" / "chat.md").read_text()
        result = project.engine_api(f"/v1/pending/{held['id']}/eval")
        assert result["kind"] == "pending" and result["regressed"] == ["forget a note"]
        told = wait_for(
            "the author to be told",
            lambda: next(
                (
                    n
                    for n in project.engine_api(f"/v1/sessions/{keep}")["notifications"]
                    if "stays held for the operator" in n["text"]
                ),
                None,
            ),
            timeout=30,
        )
        assert '"forget a note" fails with your change: calls notes_forget' in told["text"]

        shorter = server.create_session("chat")
        server.prompt(shorter, story.OPENING[3])
        installed = wait_for(
            "the neutral edit to be installed by itself",
            lambda: next((p for p in pending() if p["status"] == "approved"), None),
            timeout=EVAL_TIMEOUT,
        )
        assert installed["evals"] == "evals 5/5 → 5/5"
        assert story.PROMPT_NEW in (project.ws / "prompts" / "chat.md").read_text()
        head = project.commits()[0]
        assert "Evolve-Approved-By: evals" in head and "Evolve-File: prompts/chat.md" in head
        # The neutral edit installed changed prompts/chat.md under the held one: it can no longer be
        # approved as proposed, and says so (docs/console.md, "Stale").
        assert next(p for p in pending() if p["id"] == held["id"])["status"] == "stale"
    assert copies_left(project) == []


def test_the_last_turns_are_re_asked_with_their_conversation(project: Project) -> None:
    playing(project)
    with project.serve() as server:
        bad = chat_edit(project, server, story.OPENING[5])
        session = server.create_session("errands")
        server.prompt(session, "Add a note: book the dentist.")
        server.prompt(session, "How many notes do I have?")
        project.settle()
        sent = len(project.mock.main_requests())
        status, result = evaluate(project, bad, "--turns", "2")
    assert status == 0 and result["mode"] == "turns" and result["state"] == "done", result["error"]
    assert [s["name"] for s in result["scenarios"]] == [
        "“errands”: How many notes do I have?",
        "“errands”: Add a note: book the dentist.",
    ]
    count = result["scenarios"][0]
    assert count["note"] == "re-asked with its conversation (3 messages before it)"
    assert count["tools_before"] == count["tools_after"] == ["notes_stats {}"]
    assert result["summary"].startswith("2 turns re-asked")
    # What the model was sent for the re-asked turn: the conversation before it, then the turn.
    asked = [
        r for r in project.mock.main_requests()[sent:] if r.last_user_text() == "How many notes do I have?"
    ]
    assert asked and all(r.user_texts()[:1] == ["Add a note: book the dentist."] for r in asked)
    # Both versions ran in one opencode, each in its own directory: its own plugin, prompt and engine.
    assert {any(story.KEEP_RULE in part for part in r.system) for r in asked} == {False, True}
    assert all(run["hooks"] for run in count["runs"]), count["runs"]


def test_ctrl_c_stops_every_process_the_checks_started_and_leaves_no_copy(project: Project) -> None:
    agent = playing(project)

    def slow(req: Request) -> Reply:  # every check's first answer takes long: the checks are mid-run
        reply = agent.respond(req)
        reply.delay = 60.0
        return reply

    with project.serve() as server:
        bad = chat_edit(project, server, story.OPENING[5])
        project.mock.responder = slow
        sent = len(project.mock.main_requests())
        proc = subprocess.Popen(
            [*EVOLVE, "eval", bad, "--workspace", str(project.ws)],
            cwd=REPO,
            env=without_settings(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(
                "the checks to reach the model", lambda: len(project.mock.main_requests()) > sent, timeout=180
            )
            (copy,) = copies_left(project)
            assert processes_under(copy)  # its engines and its opencodes run
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, proc.stderr.read() if proc.stderr else ""
        wait_for("the copy to be removed", lambda: not copy.exists(), timeout=30)
        assert processes_under(copy) == []
        assert project.engine_api("/v1/status")["opencode"]  # the agent's own opencode is untouched
    assert copies_left(project) == []


def test_a_run_that_passes_its_time_limit_is_aborted_and_fails_at_both_versions(project: Project) -> None:
    agent = playing(project)
    (project.ws / "evals" / "slow.jsonc").write_text(
        '{"name": "slow", "messages": "What is on my list, slowly?", "timeout_ms": 3000}'
    )
    project.git("add", "-A")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "operator: a slow scenario")

    def slow(req: Request) -> Reply:
        reply = agent.respond(req)
        if req.last_user_text() == "What is on my list, slowly?":
            reply.delay = 20.0
        return reply

    with project.serve() as server:
        bad = chat_edit(project, server, story.OPENING[5])
        project.mock.responder = slow
        status, result = evaluate(project, bad, "--scenario", "slow", "--scenario", "forget a note")
    assert status == 1 and result["state"] == "done"
    slow_one = scenario(result, "slow")
    assert (slow_one["status"], slow_one["passed_before"], slow_one["passed_after"]) == ("failing", 0, 0)
    assert slow_one["failed_before"] == ["did not finish: did not finish within 3 s"]
    assert {r["state"] for r in slow_one["runs"]} == {"error"}
    assert result["summary"] == 'evals 1/2 → 0/2: "forget a note" fails after'
    assert all(r["duration_ms"] < 15_000 for r in slow_one["runs"])  # the 20 s answers were not waited for
    assert copies_left(project) == []
