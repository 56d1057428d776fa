"""End to end: the heartbeat against real opencode 1.18.33 (serve and run), the evolve shim, the engine
the shim starts, the example workspace and the mock LLM.

The heartbeat is configured in the workspace's config/evolve.jsonc before the engine starts
(`"model": "mock/mock"`, so that no tick is skipped for want of a model). Timer tests use a 1 s
interval and poll with deadlines; cleanup checks look at the ticks the engine keeps in its journal
(events of kind "heartbeat"), because the timer goes on ticking while the test looks.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from typing import Any

from evolve_demo.scripted_model import Reply, Request
from tests.e2e.conftest import Project, Serve, evolve, last_user_text, session_of
from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, without_settings
from tests.support.processes import pid_alive
from tests.support.waiting import wait_for

HEARTBEAT_TITLE = re.compile(r"^heartbeat \(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}\)$")
TICK_MS = 1000

# ---- helpers -----------------------------------------------------------------------------------------


def configure(project: Project, **fields: Any) -> None:
    """The workspace's config/evolve.jsonc: the example's defaults with `fields` over them (JSON is JSONC)."""
    config = {"model": "mock/mock", **fields}
    (project.ws / "config" / "evolve.jsonc").write_text(json.dumps(config, indent=2) + "\n")


def heartbeat_requests(project: Project) -> list[Request]:
    """The mock's chat requests made for a heartbeat prompt, oldest first."""
    return [r for r in project.mock.main_requests() if last_user_text(r).startswith("[heartbeat] ")]


def state(project: Project) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((project.ws / "state" / "evolve.json").read_text())
        return data
    except (OSError, ValueError):
        return {}


def ticks(project: Project) -> list[dict[str, Any]]:
    """The heartbeat ticks the engine recorded in its journal, oldest first."""
    with project.journal() as journal:
        return [e["data"] for e in reversed(journal.events(kind="heartbeat"))]


def connect(project: Project, server: Serve) -> None:
    """Make `opencode serve` load the plugin for the project (it does so on the first request for the
    directory), then wait until the engine knows this opencode."""
    server.request("GET", "/session")

    def connected() -> bool:
        if project.announcement() is None:
            return False
        try:
            return bool(project.engine_api("/v1/status")["opencode"])
        except Exception:
            return False

    wait_for("the engine to see opencode connected", connected, timeout=30, interval=0.2)


def heartbeat_cli(project: Project, action: str, timeout: float = 120) -> dict[str, Any]:
    """`python -m engine heartbeat ACTION --workspace WS` (exit 0 required), its JSON output."""
    proc = evolve("heartbeat", action, "--workspace", str(project.ws), timeout=timeout)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def pause(project: Project) -> None:
    """Stop the timer, wait until no tick runs and the journal holds the last one, so that what the
    test reads next stays put."""
    project.engine_api("/v1/heartbeat/pause", method="POST")

    def idle() -> dict[str, Any] | None:
        status: dict[str, Any] = project.engine_api("/v1/heartbeat")
        return None if status["running"] else status

    status = wait_for("the running tick to end", idle, timeout=30)
    last = status["last"]["started_at"] if status["last"] else None
    wait_for(
        "the last tick in the journal",
        lambda: last is None or any(t["started_at"] == last for t in ticks(project)),
        timeout=10,
    )


def first_cleanup(project: Project, timeout: float = 45) -> tuple[list[dict[str, Any]], int]:
    """Wait for the first tick that cleaned up (and then prompted), pause the timer, and return the
    ticks and the index of the cleaning one."""

    def found() -> tuple[list[dict[str, Any]], int] | None:
        done = ticks(project)
        for i, tick in enumerate(done):
            if tick.get("cleanup") and tick["outcome"] == "ok":
                return done, i
        return None

    _, index = wait_for("a heartbeat tick with a cleanup", found, timeout=timeout, interval=0.2)
    pause(project)
    return ticks(project), index


def prompted_sessions(project: Project) -> list[str]:
    return [session_of(r) for r in heartbeat_requests(project)]


# ---- timer ticks under `opencode serve --port` --------------------------------------------------------


