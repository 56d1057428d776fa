"""End to end under `opencode run`: real opencode 1.18.33, the evolve shim, a real engine started by
the shim, the example workspace, and a mock LLM that records what opencode sends it.

Each test gets its own project and workspace (see conftest.py); several scenarios share one run
where they do not interfere, to keep the wall time down.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from evolve_demo.scripted_model import Reply, Request
from tests.e2e.conftest import (
    Project,
    hook_system,
    last_user_text,
    session_of,
    tool_call_ids,
    tool_results,
    trailers,
)
from tests.support.waiting import wait_for

# ---- scenarios -------------------------------------------------------------------------------------


def test_system_prompt_tools_tool_call_and_observe(project: Project) -> None:
    """Scenarios 1, 2 and 6: the hook's system prompt replaces opencode's in the main requests but not
    in the title request; every engine tool reaches the LLM with its exact schema and description;
    a hook tool call runs and commits; observe_message sees the tool call and the final answer."""
    expected = hook_system(project)
    specs = project.tools()
    project.mock.script(
        Reply(tool_calls=[("notes_add", {"text": "buy milk", "priority": "low"})]),
        Reply(text="Noted: buy milk."),
    )

    proc = project.run("remember", "to", "buy", "milk")
    assert "Noted: buy milk." in proc.stdout

    # 1. system prompts
    titles = project.mock.of_kind("title")
    assert len(titles) == 1
    assert titles[0].system[0].startswith("You are a title generator")
    assert titles[0].system != expected
    main = project.mock.main_requests()
    assert len(main) == 2
    for req in main:
        assert req.system == expected
    assert last_user_text(main[0]) == "remember to buy milk"
    sid = session_of(main[0])

    # 2. every engine tool, exactly as the engine describes it (opencode passes the JSON Schema
    # from tool.definition through unchanged, "$schema" included)
    sent = main[0].tools
    assert {s["name"] for s in specs} <= set(sent)
    for spec in specs:
        assert sent[spec["name"]]["parameters"] == spec["parameters"], spec["name"]
        assert sent[spec["name"]]["description"] == spec["description"], spec["name"]
    assert specs[0]["parameters"]["$schema"] == "https://json-schema.org/draft/2020-12/schema"

    # the tool call: executed by the hook, result sent back, committed with trailers
    (call_id,) = tool_call_ids(main[1], "notes_add")
    assert tool_results(main[1])[call_id] == "added note #1"
    notes = project.notes()
    assert notes is not None and [(n["text"], n["priority"]) for n in notes] == [("buy milk", "low")]
    commit = project.commits()[0]
    assert commit.splitlines()[1] == "update add"
    assert trailers(commit) == {
        "Evolve-Origin": "tool",
        "Evolve-Tool": "notes_add",
        "Evolve-Session": sid,
        "Evolve-Call": call_id,
        "Evolve-Hook": "notes.py",
    }

    # 6. observe_message: one dispatch with the tool call part, one with the final answer
    def observed(journal: Any) -> list[Any] | None:
        found = journal.dispatches(stage="observe_message", session=sid)
        return found if len(found) >= 2 else None

    dispatches = project.poll_journal("two observe_message dispatches", observed)
    contexts = [d.context for d in dispatches]
    with_calls = [c for c in contexts if c["calls"]]
    assert len(with_calls) == 1, contexts
    (part,) = with_calls[0]["calls"]
    assert part["type"] == "tool" and part["tool"] == "notes_add" and part["callID"] == call_id
    assert part["state"]["input"] == {"text": "buy milk", "priority": "low"}
    answers = [c["answer"] for c in contexts]
    assert "Noted: buy milk." in answers


def test_a_session_event_reaches_the_engine_once_for_each_change(project: Project) -> None:
    """opencode repeats a session's title and busy status at every step of a turn; the shim tells the
    engine only what changed, so a turn of ten steps costs no more event requests than one, and the
    engine still knows the session's title and that it is idle."""
    steps = 10
    project.mock.script(
        *(Reply(tool_calls=[("notes_list", {})]) for _ in range(steps - 1)), Reply(text="Listed ten times.")
    )

    proc = project.run("list", "your", "notes")

    assert "Listed ten times." in proc.stdout
    sid = session_of(project.mock.main_requests()[0])
    assert len(project.mock.main_requests()) == steps
    project.settle()
    session = {s["id"]: s for s in project.engine_api("/v1/sessions")["sessions"]}[sid]
    assert session["title"] and not session["busy"], session
    served = project.engine_api("/v1/status")["requests"]
    assert served["POST /v1/tools/{name}/call"] == steps - 1
    # created, a title or two, busy, idle: a handful for the turn, where each step used to send ~4
    assert served["POST /v1/opencode/event"] < steps, served


