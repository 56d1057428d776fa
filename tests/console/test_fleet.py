"""The console of several agents against real engines: the fleet view lists every agent, an engine
that dies, hangs (SIGSTOP) or refuses shows in its own row within 3 s while the others go on, enter
opens an agent in the six views and `0`, `[`, `]` and the palette go between them, alerts name the
agent, and the console says plainly when a token is wrong or what answers is no evolve engine."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message
from textual.pilot import Pilot

from evolve_console.app import EvolveConsole
from evolve_console.client import Target
from evolve_console.fleet import FleetScreen
from evolve_console.table import KeyedTable
from tests.console.conftest import StartEngine, notifications, text_of, wait_until, write_hook
from tests.support.engine_process import EngineProcess
from tests.support.processes import free_port

SIZE = (160, 40)
SHOWS_WITHIN_S = 3.0

FAIL_IDLE_HOOK = """#!/usr/bin/env python3
import json, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "idle":
    sys.stderr.write("no idle today\\n")
    sys.exit(1)
print("{}")
"""


@pytest.fixture
def workspaces(tmp_path: Path, example_workspace: Path) -> list[Path]:
    """Three copies of the example workspace: three agents."""
    return [Path(shutil.copytree(example_workspace, tmp_path / f"ws-{n}", symlinks=True)) for n in "abc"]


def fleet_table(app: EvolveConsole) -> KeyedTable:
    assert isinstance(app.screen, FleetScreen), f"the fleet view is not shown ({type(app.screen).__name__})"
    return app.screen.table


def engine_cell(app: EvolveConsole, agent: str) -> str:
    return str(fleet_table(app).get_cell(agent, "fleet.engine"))


def totals_text(app: EvolveConsole) -> str:
    assert app.fleet is not None
    return text_of(app.fleet.totals)


async def all_loaded(pilot: Pilot[Any], app: EvolveConsole, names: list[str]) -> None:
    await wait_until(
        pilot,
        lambda: all(a.first_load.is_set() and a.model.connected for a in app.agents if a.name in names),
        lambda: "every agent to load: " + ", ".join(f"{a.name} {a.model.detail}" for a in app.agents),
        timeout=30,
    )


@contextlib.contextmanager
def stopped(engine: EngineProcess) -> Iterator[None]:
    """The engine hung (SIGSTOP: its socket still takes connections, nothing answers), then let go."""
    os.kill(engine.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(engine.pid, signal.SIGCONT)


def test_an_engine_killed_hung_or_refusing_shows_in_its_own_row_and_holds_up_no_other(
    workspaces: list[Path], start_engine: StartEngine
) -> None:
    write_hook(workspaces[0], "fail_idle.py", FAIL_IDLE_HOOK)
    a, b, c = (start_engine(ws) for ws in workspaces)
    nowhere = Target(f"http://127.0.0.1:{free_port()}", "no-token")  # nothing listens there

    async def main() -> None:
        seen: list[Message] = []
        app = EvolveConsole(
            [("a", a.target), ("b", b.target), ("c", c.target), ("nowhere", nowhere)], bell=False
        )
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await all_loaded(pilot, app, ["a", "b", "c"])
            assert fleet_table(app).keys() == ["a", "b", "c", "nowhere"]
            await wait_until(pilot, lambda: engine_cell(app, "nowhere").startswith("○ down"), "nowhere down")
            assert "nothing listens at that address" in engine_cell(app, "nowhere")
            await wait_until(pilot, lambda: [engine_cell(app, n) for n in "abc"] == ["● up"] * 3, "three up")
            assert "4 agents: 3 up · 1 down" in totals_text(app)

            # Killed: its row says so within 3 s.
            b.kill()
            killed_at = time.monotonic()
            await wait_until(pilot, lambda: engine_cell(app, "b").startswith("○ down"), "b down", timeout=10)
            assert time.monotonic() - killed_at < SHOWS_WITHIN_S

            # Hung: its row says so within 3 s, and meanwhile agent a goes on and keys answer at once.
            with stopped(c):
                hung_at = time.monotonic()
                await asyncio.to_thread(a.stage, "idle", {"answer": "done"})
                await wait_until(
                    pilot,
                    lambda: engine_cell(app, "c").startswith("◌ no answer"),
                    "c not answering",
                    timeout=10,
                )
                assert time.monotonic() - hung_at < SHOWS_WITHIN_S
                await wait_until(
                    pilot,
                    lambda: str(fleet_table(app).get_cell("a", "fleet.failed")) == "1",
                    "a's failed run counted while c hangs",
                    timeout=SHOWS_WITHIN_S,
                )
                started = time.monotonic()
                await pilot.press("down")
                await pilot.pause()
                assert fleet_table(app).selected_key() == "b"
                assert time.monotonic() - started < 1.0, "a key answers while an engine hangs"
                assert "1 not answering" in totals_text(app) and "2 down" in totals_text(app)
                assert "1 failed runs" in totals_text(app)
            # Let go: it comes back by itself.
            await wait_until(pilot, lambda: engine_cell(app, "c") == "● up", "c back", timeout=20)
            alerts = [n[2] for n in notifications(seen) if "started failing" in n[2]]
            assert len(alerts) == 1, alerts
            assert alerts[0].startswith("a: hooks/fail_idle.py started failing at idle: no idle today"), (
                "the alert names the agent, then the error's own words"
            )

    asyncio.run(main())


def test_enter_opens_an_agent_in_its_views_and_0_brackets_and_the_palette_go_between_agents(
    workspaces: list[Path], start_engine: StartEngine
) -> None:
    a, b = (start_engine(ws) for ws in workspaces[:2])
    write_hook(workspaces[1], "fail_idle.py", FAIL_IDLE_HOOK)

    async def main() -> None:
        app = EvolveConsole([("alpha", a.target), ("beta", b.target)], bell=False)
        async with app.run_test(size=SIZE) as pilot:
            await all_loaded(pilot, app, ["alpha", "beta"])
            assert app.shown == "fleet"
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.shown == "runs", "alpha's runs view")
            assert app.agent.name == "alpha"
            assert "0 All agents" in text_of(app.main.view_bar) and "agent alpha ▸" in text_of(
                app.main.view_bar
            )
            assert str(a.workspace) in text_of(app.main.connection)

            # Beta fails while the operator looks at alpha: alpha's bar names beta beside the fleet entry.
            await asyncio.to_thread(b.stage, "idle", {"answer": "done"})
            await wait_until(
                pilot, lambda: "beta 1 failed" in text_of(app.main.view_bar), "beta's failure on alpha's bar"
            )
            await pilot.press("5")  # alpha's changes view: each agent keeps its own view shown
            await pilot.press("right_square_bracket")
            await wait_until(pilot, lambda: app.agent.name == "beta" and app.shown == "runs", "beta shown")
            assert "agent beta ▸" in text_of(app.main.view_bar)
            assert str(b.workspace) in text_of(app.main.connection)
            await pilot.press("left_square_bracket")
            await wait_until(pilot, lambda: app.agent.name == "alpha", "alpha again")
            assert app.shown == "changes"

            await pilot.press("0")
            await wait_until(pilot, lambda: app.shown == "fleet", "the fleet view")
            assert str(fleet_table(app).get_cell("beta", "fleet.failed")) == "0", "seen when beta was shown"
            titles = [command.title for command, _ in app.commands()]
            assert titles == ["agent: all (the fleet view)", "agent: alpha", "agent: beta"]
            await dict(zip(titles, (run for _, run in app.commands()), strict=True))["agent: beta"]()
            await wait_until(
                pilot, lambda: app.agent.name == "beta" and app.shown == "runs", "beta by palette"
            )

    asyncio.run(main())


class NotAnEngine(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_wrong_token_and_something_that_is_no_engine_are_said_plainly(
    workspaces: list[Path], start_engine: StartEngine
) -> None:
    a = start_engine(workspaces[0])
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotAnEngine)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:

        async def main() -> None:
            wrong = Target(a.url, "not-the-token")
            stranger = Target(f"http://127.0.0.1:{other.server_address[1]}", "whatever")
            app = EvolveConsole([("a", a.target), ("wrong", wrong), ("stranger", stranger)], bell=False)
            async with app.run_test(size=SIZE) as pilot:
                await all_loaded(pilot, app, ["a"])
                await wait_until(
                    pilot, lambda: "refused the token" in engine_cell(app, "wrong"), "the token refused"
                )
                await wait_until(
                    pilot,
                    lambda: "is not an evolve engine" in engine_cell(app, "stranger"),
                    "no engine there",
                )

        asyncio.run(main())
    finally:
        other.shutdown()
        other.server_close()
