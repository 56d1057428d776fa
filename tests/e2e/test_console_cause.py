"""End to end, the console's half of "point at the cause": against real opencode 1.18.33 and the
scripted model, the agent's hook edit passes its test and breaks the heartbeat. The console, attached
to that engine, fires a tick (`f`): its toast says `degraded` and why; the alert names that edit and
the exception; view 4 says the same; the key from the alert (`R`) reverts it (the revert dialog,
`y`); the next tick is `ok` again, and the heartbeat session shows the model its ticks use."""

from __future__ import annotations

import asyncio

from textual.message import Message
from textual.notifications import Notify

from evolve_console.app import EvolveConsole
from evolve_console.screens import RevertScreen
from evolve_console.section import Section
from evolve_demo.scripted_model import Reply
from tests.console.conftest import connected, select_row, settle, table, text_of, wait_until
from tests.e2e.conftest import Project
from tests.e2e.test_failure_cause import NEW, OLD, REASON, TYPE_ERROR
from tests.e2e.test_heartbeat import configure, connect
from tests.e2e.test_operator import target

TICK_S = 180.0  # a tick through opencode and the scripted model, on a busy machine


def said(seen: list[Message]) -> list[tuple[str, str, str]]:
    return [
        (m.notification.severity, m.notification.title, m.notification.message)
        for m in seen
        if isinstance(m, Notify)
    ]


def test_the_console_names_the_edit_that_broke_the_heartbeat_and_its_key_reverts_it(project: Project) -> None:
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
        assert change["subject"] == "edit hook notes.py" and change["provenance"]["validation"]["ok"]
        sha = change["sha"]

        async def console() -> None:
            seen: list[Message] = []
            app = EvolveConsole(target(project))
            async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
                await connected(pilot)
                await pilot.press("4", "f")
                tick = await wait_until(
                    pilot,
                    lambda: [n for n in said(seen) if n[2].startswith("heartbeat ")],
                    lambda: f"the tick's toast ({said(seen)})",
                    timeout=TICK_S,
                )
                (severity, title, text) = tick[0]
                assert severity == "warning" and text.startswith(
                    f"heartbeat degraded: hooks/notes.py failed at heartbeat: {TYPE_ERROR}; the message came from"
                ), tick
                assert title == f"j: show {sha[:7]} · R: revert it"
                alert = await wait_until(
                    pilot, lambda: [n for n in said(seen) if "started failing" in n[2]], "the alert"
                )
                (failure,) = project.engine_api("/v1/failures")["failures"]
                assert alert == [
                    (
                        "warning",
                        f"a hook started failing · j: show {sha[:7]} · R: revert it",
                        failure["message"],
                    )
                ]
                assert failure["message"].startswith(
                    f"hooks/notes.py started failing at heartbeat: {TYPE_ERROR} (since {sha[:7]}, agent, "
                )
                assert failure["message"].endswith('session "Errands")')
                last = app.query_one("#hb-last", Section)
                await wait_until(pilot, lambda: ": degraded" in last.full_text, "view 4: degraded")
                assert f"failed: hooks/notes.py at heartbeat: {TYPE_ERROR}" in last.full_text
                assert f"the change behind it: since {sha[:7]}, agent, " in last.full_text
                assert "degraded: hooks/notes.py failed at heartbeat" in text_of(app.query_one("#hb-summary"))

                # R: the change the alert names, in view 5, and the revert dialog; y reverts it.
                await pilot.press("R")
                screen = await wait_until(
                    pilot, lambda: isinstance(app.screen, RevertScreen) and app.screen, "the revert dialog"
                )
                assert isinstance(screen, RevertScreen) and screen.question.startswith(f"Revert {sha[:10]} ")
                await pilot.press("y")

                def reverted() -> bool:
                    log = project.git("log", "-1", "--format=%B")
                    return f"Evolve-Reverts: {sha}" in log

                await wait_until(pilot, reverted, "the revert commit", timeout=30)
                await pilot.press("4", "f")
                await wait_until(
                    pilot,
                    lambda: ("information", "", "heartbeat ok") in said(seen),
                    lambda: f"the next tick ok ({said(seen)})",
                    timeout=TICK_S,
                )
                history = app.query_one("#hb-history")
                await wait_until(
                    pilot, lambda: "manual ok" in " ".join(text_of(history).split()), "the history"
                )
                lines = [" ".join(line.split()) for line in text_of(history).splitlines()]
                assert lines[0].split(" ")[1:] == ["manual", "ok"]
                assert lines[1].split(" ")[1:4] == ["manual", "degraded:", "hooks/notes.py"]

                # The heartbeat session shows the model its ticks use.
                session = project.engine_api("/v1/heartbeat")["session"]
                await pilot.press("3")
                sessions = table(app, "sessions")
                await wait_until(pilot, lambda: session in sessions.rows, "the heartbeat session")
                await select_row(pilot, sessions, session)
                pane = app.query_one("#session-detail")
                await wait_until(pilot, lambda: "model mock/mock" in pane.plain, "its model")  # type: ignore[attr-defined]
                await settle(pilot)

        asyncio.run(console())
        assert project.engine_api("/v1/failures")["failures"] == []