def test_tool_calls_refused_by_schema_and_by_permission_rule(make_project: Any) -> None:
    """Scenarios 3 and 4, in one run.

    3: an out-of-enum argument is refused by the engine's schema validation, with a result that names
       the allowed values; the hook does not run.
    4: opencode's permission config, keyed by the tool name with the permission argument's value as
       pattern, refuses `priority: high` while `low` works. opencode 1.18 accepts these rules at the
       top level (used here) and equally under `agent.build.permission`.
    """
    project = make_project({"permission": {"notes_add": {"*": "allow", "high": "deny"}}})
    notes_seen: list[Any] = []

    def after_urgent(req: Request) -> Reply:
        notes_seen.append(project.notes())  # the notebook right after the refused call
        return Reply(tool_calls=[("notes_add", {"text": "launch codes", "priority": "high"})])

    project.mock.script(
        Reply(tool_calls=[("notes_add", {"text": "call mum", "priority": "urgent"})]),
        after_urgent,
        Reply(tool_calls=[("notes_add", {"text": "buy bread", "priority": "low"})]),
        Reply(text="One of three."),
    )
    project.run("take", "three", "notes")

    main = project.mock.main_requests()
    assert len(main) == 4
    urgent_id, denied_id, allowed_id = tool_call_ids(main[3], "notes_add")

    # 3. refused by the engine before the hook ran
    urgent = tool_results(main[1])[urgent_id]
    assert urgent == (
        "tool error: invalid arguments for notes_add: "
        'argument "priority" must be one of "low", "normal", "high" (got "urgent")'
    )
    assert notes_seen == [None]

    # 4. refused by opencode's permission rule (the hook never ran; the engine records the refusal),
    # then allowed
    denied = tool_results(main[2])[denied_id]
    assert denied.startswith(
        "The user has specified a rule which prevents you from using this specific tool call"
    )
    assert '{"permission":"notes_add","pattern":"high","action":"deny"}' in denied
    assert tool_results(main[3])[allowed_id] == "added note #1"
    notes = project.notes()
    assert notes is not None and [n["text"] for n in notes] == ["buy bread"]

    def all_calls(journal: Any) -> list[Any] | None:
        calls = journal.tool_calls(tool="notes_add")
        return calls if len(calls) >= 3 else None

    calls = project.poll_journal("the engine's notes_add calls in the journal", all_calls)
    assert [c.args["priority"] for c in reversed(calls)] == ["urgent", "high", "low"]
    assert calls[2].error and calls[2].output == urgent
    refused = calls[1]
    assert refused.permission == "denied by opencode" and refused.commit is None
    assert refused.error is not None and refused.error.startswith("permission denied: ")
    assert calls[0].permission == "allowed by opencode" and calls[0].error is None
    with project.journal() as journal:
        runs = journal.runs(stage="execute_tool")
    assert [r.input["args"]["priority"] for r in runs] == ["low"]


def test_hook_edit_is_validated_committed_and_rediscovered(project: Project) -> None:
    """Scenario 5: a hook edit that breaks the hook's test is refused; a good one is committed with
    the opencode session and call id in its trailers, and the changed tool is re-discovered."""
    old_description = "List your notes, one per line, oldest first"
    new_description = "List every note you kept, one per line, oldest first"
    assert any(old_description in t["description"] for t in project.tools())
    before = project.commits()
    project.mock.script(
        Reply(
            tool_calls=[
                (
                    "evolve_hook_edit",
                    {"hook": "notes.py", "oldString": 'NAME = "notes"', "newString": 'NAME = "broken"'},
                )
            ]
        ),
        Reply(
            tool_calls=[
                (
                    "evolve_hook_edit",
                    {"hook": "notes.py", "oldString": old_description, "newString": new_description},
                )
            ]
        ),
        Reply(text="Changed the description."),
    )
    project.run("reword", "the", "notes_list", "description")

    main = project.mock.main_requests()
    assert len(main) == 3
    sid = session_of(main[0])
    bad_id, good_id = tool_call_ids(main[2], "evolve_hook_edit")
    assert tool_results(main[1])[bad_id].startswith("validation failed"), tool_results(main[1])
    assert tool_results(main[2])[good_id] == "successfully edited notes.py"

    after = project.commits()
    new = after[: len(after) - len(before)]
    edits = [c for c in new if trailers(c).get("Evolve-Tool") == "evolve_hook_edit"]
    assert len(edits) == 1, new
    assert edits[0].splitlines()[1] == "edit hook notes.py"
    assert trailers(edits[0])["Evolve-Session"] == sid
    assert trailers(edits[0])["Evolve-Call"] == good_id
    assert 'NAME = "notes"' in (project.ws / "hooks" / "notes.py").read_text()

    # re-discovered, both by a new engine (the CLI) and by the running one (its API)
    (listed,) = [t for t in project.tools() if t["name"] == "notes_list"]
    assert listed["description"].startswith(new_description)
    (served,) = [t for t in project.engine_api("/v1/tools")["tools"] if t["name"] == "notes_list"]
    assert served["description"].startswith(new_description)


