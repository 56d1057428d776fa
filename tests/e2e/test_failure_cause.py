"""End to end, the engine's half of "point at the cause": against real opencode 1.18.33 and the
scripted model, the agent's hook edit passes its test and breaks the heartbeat; the engine names that
edit and the exception (the tick is degraded, the failure is published and listed, the change says
it has been failing since), and reverting it makes the next tick ok again."""

from __future__ import annotations

import json
from typing import Any

from evolve_demo.scripted_model import Reply
from tests.e2e.conftest import Project, evolve
from tests.e2e.test_heartbeat import configure, connect
from tests.support.waiting import wait_for

OLD = "count = f\"You have {len(notes)} note{'' if len(notes) == 1 else 's'}.\""
NEW = 'count = "You have " + len(notes) + " notes."'
REASON = "The heartbeat's count line can be simpler."
TYPE_ERROR = 'TypeError: can only concatenate str (not "int") to str'


def fire(project: Project) -> dict[str, Any]:
    """`evolve heartbeat fire` (exit 0 required): the tick's result."""
    proc = evolve("heartbeat", "fire", "--workspace", str(project.ws), timeout=180)
    result: dict[str, Any] = json.loads(proc.stdout)["result"]
    return result


def test_a_hook_edit_that_breaks_the_heartbeat_is_named_with_its_exception_and_its_revert_heals(
    project: Project,
) -> None:
    configure(project)  # the default interval: only manual ticks; the mock's model
    project.mock.script(
        Reply(
            text=REASON,
            tool_calls=[("evolve_hook_edit", {"hook": "notes.py", "oldString": OLD, "newString": NEW})],
        ),
        Reply(text="Done."),
    )
    with project.serve() as server:
        connect(project, server)
        errands = server.create_session("Errands")
        server.prompt(errands, "simplify", "the", "heartbeat")
        change = project.engine_api("/v1/changes")["changes"][0]
        assert change["subject"] == "edit hook notes.py"
        assert change["provenance"]["validation"]["ok"], "the edit passed its test"

        tick = fire(project)
        assert tick["outcome"] == "degraded", tick
        [failure] = tick["failures"]
        assert failure["error"] == TYPE_ERROR
        assert failure["suspect"]["sha"] == change["sha"]
        assert failure["suspect"]["origin"] == "agent" and failure["suspect"]["session_title"] == "Errands"
        assert failure["cause"].startswith(f"since {change['sha'][:7]}, agent, ")
        assert failure["message"].startswith(
            f"hooks/notes.py started failing at heartbeat: {TYPE_ERROR} (since "
        )
        assert tick["prompt"] == "prompts/recover.md" and TYPE_ERROR in tick["reason"]
        listed = project.engine_api("/v1/failures")["failures"]
        assert [(f["hook"], f["stage"], f["suspect"]["sha"]) for f in listed] == [
            ("notes.py", "heartbeat", change["sha"])
        ]
        [failing] = project.engine_api(f"/v1/changes/{change['sha']}")["failing"]
        assert (failing["hook"], failing["runs"]) == ("notes.py", 1)
        status = evolve("heartbeat", "status", "--workspace", str(project.ws)).stdout
        assert json.loads(status)["degraded"] == tick["reason"]

        project.engine_api(f"/v1/changes/{change['sha']}/revert", method="POST", json={})
        healed = fire(project)
        assert (healed["outcome"], healed["prompt"], healed["failures"]) == ("ok", "hooks", []), healed
        assert project.engine_api("/v1/failures")["failures"] == []
        cleared = project.engine_api("/v1/failures")["cleared"]
        assert [f["id"] for f in cleared] == [failure["id"]]
        ticks = project.engine_api("/v1/heartbeat/ticks", params={"limit": 5})["ticks"]
        assert [t["outcome"] for t in ticks][:2] == ["ok", "degraded"]
        session = wait_for(
            "the heartbeat session's model",
            lambda: project.engine_api(f"/v1/sessions/{healed['session']}").get("model"),
        )
        assert session == {"providerID": "mock", "modelID": "mock"}
