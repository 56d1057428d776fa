"""The replay key of the self-modifications view, driven with Pilot against a real engine (a subprocess)
on a real workspace: the replay runs in the engine, its progress and its result reach the screen, the
engine keeps the result, and the selected change shows its latest replay."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.message import Message
from textual.pilot import Pilot

from engine.protocol.records import FieldDiff, InputComparison, ReplayResult, StageComparison
from evolve_console.app import EvolveConsole
from evolve_console.diffview import DiffView
from evolve_console.replay import ReplayScreen, render_diff, report
from tests.console.conftest import StartEngine, select_row, wait_until, write_hook
from tests.console.test_actions import drive, edit_prompt, errors_shown, table
from tests.support.engine_process import EngineProcess
from tests.support.waiting import wait_for

FAST_HOOK = (
    f"#!{sys.executable}\n"
    + """import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "clock", "stages": ["mutate_request"]}))
elif stage == "mutate_request":
    print(json.dumps({"system": ["be quick"]}))
"""
)
SLOW_HOOK = FAST_HOOK.replace('print(json.dumps({"system": ["be quick"]}))', "import time; time.sleep(60)")


def record_requests(engine: EngineProcess, sessions: int) -> None:
    for i in range(sessions):
        engine.stage("mutate_request", {"session": {"id": f"ses_{i}"}, "system": ["x"]}, session=f"ses_{i}")


def shown(screen: ReplayScreen) -> str:
    """The screen's report as plain text."""
    assert screen.result is not None
    console = Console(file=io.StringIO(), width=200, record=True)
    console.print(report(screen.result))
    return console.export_text()


def pane(app: EvolveConsole) -> str:
    """What the self-modifications view's detail pane shows."""
    return app.query_one("#change-detail", DiffView).head.plain


def test_the_screen_cuts_unchanged_text_and_names_absent_fields_as_the_command_line_does() -> None:
    """The words come from engine.protocol.text; the screen keeps more around a change (160)."""
    drawn = render_diff([["=", "w " * 1000], ["-", "old"], ["+", "new"], ["=", " end"]])
    assert drawn.plain == "[… 1,840 unchanged characters …]" + "w " * 80 + "oldnew end"
    gone = FieldDiff("prompt", "compaction prompt", [["-", "Summarise."]], after_absent=True)
    result = ReplayResult(
        id="rpl_1",
        target="0123456789abcdef0123456789abcdef01234567",
        kind="commit",
        title="edit hook notes.py",
        state="done",
        stages=[
            StageComparison(
                stage="compacting",
                inputs=2,
                changed=1,
                failed=1,
                failed_after=1,
                comparisons=[
                    InputComparison("dsp_1", "changed", diffs=[gone]),
                    InputComparison("dsp_2", "failed", errors_after=["hooks/notes.py compacting: exit 1"]),
                ],
            )
        ],
    )
    console = Console(file=io.StringIO(), width=200, record=True)
    console.print(report(result))
    text = console.export_text()
    assert "commit 0123456789 “edit hook notes.py”" in text
    assert "compaction prompt (gone: the version after gives none)" in text
    assert "in dsp_2:\n  after: hooks/notes.py compacting: exit 1" in text


async def replay_screen(app: EvolveConsole, pilot: Pilot[Any]) -> ReplayScreen:
    await wait_until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay screen to open")
    assert isinstance(app.screen, ReplayScreen)
    return app.screen


def test_the_replay_key_replays_a_commit_and_shows_the_changed_words(engine: EngineProcess) -> None:
    record_requests(engine, 3)
    sha = edit_prompt(engine, "Answer plainly", "Answer tersely")["commit"]
    assert sha

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: sha in changes.rows, "the edit in the changes table")
        await select_row(pilot, changes, sha)
        await wait_until(
            pilot, lambda: "replay: none yet" in pane(app), "the detail pane to say there is no replay yet"
        )
        await pilot.press("e")
        screen = await replay_screen(app, pilot)
        await wait_until(
            pilot,
            lambda: screen.result is not None and screen.result.state == "done",
            lambda: f"the replay to finish (status: {screen.result.state if screen.result else None})",
            timeout=60,
        )
        assert screen.result is not None
        requests = {s.stage: s for s in screen.result.stages}["mutate_request"]
        assert (requests.inputs, requests.changed) == (3, 3)
        text = shown(screen)
        assert "mutate_request: 3 of 3 results changed" in text, text
        assert "in 3 inputs" in text and "system prompt" in text, text
        # The words themselves: the removed one struck out in red, the added one in green.
        drawn = render_diff(requests.comparisons[0].diffs[0].segments)
        marked = {drawn.plain[s.start : s.end]: str(s.style) for s in drawn.spans}
        assert marked == {"plainly": "bold red strike", "tersely": "bold green"}, marked
        assert "Answer plainlytersely and briefly" in drawn.plain
        kept = engine.get(f"/v1/changes/{sha}/replay")
        assert (kept["id"], kept["state"]) == (screen.replay_id, "done")

        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ReplayScreen), "the screen to close")
        await wait_until(
            pilot,
            lambda: "mutate_request 3 of 3 changed" in pane(app),
            "the detail pane to show the latest replay",
        )

    seen = drive(engine, scenario)
    assert not errors_shown(seen)


def test_a_pending_change_is_replayed_when_held_and_a_replay_can_be_cancelled(
    workspace: Path, start_engine: StartEngine
) -> None:
    write_hook(workspace, "clock.py", FAST_HOOK)
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    record_requests(engine, 2)
    out = edit_prompt(engine, "Answer plainly", "Answer tersely", origin="tool", session="ses_agent")
    assert "awaits review" in out["output"], out
    [pending] = [p["id"] for p in engine.get("/v1/changes")["pending"]]

    def replayed() -> bool:
        found = engine.request("GET", f"/v1/pending/{pending}/replay", check=False)
        return found.status_code == 200 and found.json().get("state") == "done"

    # The engine replays the held change by itself; the slow hook below comes after that replay (on a
    # busy machine it could otherwise start late, with the slow hook already in the workspace).
    wait_for("the held change's own replay", replayed, timeout=60)
    # A slow hook, installed by the operator (not held): its replay takes a minute unless cancelled.
    engine.call_tool("evolve_hook_write", {"hook": "clock.py", "content": SLOW_HOOK}, origin="operator")
    slow = engine.head()

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        changes = table(app, "changes")
        await wait_until(pilot, lambda: pending in changes.rows, "the pending change in the table")
        await select_row(pilot, changes, pending)
        # The engine replayed it when it was held; the reviewer sees it without asking.
        await wait_until(
            pilot,
            lambda: "mutate_request 2 of 2 changed" in pane(app),
            lambda: f"the held change's replay in the detail pane ({pane(app)!r})",
            timeout=60,
        )
        assert engine.get(f"/v1/pending/{pending}/replay")["state"] == "done"

        await select_row(pilot, changes, slow)
        await pilot.press("e")
        screen = await replay_screen(app, pilot)
        await wait_until(pilot, lambda: screen.replay_id is not None, "the replay to start")
        await pilot.press("c")
        await wait_until(
            pilot,
            lambda: screen.result is not None and screen.result.state == "cancelled",
            lambda: f"the replay to be cancelled ({screen.result.state if screen.result else None})",
            timeout=30,
        )
        assert engine.get(f"/v1/replays/{screen.replay_id}")["state"] == "cancelled"
        await pilot.press("escape")

    seen = drive(engine, scenario)
    assert not errors_shown(seen)