def test_idle_continue_under_run_is_decided_and_followed_while_opencode_listens(project: Project) -> None:
    """Scenario 7 under `opencode run`: the example hook's idle stage answers notes/continue.txt as
    `continue`. opencode 1.18 leaves its loop a few ms after a response ends and does not wait for
    plugin events, and `opencode run` has no server to take a later prompt: the extra turn happens
    only when the engine's answer reaches the shim before opencode has finished the turn, a race a
    fast hook start (warm) often wins and a slow one (cold) loses (under `opencode serve` it always
    happens: see test_opencode_serve). What must hold: idle ran on the answer and decided to
    continue; and either the run went on with the continue as its next prompt, or the shim said
    plainly why nothing followed."""
    text = "Also check whether the calendar has a free slot."
    (project.ws / "notes").mkdir(exist_ok=True)
    (project.ws / "notes" / "continue.txt").write_text(text)
    project.mock.script(Reply(text="First answer."), Reply(text="Second answer."))

    proc = project.run("hello")

    assert "First answer." in proc.stdout
    assert not (project.ws / "notes" / "continue.txt").exists()
    with project.journal() as journal:
        (idle,) = [d for d in journal.dispatches(stage="idle") if d.context.get("answer") == "First answer."]
    assert idle.merged.get("continue") == text
    mains = [r for r in project.mock.requests if r.kind == "main"]
    if len(mains) == 2:  # in time: the continue was the run's next prompt
        assert text in mains[1].text()
        assert "Second answer." in proc.stdout
    else:
        assert len(mains) == 1
        assert "came after opencode finished the turn" in project.shim_log()


def test_notify_reaches_another_session(project: Project) -> None:
    """Scenario 9: a high-priority note's `notify` is delivered to the other session the engine knows,
    as a no-reply user message stored by opencode."""
    project.mock.script(Reply(text="Hi."))
    project.run("hello")
    first = session_of(project.mock.main_requests()[0])

    project.mock.script(
        Reply(tool_calls=[("notes_add", {"text": "the server moves on friday", "priority": "high"})]),
        Reply(text="Noted, and told your other sessions."),
    )
    project.run("remember", "the", "server", "move")
    second = session_of(project.mock.main_requests()[-1])
    assert second != first
    main = project.mock.main_requests()
    assert len(main) == 3  # the notification got no reply

    with project.serve() as server:

        def delivered() -> list[str] | None:
            texts = [
                p.get("text", "")
                for m in server.messages(first)
                if m["info"]["role"] == "user"
                for p in m["parts"]
                if p.get("type") == "text"
            ]
            found = [t for t in texts if "<assistant-notification>" in t]
            return found or None

        (message,) = wait_for("the notification in the first session", delivered, timeout=10)
    assert "the server moves on friday" in message
    assert project.mock.main_requests() == main  # no LLM call for a no-reply message


def test_engine_killed_during_a_run(project: Project) -> None:
    """Scenario 10: SIGKILL the engine while the LLM is answering; the run still finishes with the
    answer, and the next run gets the hook's prompt and hook tools again (the shim restarts it)."""
    expected = hook_system(project)
    project.mock.script(Reply(text="A slow answer.", delay=2.5))
    proc = project.start_run("hello")
    try:
        wait_for("the main LLM request", lambda: project.mock.main_requests(), timeout=60)
        found = project.announcement()
        assert found is not None
        killed = int(found["pid"])
        os.kill(killed, signal.SIGKILL)
        out, err = proc.communicate(timeout=90)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, f"{out}\n{err}\n{project.shim_log()}"
    assert "A slow answer." in out
    assert project.mock.main_requests()[0].system == expected

    project.mock.script(
        Reply(tool_calls=[("notes_add", {"text": "after the restart", "priority": "low"})]),
        Reply(text="Noted again."),
    )
    second = project.run("remember", "this")
    assert "Noted again." in second.stdout
    later = project.mock.main_requests()[1:]
    assert len(later) == 2
    assert all(r.system == expected for r in later)
    (call_id,) = tool_call_ids(later[1], "notes_add")
    assert tool_results(later[1])[call_id].startswith("added note #")
    notes = project.notes()
    assert notes is not None and [n["text"] for n in notes] == ["after the restart"]
    found = project.announcement()
    assert found is not None and int(found["pid"]) != killed
