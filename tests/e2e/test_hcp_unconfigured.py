"""Hooks as other projects write them, with no configuration, end to end: real opencode 1.18.33, the
shim, the engine it starts, the example workspace's opencode-evolve hook, and next to it a hook written to
hcp like hcp's own example (tests/fixtures/hcp_hello.py: no `stages`, canonical names) and one written
for opencode-evolve like a production persona hook (tests/fixtures/persona_strict.py: it answers a name
it does not know with an error and exit 1). Each gets its own protocol's names and payloads, checked at
the scripted model's side; also after_turn's `text` through `experimental.text.complete`, and who
decided the permission of a call of evolve's own tools.
"""

from __future__ import annotations

import json
import shutil
import threading
from typing import Any

import httpx

from evolve_demo.scripted_model import Reply
from tests.e2e.conftest import Project, hook_system, tool_call_ids, tool_results
from tests.support.fixture_hooks import FIXTURES, PERSONA_KNOWS, hello_log, persona_log
from tests.support.waiting import wait_for


def add_hooks(project: Project, *hooks: tuple[str, str]) -> None:
    """Fixture hooks in the workspace as `(fixture, name)`, committed as a person adding them would."""
    for fixture, name in hooks:
        shutil.copy(FIXTURES / fixture, project.ws / "hooks" / name)
        (project.ws / "hooks" / name).chmod(0o755)
        project.git("add", f"hooks/{name}")
    project.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "add hooks")


def test_hcp_and_persona_hooks_with_no_configuration_each_get_their_own_protocol(project: Project) -> None:
    """Under `opencode run`: hello's before_tool deny and its after_tool replacement reach the model, its
    before_stop fires, and it gets hcp's base payload; the persona hook gets only names it knows and
    never fails; the example's hook goes on as before."""
    notes_prompt = hook_system(project)
    add_hooks(project, ("hcp_hello.py", "hello.py"), ("persona_strict.py", "persona.py"))
    secret, token = project.dir / "secret.txt", project.dir / "token.txt"
    secret.write_text("the secret\n")
    token.write_text("key: SECRET-TOKEN\n")
    project.mock.script(
        Reply(tool_calls=[("read", {"filePath": str(secret)})]),
        Reply(tool_calls=[("read", {"filePath": str(token)})]),
        Reply(text="All done."),
    )
    project.run("read", "the", "files")

    main = project.mock.main_requests()
    assert len(main) == 3
    (denied,) = [tool_results(main[1])[c] for c in tool_call_ids(main[1], "read")]
    assert denied == "HELLO-DENY: secrets stay closed"
    redacted = [tool_results(main[2])[c] for c in tool_call_ids(main[2], "read")][-1]
    assert "key: [redacted by hello]" in redacted and "SECRET-TOKEN" not in redacted
    # The opencode-evolve hooks replace opencode's prompt, hello's part is appended after theirs.
    assert main[0].system[0].startswith(notes_prompt[0])
    assert "PERSONA: you are a calm, precise assistant." in "\n".join(main[0].system)
    assert main[0].system[-1].endswith(f"HELLO-HCP: hosted by evolve v3 in {project.ws}")

    mutate = hello_log(project.ws, "mutate_request")[0]
    assert list(mutate)[:4] == ["hook", "session", "host", "cwd"] and mutate["cwd"] == str(project.ws)
    assert mutate["host"]["name"] == "evolve" and "on_permission" not in mutate["host"]["stages"]
    # The first request of a fresh `opencode run` already has opencode's tools, also ones it does not offer.
    assert {"read", "invalid"} <= set(mutate["tools"]) and "invalid" not in main[0].tools
    befores = hello_log(project.ws, "before_tool")
    assert [b["args"]["filePath"] for b in befores] == [str(secret), str(token)]
    (stop,) = hello_log(project.ws, "before_stop")
    assert (stop["exit_reason"], stop["final"], stop["answer"]) == ("stop", True, "All done.")
    assert not {"idle", "tool_before", "tool_after"} & {p["hook"] for p in hello_log(project.ws)}

    seen = persona_log(project.ws)
    assert set(seen) <= PERSONA_KNOWS, seen
    assert {"discover", "mutate_request", "tool_before", "tool_after", "observe_message", "idle"} <= set(seen)
    with project.journal() as journal:
        assert journal.runs(failed=True) == []  # no hook exited 1: none got a name it does not know
    status = project.engine_api("/v1/status")
    protocols = {h["file"]: (h["protocol"], h["protocol_settle"]) for h in status["hooks"]}
    assert protocols == {
        "hello.py": ("hcp", None),
        "notes.py": ("opencode-evolve", None),
        "persona.py": ("opencode-evolve", None),
    }
    assert status["config_warnings"] == []


