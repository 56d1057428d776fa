"""End to end, behaviour checks in the console: against real opencode 1.18.33 and the scripted model
of the demo's story, the agent's prompt edit "never delete a note" is checked with `b` in view 5.
Checks under way are cancelled with `c` (every process they started ends, no copy is left); run
again, they show the regression on the change (the summary, "forget a note" passed before and fails
after, the expectation that failed, the two answers with the changed words marked), in the screen
and in the change's detail; the operator then reverts it."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console
from textual.message import Message
from textual.widgets import Static

from evolve_console.app import EvolveConsole
from evolve_console.diffview import DiffView
from evolve_console.evals import EvalScreen
from evolve_console.screens import RevertScreen
from evolve_demo import story
from tests.console.conftest import connected, select_row, settle, table, text_of, wait_until
from tests.e2e.conftest import Project
from tests.e2e.test_evals import EVAL_TIMEOUT, chat_edit, copies_left, playing
from tests.e2e.test_heartbeat import connect
from tests.e2e.test_operator import target
from tests.support.waiting import wait_for

SUMMARY = 'evals 5/5 → 4/5: "forget a note" fails after'


def shown(widget: Static) -> str:
    """The text a Static holding a Rich renderable (a table, a group) shows."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def test_b_checks_the_prompt_edit_that_makes_the_agent_refuse_and_the_operator_reverts_it(
    project: Project,
) -> None:
    playing(project)
    with project.serve() as server:
        connect(project, server)  # the engine starts (and makes the workspace's first commit)
        bad = chat_edit(project, server, story.OPENING[5])
        assert story.KEEP_RULE in (project.ws / "prompts" / "chat.md").read_text()

        async def console() -> None:
            seen: list[Message] = []
            app = EvolveConsole(target(project))
            async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
                await connected(pilot)
                await pilot.press("5")
                changes = table(app, "changes")
                await wait_until(pilot, lambda: bad in changes.rows, "the prompt edit")
                await select_row(pilot, changes, bad)

                # b, then c while they run: cancelled, and nothing of theirs is left.
                await pilot.press("b")
                screen = await wait_until(
                    pilot, lambda: isinstance(app.screen, EvalScreen) and app.screen, "b"
                )
                assert isinstance(screen, EvalScreen)
                status = screen.query_one("#eval-status")
                await wait_until(pilot, lambda: screen.eval_id is not None, "the checks started")
                await wait_until(pilot, lambda: text_of(status) != "starting…", "their progress", timeout=60)
                await pilot.press("c")
                await wait_until(
                    pilot,
                    lambda: screen.result is not None and screen.result.state == "cancelled",
                    lambda: f"the checks cancelled (status {text_of(status)!r})",
                    timeout=60,
                )
                await asyncio.to_thread(
                    wait_for, "no copy left", lambda: not copies_left(project), timeout=30
                )
                await pilot.press("escape")

                # b again: the regression, in the screen.
                await pilot.press("b")
                screen = await wait_until(
                    pilot, lambda: isinstance(app.screen, EvalScreen) and app.screen, "b"
                )
                assert isinstance(screen, EvalScreen)
                await wait_until(
                    pilot,
                    lambda: screen.result is not None and screen.result.state != "running",
                    lambda: f"the checks' end ({text_of(screen.query_one('#eval-status'))!r})",
                    timeout=EVAL_TIMEOUT,
                )
                result = screen.result
                assert result is not None and result.state == "done", result
                assert result.summary == SUMMARY and result.regressed == ["forget a note"]
                report = shown(screen.query_one("#eval-report", Static))
                assert SUMMARY in report and "forget a note: REGRESSED" in report
                assert "failed after: calls notes_forget: no call of notes_forget" in report
                await pilot.press("escape")

                # The change's detail: the line, each scenario, the answers with the changes marked.
                detail = app.query_one("#change-detail", DiffView)
                await wait_until(pilot, lambda: SUMMARY in detail.head.plain, "the detail's checks")
                head = detail.head.plain
                assert "  forget a note: before 1/1, after 0/1 REGRESSED" in head
                assert "  count the notes: before 1/1, after 1/1 passes" in head
                assert "answer before: Well done: I dropped it" in head
                marked = [s for s in detail.head.spans if "strike" in str(s.style) or "green" in str(s.style)]
                assert any("I keep notes permanently" in head[s.start : s.end] for s in marked), (
                    "the words the answer gained are marked"
                )

                await pilot.press("r")
                await wait_until(pilot, lambda: isinstance(app.screen, RevertScreen), "the revert dialog")
                await pilot.press("y")
                await wait_until(
                    pilot,
                    lambda: f"Evolve-Reverts: {bad}" in project.git("log", "-1", "--format=%B"),
                    "the revert",
                    timeout=30,
                )
                await settle(pilot)

        asyncio.run(console())
    assert story.KEEP_RULE not in (project.ws / "prompts" / "chat.md").read_text()