def test_timer_tick_prompts_a_titled_session_with_the_heartbeat_system_prompt(project: Project) -> None:
    """The timer's tick reaches the LLM as `[heartbeat] <user>` (the example hook's heartbeat stage:
    prompts/heartbeat.md plus the notes count) with the hook's heartbeat system prompt, not the chat
    one, and with the tools; the session is created titled `heartbeat (<time>)`, so no title call."""
    configure(project, heartbeat_ms=TICK_MS)
    expected = project.stage("heartbeat", {"sessions": []})
    task = (project.ws / "prompts" / "heartbeat.md").read_text().strip()
    chat = (project.ws / "prompts" / "chat.md").read_text().strip()
    assert expected["user"] == f"{task}\nYou have 0 notes."
    (system,) = expected["system"]
    assert "This is a heartbeat" in system and chat not in system

    with project.serve() as server:
        connect(project, server)
        specs = project.engine_api("/v1/tools")["tools"]
        requests = wait_for("a heartbeat request", lambda: heartbeat_requests(project), timeout=30)
        first = requests[0]
        pause(project)
        sid = session_of(first)
        sessions = {s["id"]: s for s in server.request("GET", "/session")}

    assert last_user_text(first) == f"[heartbeat] {expected['user']}"
    assert first.system == expected["system"]
    assert {s["name"] for s in specs} <= set(first.tools)
    assert sid in sessions, sorted(sessions)
    assert HEARTBEAT_TITLE.match(sessions[sid]["title"]), sessions[sid]["title"]
    assert [r for r in project.mock.of_kind("title") if r.session == sid] == []
    tick = ticks(project)[0]
    assert (tick["trigger"], tick["outcome"], tick["session"]) == ("timer", "ok", sid)
    assert tick["model"] == {"providerID": "mock", "modelID": "mock"}
    assert state(project)["heartbeat_session"] == sid


def test_cleanup_new_after_count(project: Project) -> None:
    """`heartbeat_cleanup: "new"` after one heartbeat: the next tick starts a new session and prompts
    it; the state file's heartbeat_session follows."""
    configure(project, heartbeat_ms=TICK_MS, heartbeat_cleanup="new", heartbeat_cleanup_count=1)
    with project.serve() as server:
        connect(project, server)
        done, i = first_cleanup(project)
        titles = {s["id"]: s["title"] for s in server.request("GET", "/session")}

    cleanup = done[i]["cleanup"]
    old, new = cleanup["from_session"], cleanup["to_session"]
    assert (cleanup["mode"], cleanup["due_to"], cleanup["ok"]) == ("new", "count", True)
    assert old != new
    assert done[i - 1]["session"] == old and done[i]["session"] == new
    sessions = prompted_sessions(project)
    assert sessions.index(new) > 0 and set(sessions[: sessions.index(new)]) == {old}, sessions
    assert HEARTBEAT_TITLE.match(titles[new]) and old in titles
    assert state(project)["heartbeat_session"] == done[-1]["session"] != old


def test_cleanup_archive(project: Project) -> None:
    """`archive`: the old session gets time.archived in opencode, and a new session is used."""
    configure(project, heartbeat_ms=TICK_MS, heartbeat_cleanup="archive", heartbeat_cleanup_count=1)
    with project.serve() as server:
        connect(project, server)
        done, i = first_cleanup(project)
        cleanup = done[i]["cleanup"]
        old, new = cleanup["from_session"], cleanup["to_session"]
        old_info = server.request("GET", f"/session/{old}")
        new_info = server.request("GET", f"/session/{new}")

    assert (cleanup["mode"], cleanup["ok"]) == ("archive", True)
    assert old != new
    assert old_info["time"].get("archived"), old_info
    assert not new_info["time"].get("archived"), new_info
    sessions = prompted_sessions(project)
    assert sessions.index(new) > 0 and set(sessions[: sessions.index(new)]) == {old}, sessions


def test_cleanup_compact(project: Project) -> None:
    """`compact`: opencode summarises the heartbeat session (a compaction request for it reaches the
    mock) and the next heartbeat goes to the same session."""
    configure(project, heartbeat_ms=TICK_MS, heartbeat_cleanup="compact", heartbeat_cleanup_count=1)
    with project.serve() as server:
        connect(project, server)
        done, i = first_cleanup(project)

    cleanup = done[i]["cleanup"]
    assert (cleanup["mode"], cleanup["ok"]) == ("compact", True), cleanup
    sid = cleanup["from_session"]
    assert cleanup["to_session"] == sid
    compactions = project.mock.of_kind("compaction")
    assert compactions and all(session_of(r) == sid for r in compactions)
    assert compactions[0].system[0].startswith("You are a context summarization agent")
    sessions = prompted_sessions(project)
    assert len(sessions) >= i + 1 and set(sessions) == {sid}
    assert state(project)["heartbeat_session"] == sid


def test_cleanup_by_tokens(project: Project) -> None:
    """The token threshold is measured from opencode's stored token counts (the mock reports 11 + 3
    per reply): with a threshold of 10, the tick after the first heartbeat cleans up, due to tokens."""
    configure(project, heartbeat_ms=TICK_MS, heartbeat_cleanup="new", heartbeat_cleanup_tokens=10)
    with project.serve() as server:
        connect(project, server)
        wait_for("two heartbeat ticks", lambda: len(ticks(project)) >= 2, timeout=30, interval=0.2)
        pause(project)

    done = ticks(project)
    # A fresh session: its total after the tick's one reply (the gauge shows what the next tick compares).
    assert done[0]["outcome"] == "ok" and done[0]["tokens"] == 14, done[0]
    assert done[1]["outcome"] == "ok", done[1]
    cleanup = done[1]["cleanup"]
    assert cleanup is not None, done[1]
    assert (cleanup["mode"], cleanup["due_to"], cleanup["ok"]) == ("new", "tokens", True), cleanup
    assert cleanup["tokens"] >= 14 and cleanup["threshold"] == 10
    assert done[1]["tokens"] == 14  # the new session's, after its first reply
    assert cleanup["from_session"] == done[0]["session"] != cleanup["to_session"]
    assert prompted_sessions(project)[:2] == [cleanup["from_session"], cleanup["to_session"]]


