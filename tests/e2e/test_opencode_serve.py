"""End to end under `opencode serve --port N`, driven over opencode's HTTP API with httpx: the shim
loads lazily on the first request for the project directory and starts the engine.
"""

from __future__ import annotations

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


def answer_text(message: dict[str, object]) -> str:
    parts = message.get("parts")
    assert isinstance(parts, list), message
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


def test_serve_system_prompt_tools_and_tool_call(project: Project) -> None:
    """Scenario 11 (1, 2 and a hook tool call through the HTTP API)."""
    expected = hook_system(project)
    specs = project.tools()
    project.mock.script(
        Reply(tool_calls=[("notes_add", {"text": "water the plants", "priority": "normal"})]),
        Reply(text="Noted: water the plants."),
    )
    with project.serve() as server:
        sid = server.create_session("serve e2e")
        answer = server.prompt(sid, "remember", "to", "water", "the", "plants")

    assert answer["info"]["role"] == "assistant"
    assert answer_text(answer) == "Noted: water the plants."
    assert project.mock.of_kind("title") == []  # the session was created with a title
    main = project.mock.main_requests()
    assert len(main) == 2
    assert all(session_of(r) == sid for r in main)
    assert all(r.system == expected for r in main)
    assert last_user_text(main[0]) == "remember to water the plants"
    sent = main[0].tools
    for spec in specs:
        assert sent[spec["name"]]["parameters"] == spec["parameters"], spec["name"]
        assert sent[spec["name"]]["description"] == spec["description"], spec["name"]

    (call_id,) = tool_call_ids(main[1], "notes_add")
    assert tool_results(main[1])[call_id] == "added note #1"
    notes = project.notes()
    assert notes is not None and [n["text"] for n in notes] == ["water the plants"]
    commit = project.commits()[0]
    assert commit.splitlines()[1] == "update add"
    assert trailers(commit)["Evolve-Session"] == sid
    assert trailers(commit)["Evolve-Call"] == call_id


def test_serve_idle_continue_and_compaction_prompt(project: Project) -> None:
    """Scenario 8: on summarize, the compaction request carries the example's compaction prompt
    (prompts/compaction.md plus the pinned notes) instead of opencode's. On the way, under serve an
    idle `continue` does produce a further turn: after the first one ended, or, when the engine's
    answer comes while opencode is still in the prompt's loop (warm hooks often are that quick),
    within the same prompt, which then answers with the continued turn."""
    compaction = (project.ws / "prompts" / "compaction.md").read_text().strip()
    continue_text = "Now also list what is still open."
    (project.ws / "notes").mkdir(exist_ok=True)
    (project.ws / "notes" / "continue.txt").write_text(continue_text)
    project.mock.script(Reply(text="First answer."), Reply(text="Nothing is open."))
    with project.serve() as server:
        sid = server.create_session("compaction e2e")
        first = server.prompt(sid, "hello")
        assert answer_text(first) in ("First answer.", "Nothing is open.")

        def continued() -> bool:
            main = project.mock.main_requests()
            return len(main) == 2 and last_user_text(main[1]) == continue_text

        wait_for("the idle continue's turn", continued, timeout=20)
        messages = server.request("GET", f"/session/{sid}/message")
        said = [(m["info"]["role"], answer_text(m)) for m in messages]
        assert said == [
            ("user", "hello"),
            ("assistant", "First answer."),
            ("user", continue_text),
            ("assistant", "Nothing is open."),
        ]

        def idle() -> bool:
            return server.request("GET", "/session/status") == {}

        wait_for("the session to go idle", idle, timeout=20)
        assert server.request(
            "POST", f"/session/{sid}/summarize", json={"providerID": "mock", "modelID": "mock"}
        )

    (request,) = project.mock.of_kind("compaction")
    assert session_of(request) == sid
    prompt = last_user_text(request)
    assert compaction in prompt
    # opencode appends the conversation to the prompt: "\n\nThe following is the conversation history: …"
    assert prompt.startswith(f"{compaction}\nPinned notes: none\n\n"), prompt
    assert "[User]: hello" in prompt


def test_serve_notify_after_instance_dispose(project: Project) -> None:
    """opencode re-creates a directory's instance (and re-runs the plugin) after /instance/dispose;
    the engine must still be able to reach opencode afterwards, e.g. to deliver a notification."""
    project.mock.script(
        Reply(text="Hi."),
        Reply(tool_calls=[("notes_add", {"text": "the meeting moved to friday", "priority": "high"})]),
        Reply(text="Noted."),
    )
    with project.serve() as server:
        first = server.create_session("first")
        server.prompt(first, "hello")
        assert server.request("POST", "/instance/dispose") is True
        second = server.create_session("second")
        server.prompt(second, "remember", "the", "meeting")
        notes = project.notes()
        assert notes is not None and notes[0]["text"] == "the meeting moved to friday"

        def delivered() -> bool:
            return any(
                "<assistant-notification>" in p.get("text", "")
                for m in server.messages(first)
                for p in m["parts"]
            )

        wait_for("the notification in the first session", delivered, timeout=10)
        assert project.engine_api("/v1/status")["opencode"], "the engine has no opencode connection"


def test_serve_continue_after_compaction_goes_to_the_chat_agent(project: Project) -> None:
    """A `continue` pending when a session is compacted must reach the chat agent (a main request
    with tools), never opencode's compaction agent."""
    project.mock.script(Reply(text="First answer."), Reply(text="Next answer."), Reply(text="Kept going."))
    with project.serve() as server:
        sid = server.create_session("continue after compaction")
        server.prompt(sid, "hello")
        project.poll_journal("the first idle dispatch", lambda j: j.dispatches(stage="idle", session=sid))
        (project.ws / "notes").mkdir(exist_ok=True)
        (project.ws / "notes" / "continue.txt").write_text("KEEP GOING")
        assert server.request(
            "POST", f"/session/{sid}/summarize", json={"providerID": "mock", "modelID": "mock"}
        )
        server.prompt(sid, "next")

        def kept_going() -> list[Request]:
            return [r for r in project.mock.requests if last_user_text(r) == "KEEP GOING"]

        request = wait_for("the continue's LLM request", kept_going, timeout=20)[0]
    assert request.kind == "main", f"the continue went to opencode's {request.kind} agent"
    assert "notes_add" in request.tools
