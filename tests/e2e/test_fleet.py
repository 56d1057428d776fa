"""End to end, a console of two agents: two workspaces, each with its engine and its real opencode
1.18.33 (the scripted model in place of an LLM). The second agent's hook edit passes its test and
breaks the heartbeat; the operator, on the fleet view, sees that agent's row name the failure and the
change waiting, opens it, and reverts the change from its changes view. The first agent's row stays
quiet throughout."""

from __future__ import annotations

import asyncio
from typing import Any

from evolve_console.app import EvolveConsole
from evolve_console.client import Target
from evolve_console.fleet import FleetScreen
from evolve_console.screens import RevertScreen
from evolve_console.table import KeyedTable
from evolve_demo.scripted_model import Reply
from tests.console.conftest import select_row, wait_until
from tests.e2e.conftest import Project
from tests.e2e.test_failure_cause import NEW, OLD, REASON, fire
from tests.e2e.test_heartbeat import configure, connect


def target(project: Project) -> Target:
    found = project.announcement()
    assert found is not None, "the engine announced itself"
    return Target(found["url"], found["token"], str(project.ws))


def test_a_bad_edit_in_the_second_agent_is_noticed_from_the_fleet_view_and_reverted(
    make_project: Any,
) -> None:
    alpha, beta = make_project(name="alpha"), make_project(name="beta")
    for project in (alpha, beta):
        configure(project)  # the default interval: only manual ticks; the mock's model
    beta.mock.script(
        Reply(
            text=REASON,
            tool_calls=[("evolve_hook_edit", {"hook": "notes.py", "oldString": OLD, "newString": NEW})],
        ),
        Reply(text="Done."),
    )
    with alpha.serve() as alpha_server, beta.serve() as beta_server:
        connect(alpha, alpha_server)
        connect(beta, beta_server)

        async def main() -> None:
            app = EvolveConsole([("alpha", target(alpha)), ("beta", target(beta))], bell=False)
            async with app.run_test(size=(180, 45)) as pilot:
                await wait_until(
                    pilot,
                    lambda: all(a.first_load.is_set() for a in app.agents),
                    "both agents loaded",
                    timeout=60,
                )
                assert isinstance(app.screen, FleetScreen)
                fleet = app.screen.table

                def row(name: str) -> tuple[str, str, str]:
                    cells = [
                        str(fleet.get_cell(name, c))
                        for c in ("fleet.opencode", "fleet.failed", "fleet.changes")
                    ]
                    return cells[0], cells[1], cells[2]

                await wait_until(
                    pilot,
                    lambda: row("alpha")[0] == row("beta")[0] == "● 1",
                    "both opencodes connected",
                    timeout=30,
                )

                def break_it() -> dict[str, Any]:
                    connect(beta, beta_server)
                    errands = beta_server.create_session("Errands")
                    beta_server.prompt(errands, "simplify", "the", "heartbeat")
                    return fire(beta)

                tick = await asyncio.to_thread(break_it)
                assert tick["outcome"] == "degraded", tick
                await wait_until(
                    pilot,
                    lambda: row("beta")[1] == "1" and "(+1 new)" in row("beta")[2],
                    lambda: f"beta's row to show the failure and the change (beta: {row('beta')})",
                    timeout=20,
                )
                assert row("alpha")[1:] == ("0", "-"), "the other agent's row stays quiet"
                assert "1 failed runs" in str(app.screen.totals.render())

                await select_row(pilot, fleet, "beta")
                await pilot.press("enter")
                await wait_until(
                    pilot, lambda: app.agent.name == "beta" and app.shown == "runs", "beta's views"
                )
                await pilot.press("5")
                await wait_until(
                    pilot,
                    lambda: app.shown == "changes" and app.agent.name == "beta",
                    lambda: f"beta's changes view (shown: {app.shown}, {app.current_mode}, {app.screen})",
                )
                sha = (await asyncio.to_thread(beta.engine_api, "/v1/changes"))["changes"][0]["sha"]
                # The agent's screen, not the app: Textual's App.query_one looks in its first screen
                # (the fleet view's), not the screen mode shown.
                changes = app.main.query_one("#changes-table", KeyedTable)
                await wait_until(pilot, lambda: sha in changes.rows, "the edit in beta's changes view")
                await select_row(pilot, changes, sha)
                await pilot.press("r")
                await wait_until(pilot, lambda: isinstance(app.screen, RevertScreen), "the confirmation")
                await pilot.press("y")
                await wait_until(
                    pilot,
                    lambda: beta.engine_api("/v1/changes")["changes"][0]["subject"].startswith(
                        "revert: edit hook notes.py"
                    ),
                    "the revert commit in beta",
                    timeout=30,
                )
                assert alpha.engine_api("/v1/changes")["changes"][0]["subject"] != "edit hook notes.py"

        asyncio.run(main())
        healed = fire(beta)
        assert healed["outcome"] == "ok", healed
