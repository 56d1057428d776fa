"""Services stand alone: each is built from its own dependencies, in order, without an Engine, and
works (real workspace made by `evolve init`, real git, real hooks, real event bus). What the engine
wires through the bus (a held change replayed, the heartbeat following opencode) is what a caller
that needs it wires the same way."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from engine.changes.commits import Commits
from engine.changes.gitstore import GitStore
from engine.changes.history import ChangeError, Changes
from engine.changes.pending import PendingChanges, when_held
from engine.core.activity import Activity
from engine.core.background import Background
from engine.core.bus import EventBus
from engine.heartbeat.service import Heartbeat
from engine.hooks.hookrun import HookRunner
from engine.hooks.registry import HookRegistry
from engine.hooks.stages import Stages
from engine.opencode.connections import Connections, OpencodeSessions
from engine.opencode.followups import Followups
from engine.opencode.models import ModelMemory
from engine.opencode.notifier import Notifier
from engine.opencode.sessions import SessionStore
from engine.protocol.events import EventKind
from engine.protocol.records import PendingChange
from engine.tools.toolbox import Tools
from engine.workspace.config import Config, load_config
from engine.workspace.layout import StateFile, Workspace
from engine.workspace.locks import WorkspaceLock

PROMPT_EDIT = {"prompt": "chat.md", "oldString": "plainly and briefly", "newString": "plainly, with care"}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "engine", "init", str(root)], check=True, capture_output=True)
    return root


@dataclass
class Parts:
    """The services of one workspace, each built from the ones before it."""

    workspace: Workspace
    bus: EventBus
    commits: Commits
    pending: PendingChanges
    changes: Changes
    stages: Stages
    heartbeat: Heartbeat
    tools: Tools
    warnings: list[str]


def build(root: Path, config: Callable[[], Config]) -> Parts:
    ws = Workspace(root)
    ws.ensure_state_dir()
    bus, activity, warnings = EventBus(), Activity(), []

    def warn(source: str, message: str) -> None:
        warnings.append(f"{source}: {message}")

    runner = HookRunner(root=root, config=config, env={}, journal=None, bus=bus)
    registry = HookRegistry(ws.hooks_dir, runner.run, bus, warn)
    pending = PendingChanges(ws.state_dir / "pending", bus)
    git = GitStore(root)
    commits = Commits(
        git=git, lock=WorkspaceLock(ws.state_dir / "write.lock"), bus=bus, activity=activity, warn=warn
    )
    sessions = SessionStore(None, bus.publish)
    stages = Stages(
        workspace=ws,
        hooks_for=registry.hooks_for,
        run_hook=runner.run,
        history=sessions.history,
        settle=commits.settle,
        journal=None,
        bus=bus,
        activity=activity,
    )
    notifier = Notifier(dispatch=stages.dispatch, sessions=sessions, deliver=None, bus=bus, warn=warn)
    connections = Connections(bus)
    background = Background(bus, activity)
    followups = Followups(
        notify=notifier.notify, connections=connections, config=config, background=background, bus=bus
    )
    state = StateFile(ws.state_file)

    async def nothing_reloaded(files: list[str]) -> None:
        pass

    changes = Changes(
        workspace=ws,
        commits=commits,
        pending=pending,
        bus=bus,
        activity=activity,
        files_changed=nothing_reloaded,
        tell=lambda session, message, change: notifier.notify(None, [message], [session], change),
        sessions=lambda: [s.info() for s in sessions.known()],
        refresh=sessions.unfreeze,
    )
    heartbeat = Heartbeat(
        config=config,
        state=state,
        journal=None,
        bus=bus,
        dispatch=stages.dispatch,
        sessions=sessions,
        after_result=followups.after_result,
        commits=commits,
        model=ModelMemory(config, state).current,
        prompt=lambda: ws.read_prompt("heartbeat"),
        activity=activity,
        opencode=OpencodeSessions(connections),
    )
    tools = Tools(
        workspace=ws,
        config=config,
        env={},
        registry=registry,
        call_one=stages.call_one,
        commits=commits,
        hold=pending.hold,
        notify=notifier.notify,
        heartbeat_time=lambda: state.read().get("heartbeat_time"),
        session_title=lambda session: None,
        journal=None,
        bus=bus,
        activity=activity,
        heartbeat=heartbeat,
    )
    return Parts(ws, bus, commits, pending, changes, stages, heartbeat, tools, warnings)


def test_changes_with_a_real_git_store_record_approve_and_revert_a_tool_s_edit(ws: Path) -> None:
    async def main() -> None:
        parts = build(ws, lambda: load_config(ws / "config" / "evolve.jsonc", {}).config)
        call = await parts.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="ses_a", origin="tool")
        assert call.error is None and call.commit is not None
        edit = parts.changes.change(call.commit)
        assert (edit.origin, edit.state, edit.files) == ("agent", "unreviewed", ["prompts/chat.md"])
        approved = await parts.changes.approve(edit.sha, "bob")
        assert approved.sha == edit.sha and approved.review.startswith("approved by bob")
        reverted = await parts.changes.revert(edit.sha)
        assert reverted.reverted == [edit.sha] and reverted.files == ["prompts/chat.md"]
        assert "plainly and briefly" in (ws / "prompts" / "chat.md").read_text()
        assert parts.changes.change(edit.sha).state == "reverted"
        diff = parts.changes.diff(reverted.sha).diff
        assert "\n-You are talking with the person you work for. Answer plainly, with care." in diff
        assert "\n+You are talking with the person you work for. Answer plainly and briefly." in diff
        await parts.commits.close()

    asyncio.run(main())


def test_under_the_gate_a_held_change_is_reviewed_with_its_diff_and_its_listener_hears_of_it(
    ws: Path,
) -> None:
    async def main() -> None:
        gated = replace(load_config(ws / "config" / "evolve.jsonc", {}).config, review="gate")
        parts = build(ws, lambda: gated)
        held: list[PendingChange] = []
        parts.bus.listen(when_held(held.append))  # how the engine has its replayer hear of it
        before = (ws / "prompts" / "chat.md").read_text()
        call = await parts.tools.call("evolve_prompt_edit", PROMPT_EDIT, session="ses_a", origin="tool")
        assert call.pending is not None and call.commit is None
        assert (ws / "prompts" / "chat.md").read_text() == before, "held, not written"
        assert [p.id for p in held] == [call.pending]
        review = parts.changes.review(call.pending)
        assert review.file == "prompts/chat.md" and review.content is not None
        assert "-" in review.diff and "+" in review.diff and "plainly, with care" in review.diff
        assert review.diff.startswith("--- a/prompts/chat.md\n+++ b/prompts/chat.md\n")
        approved = await parts.changes.approve_pending(call.pending, "bob")
        assert approved.status == "approved" and approved.commit is not None
        assert "plainly, with care" in (ws / "prompts" / "chat.md").read_text()
        assert held == held[:1], "a decision is not heard as a new hold"
        with pytest.raises(ChangeError, match="already approved"):
            await parts.changes.reject_pending(call.pending)
        await parts.commits.close()

    asyncio.run(main())


def test_the_heartbeat_and_its_tools_work_without_an_engine(ws: Path) -> None:
    async def main() -> None:
        parts = build(ws, lambda: load_config(ws / "config" / "evolve.jsonc", {}).config)
        ticks = []
        parts.bus.listen(lambda e: ticks.append(e.data) if e.kind == EventKind.HEARTBEAT else None)
        await parts.heartbeat.pause()
        assert parts.heartbeat.status().paused
        await parts.heartbeat.resume()
        assert not parts.heartbeat.status().paused
        result = await parts.heartbeat.fire("manual")
        assert (result.trigger, result.outcome) == ("manual", "skipped")
        assert result.reason is not None and "no opencode connected" in result.reason
        assert parts.heartbeat.status().last == result
        assert [t["event"] for t in ticks][-2:] == ["tick_started", "tick"]
        told = await parts.tools.call("evolve_heartbeat_status", {}, origin="operator")
        assert told.error is None and told.output == parts.heartbeat.describe()
        chosen = await parts.tools.call("evolve_heartbeat_set", {"interval_ms": 120_000}, origin="tool")
        assert chosen.error is None and parts.heartbeat.status().interval_ms == 120_000
        await parts.commits.close()

    asyncio.run(main())
