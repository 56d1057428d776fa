"""Hooks as other projects write them, with no configuration: one written to hcp like hcp's own example
(tests/fixtures/hcp_hello.py: no `stages`, canonical names, exit 0 with no output on a stage it does
not handle) and one written for opencode-evolve like a production persona hook
(tests/fixtures/persona_strict.py: old names, `{"error": "unknown hook: <stage>"}` and exit 1 on any
other). Each is served as its own protocol, from evidence that costs it nothing; an ambiguous choice is
shown with the config line that settles it; a test named as hcp names it (relative to `cwd`) is found.
Real engines and hook processes; no opencode (tests/e2e/test_hcp_unconfigured.py has that).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from engine.cli.doctor import diagnose
from engine.hooks.protocols import fired_stages, settle_line
from engine.protocol.stages import HookProtocol
from engine.runtime import Engine
from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env, without_settings
from tests.support.fixture_hooks import PERSONA_KNOWS, hello_log, install, persona_log, settled
from tests.support.in_process import run_engine
from tests.support.waiting import wait_for

T = TypeVar("T")
pytestmark = pytest.mark.hooks


def run(ws: Path, body: Callable[[Engine], Awaitable[T]]) -> T:
    return cast(T, run_engine(ws, body, without_settings()))


def test_hello_is_served_as_hcp_and_persona_as_opencode_evolve_with_no_configuration(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    install(ws, "hcp_hello.py", "hello.py")
    install(ws, "persona_strict.py", "persona.py")

    async def body(engine: Engine) -> dict[str, Any]:
        out: dict[str, Any] = {"regs": dict(engine.registry.registrations), "status": engine.status()}
        bridge, tools = engine.bridge, engine.tool_stages
        out["system"] = await bridge.system("ses_1", ["You are opencode."])
        out["deny"] = await tools.before_tool("ses_1", "read", "c1", {"filePath": "/etc/secret.txt"}, False)
        tools.tool_failed("ses_1", "c1", "read", "HELLO-DENY: secrets stay closed")
        out["pass"] = await tools.before_tool("ses_1", "read", "c2", {"filePath": "/tmp/notes.txt"}, False)
        out["after"] = await tools.after_tool(
            "ses_1", "read", "c2", {"filePath": "/tmp/notes.txt"}, "read", "key: SECRET-TOKEN\n", True
        )
        await bridge.assistant_finished(
            "ses_1", {"id": "m1", "agent": "build"}, [{"type": "text", "text": "Done."}]
        )
        await engine.notifier.notify("ses_1", ["a note"])
        await settled(engine)
        assert engine.journal is not None
        out["failed"] = [(r.hook, r.stage, r.error) for r in engine.journal.runs(failed=True)]
        return out

    out = run(ws, body)
    hello, persona = out["regs"]["hello.py"], out["regs"]["persona.py"]
    assert hello.protocol is HookProtocol.HCP and hello.protocol_settle is None
    assert hello.protocol_reason == (
        "it declares no stages and its file names after_tool, after_turn, before_stop, before_tool (hcp stage names)"
    )
    assert hello.test == "hello_test.py" and [t.name for t in hello.tools] == ["hello_note"]
    assert persona.protocol is HookProtocol.OPENCODE_EVOLVE and persona.protocol_settle is None
    assert persona.protocol_reason == (
        "it declares no stages and its file names idle, tool_after, tool_before (opencode-evolve stage names)"
    )
    assert out["status"].config_warnings == []  # nothing ambiguous to show

    # hello: asked as opencode-evolve asks, then, its file naming hcp's stages, with the base payload.
    first, second = hello_log(ws, "discover")
    assert first == {"hook": "discover"}
    assert list(second)[:4] == ["hook", "session", "host", "cwd"]
    assert second["host"] == {"name": "evolve", "version": 3, "stages": fired_stages()}
    assert second["cwd"] == str(ws)

    # Each hook's answer as its protocol says: persona's system replaces opencode's, hello's is appended.
    assert out["system"].system == [
        "PERSONA: you are a calm, precise assistant.",
        f"HELLO-HCP: hosted by evolve v3 in {ws}",
    ]
    assert out["deny"] == {"deny": "HELLO-DENY: secrets stay closed"}
    assert out["pass"] == {}
    assert out["after"] == {"result": "key: [redacted by hello]\n"}
    stages = [p["hook"] for p in hello_log(ws)]
    assert {"mutate_request", "before_tool", "after_tool", "after_turn", "before_stop"} <= set(stages)
    assert not {"idle", "tool_before", "tool_after"} & set(stages)
    for payload in hello_log(ws)[1:]:
        assert payload["host"]["version"] == 3 and payload["cwd"] == str(ws), payload
    (stop,) = hello_log(ws, "before_stop")
    assert stop["exit_reason"] == "stop" and stop["answer"] == "Done."

    # persona: only names it knows, every one of them answered (no run failed, none exited 1).
    seen = persona_log(ws)
    assert set(seen) <= PERSONA_KNOWS, seen
    assert {"discover", "mutate_request", "tool_before", "tool_after", "observe_message", "idle"} <= set(seen)
    assert "format_notification" in seen
    assert out["failed"] == []


def test_an_ambiguous_choice_is_shown_with_its_settling_line_and_the_config_settles_it(
    tmp_path: Path,
) -> None:
    """A wrapper script names no stage: opencode-evolve (its names are never unknown to a hook that
    handles them), and the choice is shown in the engine log, the status (which the console shows) and
    `evolve doctor`; the config line settles it, at once."""
    ws = tmp_path / "ws"
    real = install(ws, "hcp_hello.py", "hello.py", where="lib")
    wrapper = ws / "hooks" / "wrapper.sh"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    notice = (
        "hooks/wrapper.sh: treated as opencode-evolve: it declares no stages and its file names no stage "
        "only one protocol has (ambiguous; opencode-evolve, the original protocol, which never sends a "
        f"hook a name it may not know); {settle_line('wrapper.sh')}"
    )

    report = asyncio.run(diagnose(ws, without_settings()))
    infos = [f.message for f in report.findings if f.where == "hooks/wrapper.sh" and f.level == "info"]
    assert infos == [notice.split(": ", 1)[1]]
    assert report.hooks[0]["protocol_settle"] == settle_line("wrapper.sh")

    engine = EngineProcess(ws, isolated_env(tmp_path / "home"), tmp_path / "engine.log", cwd=REPO).start()
    try:
        status = engine.get("/v1/status")
        assert status["config_warnings"] == [notice]
        (hook,) = status["hooks"]
        assert (hook["protocol"], hook["protocol_settle"]) == ("opencode-evolve", settle_line("wrapper.sh"))
        assert f"WARNING evolve.hooks: {notice}" in engine.log.read_text(encoding="utf-8")

        (ws / "config").mkdir()
        (ws / "config" / "evolve.jsonc").write_text(
            '{"hook_protocols": {"wrapper.sh": "hcp"}}', encoding="utf-8"
        )

        def settled_status() -> dict[str, Any] | None:
            found = engine.get("/v1/status")
            return found if found["hooks"][0]["protocol"] == "hcp" else None

        status = wait_for("the config to settle the choice", settled_status, timeout=20)
        assert status["config_warnings"] == []
        assert status["hooks"][0]["protocol_reason"] == "hook_protocols in the config says hcp"
        assert status["hooks"][0]["protocol_settle"] is None
    finally:
        engine.stop()
    assert hello_log(ws, "discover")[-1]["host"]["version"] == 3  # asked as hcp once the config says so


def test_a_test_named_relative_to_the_workspace_root_validates_an_edit(tmp_path: Path) -> None:
    """hcp names a hook's test as a command relative to `cwd` (the workspace root), opencode-evolve as
    a file in tests/: `tests/guard_check.sh` is that file either way. A test outside tests/ is refused
    (docs/hooks.md), by validation and by `evolve doctor` alike."""
    ws = tmp_path / "ws"
    hook = ws / "hooks" / "guard.sh"
    hook.parent.mkdir(parents=True)
    hook.write_text('#!/bin/sh\n[ "$1" = discover ] && echo \'{"test": "tests/guard_check.sh"}\'\nexit 0\n')
    hook.chmod(0o755)
    check = ws / "tests" / "guard_check.sh"
    check.parent.mkdir()
    check.write_text('#!/bin/sh\nif grep -q BAD hooks/guard.sh; then echo "FAIL: BAD"; exit 1; fi\necho ok\n')
    check.chmod(0o755)

    async def body(engine: Engine) -> tuple[Any, Any]:
        bad = await engine.tools.call(
            "evolve_hook_validate", {"hook": "guard.sh", "content": "#!/bin/sh\n# BAD\n"}
        )
        good = await engine.tools.call("evolve_hook_validate", {"hook": "guard.sh", "content": "#!/bin/sh\n"})
        return bad.output, good.output

    bad, good = run(ws, body)
    assert bad == "validation failed:\nFAIL: BAD\n"
    assert good == "validation passed"
    report = asyncio.run(diagnose(ws, without_settings()))
    assert [f for f in report.findings if f.where == "hooks/guard.sh" and f.level == "error"] == []

    outside = ws / "checks" / "guard_check.sh"
    outside.parent.mkdir()
    outside.write_text(check.read_text())
    outside.chmod(0o755)
    hook.write_text(hook.read_text().replace("tests/guard_check.sh", "checks/guard_check.sh"))
    refused, _ = run(ws, body)
    assert refused.startswith("validation failed:") and "leads out of tests/" in refused, refused
    report = asyncio.run(diagnose(ws, without_settings()))
    errors = [f.message for f in report.findings if f.where == "hooks/guard.sh" and f.level == "error"]
    assert len(errors) == 1 and "leads out of tests/" in errors[0], errors


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("EVOLVE_", "OPENCODE_")):
            monkeypatch.delenv(key)