def test_after_turn_text_is_stored_and_own_tool_permissions_name_who_decided(make_project: Any) -> None:
    """Under `opencode serve`, with `hello_note` (a hook tool) asking permission: a hook denies one call
    (`on_permission`), the user allows the other through opencode's reply route; the journal names
    each. Then hello's after_turn redacts the answer's text: opencode stores the replacement, which the
    model reads in the next turn."""
    project = make_project({"permission": {"hello_note": "ask"}})
    add_hooks(project, ("hcp_hello.py", "hello.py"), ("hcp_probe.py", "probe.py"))
    plan = {
        "stages": ["on_permission"],
        "on_permission": [
            {"when": {"args": "~deny-me"}, "answer": {"decision": "deny", "reason": "PROBE SAYS NO"}}
        ],
    }
    (project.ws / "state").mkdir(exist_ok=True)
    (project.ws / "state" / "hcp-plan.json").write_text(json.dumps(plan))
    project.mock.script(
        Reply(tool_calls=[("hello_note", {"text": "deny-me"})]),
        Reply(tool_calls=[("hello_note", {"text": "allow-me"})]),
        Reply(text="Noted. The key is SECRET-TOKEN."),
        Reply(text="Fine."),
    )
    with project.serve() as server:
        sid = server.create_session("hcp unconfigured")
        answered: list[dict[str, Any]] = []
        turn = threading.Thread(target=lambda: answered.append(server.prompt(sid, "take", "two", "notes")))
        turn.start()
        headers = {"x-opencode-directory": str(project.dir)}

        def pending() -> list[dict[str, Any]] | None:
            # Asked after the model read the hook's refusal: only the second call's request is left.
            if len(project.mock.main_requests()) < 2:
                return None
            found = httpx.get(f"{server.url}/permission", headers=headers, timeout=5, verify=False).json()
            return found or None

        (request,) = wait_for("the second call's permission request", pending, timeout=60)
        assert request["permission"] == "hello_note"
        reply = httpx.post(
            f"{server.url}/permission/{request['id']}/reply",
            json={"reply": "once"},
            headers=headers,
            timeout=10,
            verify=False,
        )
        assert reply.status_code == 200, reply.text
        turn.join(120)
        assert answered, "the first turn did not end"
        server.prompt(sid, "and", "now")
        messages = server.messages(sid)

    main = project.mock.main_requests()
    assert len(main) == 4
    (denied,) = [tool_results(main[1])[c] for c in tool_call_ids(main[1], "hello_note")]
    assert "PROBE SAYS NO" in denied
    assert [tool_results(main[2])[c] for c in tool_call_ids(main[2], "hello_note")][-1] == "noted: allow-me"

    # The stored answer is the hook's; the next turn's request carries it, never the original.
    stored = [
        p["text"]
        for m in messages
        if m["info"]["role"] == "assistant"
        for p in m["parts"]
        if p["type"] == "text" and "Noted." in p.get("text", "")
    ]
    assert stored == ["Noted. The key is [redacted by hello]."]
    said = [m.get("content") for m in main[3].messages if m.get("role") == "assistant"]
    assert "Noted. The key is [redacted by hello]." in json.dumps(said)
    assert "SECRET-TOKEN" not in json.dumps(main[3].messages)
    texts = [t for t in hello_log(project.ws, "after_turn") if t["assistant"]["text"]]
    assert [t["assistant"]["text"] for t in texts] == ["Noted. The key is SECRET-TOKEN.", "Fine."]
    assert all(t["usage"] is None for t in texts)  # at the text: opencode counts the tokens after it

    def decided(journal: Any) -> list[Any] | None:
        calls = [c for c in journal.tool_calls(tool="hello_note") if c.output is not None]
        return calls if len(calls) == 2 else None

    calls = sorted(project.poll_journal("both hello_note calls", decided), key=lambda c: c.started_at)
    assert [(c.args["text"], c.permission, c.permission_by) for c in calls] == [
        ("deny-me", "denied by hook probe.py", "hook probe.py"),
        ("allow-me", "allowed by user", "user"),
    ]
    assert calls[0].error is not None and "PROBE SAYS NO" in calls[0].error