# ---- manual fire: serve, run, and no opencode ---------------------------------------------------------


def test_fire_under_serve_then_unreachable_after_opencode_exits(project: Project) -> None:
    """`evolve heartbeat fire` under `opencode serve`: the tick runs and the mock gets the heartbeat.
    After opencode exits, a fire is skipped because opencode cannot be reached; the engine keeps
    running and `evolve heartbeat status` still answers."""
    configure(project)  # the default interval (30 min): only manual ticks
    with project.serve(own=True) as server:
        connect(project, server)
        fired = heartbeat_cli(project, "fire")
        assert fired["result"]["outcome"] == "ok", fired
        assert fired["result"]["trigger"] == "manual"
        (request,) = heartbeat_requests(project)
        assert session_of(request) == fired["result"]["session"]
        server.stop()

    found = project.announcement()
    assert found is not None
    fired = heartbeat_cli(project, "fire")
    result = fired["result"]
    assert result["outcome"] == "skipped", fired
    assert "unreachable" in result["reason"] or "not connected" in result["reason"], result
    assert len(heartbeat_requests(project)) == 1
    assert pid_alive(int(found["pid"]))
    status = heartbeat_cli(project, "status")
    assert status["last"]["outcome"] == "skipped"
    assert project.engine_api("/v1/health")["ok"]


def test_fire_under_opencode_run(project: Project) -> None:
    """`evolve heartbeat fire` while `opencode run` is answering: the heartbeat's prompt goes through
    the shim's proxy into that opencode process, and the mock receives the `[heartbeat]` request.
    (heartbeat_skip_active is off: the run's own session is busy.)"""
    configure(project, heartbeat_skip_active=False)
    release = threading.Event()

    def slow(req: Request) -> Reply:
        if last_user_text(req).startswith("[heartbeat] "):
            return Reply(text="Heartbeat done.")
        release.wait(60)  # the run's own answer waits until the heartbeat fired
        return Reply(text="The run's answer.")

    project.mock.script(slow, slow)
    proc = project.start_run("hello")
    try:
        wait_for(
            "the run's chat request",
            lambda: [r for r in project.mock.main_requests() if last_user_text(r) == "hello"],
            timeout=60,
        )
        modes = [c["mode"] for c in project.engine_api("/v1/status")["opencode"]]
        fired = heartbeat_cli(project, "fire")
        release.set()
        out, err = proc.communicate(timeout=60)
    except BaseException:
        release.set()
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, f"{out}\n{err}\n{project.shim_log()}"
    assert "The run's answer." in out
    assert modes == ["in-process"]
    assert fired["result"]["outcome"] == "ok", fired
    (request,) = heartbeat_requests(project)
    run_session = session_of(project.mock.main_requests()[0])
    assert session_of(request) == fired["result"]["session"] != run_session


# ---- pause and resume across an engine restart --------------------------------------------------------


def start_engine(project: Project) -> EngineProcess:
    """`python -m engine serve --workspace WS` in the background, answering before it is returned."""
    log = project.ws / "state" / "engine-test.log"
    return EngineProcess(project.ws, without_settings(), log, cwd=REPO).start(timeout=30)


def stop_engine(project: Project, engine: EngineProcess) -> None:
    evolve("stop", "--workspace", str(project.ws))
    try:
        engine.wait_exit(15)
    except subprocess.TimeoutExpired:
        engine.kill()
        raise AssertionError("the engine did not stop on `evolve stop`") from None


def test_pause_persists_across_an_engine_restart(project: Project) -> None:
    """`evolve heartbeat pause` is kept in the state file: a restarted engine is still paused until
    `evolve heartbeat resume`."""
    (project.ws / "state").mkdir(exist_ok=True)
    engine = start_engine(project)
    try:
        assert heartbeat_cli(project, "status")["paused"] is False
        assert heartbeat_cli(project, "pause")["paused"] is True
        stop_engine(project, engine)

        engine = start_engine(project)
        assert heartbeat_cli(project, "status")["paused"] is True
        assert heartbeat_cli(project, "resume")["paused"] is False
        assert state(project)["heartbeat_paused"] is False
        stop_engine(project, engine)
    finally:
        engine.kill()
