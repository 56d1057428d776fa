"""One command connects a real model, end to end: `evolve opencode model` merges an OpenAI-compatible
provider into a project's opencode.json (the plugin entry and every other setting untouched, bad input
refused in one line with nothing written), `evolve doctor --project` says that the model answers (one
small streamed request: its latency and the server's model name), and then real opencode talks to
that server with the key from the environment: the agent answers with evolve's prompt and tools, and
the console shows the session. The server is the scripted model (an OpenAI-compatible server that
streams), standing for a local llama.cpp, vLLM or Ollama server."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from typing import Any

from evolve_console.app import EvolveConsole
from evolve_console.client import Target
from evolve_demo.scripted_model import Reply
from tests.console.conftest import table, wait_until
from tests.e2e.conftest import Project, evolve, hook_system, session_of
from tests.support.environment import EVOLVE, REPO, without_settings

KEY = "E2E_MODEL_KEY"


def shim_only(make_project: Callable[..., Project]) -> Project:
    """A project as `evolve shim install` leaves it, plus a setting of the user's: no model yet."""
    project = make_project()
    path = project.dir / "opencode.json"
    config = json.loads(path.read_text())
    for key in ("provider", "model", "small_model"):
        config.pop(key, None)
    config["autoupdate"] = False
    path.write_text(json.dumps(config, indent=2) + "\n")
    return project


def evolve_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EVOLVE, *args], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)


def test_one_command_connects_a_model_that_doctor_checks_and_opencode_uses(
    make_project: Callable[..., Project],
) -> None:
    project = shim_only(make_project)
    path = project.dir / "opencode.json"
    before = json.loads(path.read_text())
    url = project.mock.url

    # Bad input: one line, exit 2, nothing written.
    for bad, says in [
        (["--base-url", "127.0.0.1:8080/v1", "--model", "m"], "is not an http:// or https:// URL"),
        (
            ["--base-url", url, "--model", "m", "--api-key-env", "sk-live-1234567890abcdef"],
            "not the key itself",
        ),
        (["--base-url", url, "--model", "two words"], "is not a model name"),
    ]:
        refused = evolve("opencode", "model", "--project", str(project.dir), *bad, check=False)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and says in refused.stderr, (
            refused.stderr
        )
        assert json.loads(path.read_text()) == before

    done = evolve(
        "opencode", "model", "--project", str(project.dir), "--base-url", url, "--model", "my-model",
        "--api-key-env", KEY,
    )  # fmt: skip
    assert json.loads(done.stdout)["model"] == "llm/my-model"
    after = json.loads(path.read_text())
    assert {
        k: v for k, v in after.items() if k not in ("provider", "model")
    } == before  # plugin, agent, autoupdate
    assert after["model"] == "llm/my-model"
    assert after["provider"]["llm"]["options"] == {"baseURL": url, "apiKey": "{env:E2E_MODEL_KEY}"}
    assert after["provider"]["llm"]["models"] == {"my-model": {"name": "my-model"}}
    again = evolve(
        "opencode", "model", "--project", str(project.dir), "--base-url", url, "--model", "my-model",
        "--api-key-env", KEY,
    )  # fmt: skip
    assert json.loads(again.stdout)["changed"] is False

    # The doctor asks the model once, as opencode would: streamed, with the key from the environment.
    env = {**without_settings(), KEY: "sk-from-the-environment"}
    checked = evolve_with(env, "doctor", "--workspace", str(project.ws), "--project", str(project.dir))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    said = [line for line in checked.stdout.splitlines() if line.startswith("info    model: ")]
    assert len(said) == 1 and said[0].startswith("info    model: llm/my-model answered in "), checked.stdout
    assert said[0].endswith(f" s at {url} (the server's model: mock): 'ok'"), said
    asked = project.mock.main_requests()[-1]
    assert asked.body["model"] == "my-model" and asked.body["stream"] is True
    assert asked.headers.get("authorization") == "Bearer sk-from-the-environment"

    # Without the key in the environment the doctor says so; with the server gone, that it does not answer.
    keyless = evolve_with(
        without_settings(), "doctor", "--workspace", str(project.ws), "--project", str(project.dir)
    )
    assert f"warning model: {KEY} is not set in this environment" in keyless.stdout, keyless.stdout

    # Real opencode with that configuration: the agent answers, with evolve's prompt and tools.
    project.mock.script(Reply(text="Hello from my-model."))
    asked_before = len(project.mock.main_requests())
    ran = subprocess.run(
        project.run_argv(("hello",)),
        cwd=project.dir,
        env={**project.env, KEY: "sk-from-the-environment"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "Hello from my-model." in ran.stdout
    chat = project.mock.main_requests()[asked_before:]
    assert chat, "opencode sent nothing to the configured server"
    assert {r.body["model"] for r in chat} == {"my-model"}
    assert {r.headers.get("authorization") for r in chat} == {"Bearer sk-from-the-environment"}
    assert hook_system(project)[0] in "\n".join(chat[0].system)
    assert "notes_add" in chat[0].tools
    sid = session_of(chat[0])
    project.settle()

    # The console shows that session.
    found = project.announcement()
    assert found is not None

    async def console() -> Any:
        app = EvolveConsole(Target(found["url"], found["token"], str(project.ws)))
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_until(pilot, lambda: app.engine_connected, "connected")
            await pilot.press("3")
            rows = table(app, "sessions")
            await wait_until(pilot, lambda: sid in rows.rows, "the session in view 3")

    asyncio.run(console())

    # The server gone: the doctor says the model does not answer, and exits 1.
    project.mock.close()
    gone = evolve_with(env, "doctor", "--workspace", str(project.ws), "--project", str(project.dir))
    assert gone.returncode == 1
    assert (
        f"error   model: llm/my-model at {url} does not answer: nothing answers there (connection refused)"
        in gone.stdout
    )
