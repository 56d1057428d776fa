#!/usr/bin/env python3
"""Screenshots of the operator console on a living agent: the real app, a real engine, real opencode.

What it does:

1. Starts `evolve demo`'s setup (`evolve_demo.demo.Demo`) in a temporary directory: real opencode
   with the evolve plugin (connected to the engine), the engine on the example workspace with an
   8 s heartbeat, and the scripted model in place of an LLM. Nothing leaves the machine.
2. Lets the demo's chat play until the agent's heartbeat has made its bad hook edit (the edit that
   passes the hook's test but tells every heartbeat to forget unpinned notes) and one more tick has
   run with it, so that there is something to review.
3. Runs the console (`EvolveConsole(target).run_test(size=...)`, headless) against that engine,
   selects in each view the row an operator would look at, waits for its detail, and saves:
   `runs.svg` (the newest heartbeat run, the bad rule in its result), `stages.svg` (the newest
   heartbeat dispatch), `sessions.svg` (the chat session's context), `heartbeat.svg`, `changes.svg`
   (the bad edit: why, the call, what was checked, the diff), `tools.svg` (the hook edit the test
   rejected, with the test's output), `turn.svg` (enter on the bad edit), `revert.svg` (r on it:
   the sessions to refresh) and `replay.svg` (e on it: what it changes on recorded traffic).
   Textual's `export_screenshot()` writes the SVG; `xml:space="preserve"` is added so that librsvg
   keeps leading spaces of text runs.
4. Converts each SVG to PNG with `rsvg-convert -w 1400` (skipped with a warning when rsvg-convert is
   missing: `apt-get install librsvg2-bin`).

It needs opencode (`evolve opencode install`, or the demo installs it, which needs npm once).

Run from the project root:  .venv/bin/python scripts/screenshots.py [--out screenshots] [--size 140x40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, also when evolve is installed elsewhere

from engine.protocol.announcement import Announcement  # noqa: E402
from evolve_demo.demo import CHAT_TITLE, Demo, DemoOptions  # noqa: E402

BAD_EDIT_TIMEOUT = 240.0  # seconds for the demo to reach its bad hook edit on a slow machine


class Scene:
    """The demo running, and what it has done so far."""

    def __init__(self, base: Path) -> None:
        self.demo = Demo(DemoOptions(directory=base), lambda text: print(f"demo: {text}", flush=True))
        self.bad_edit = threading.Event()
        self.errors: list[str] = []

    def start(self) -> Announcement:
        found = self.demo.start()

        def say(text: str, severity: str, change: str | None = None) -> None:
            if severity == "warning":
                self.bad_edit.set()
            elif severity == "error":
                self.errors.append(text)

        self.demo.start_chat(say)
        deadline = time.monotonic() + BAD_EDIT_TIMEOUT
        while not self.bad_edit.wait(0.5):
            if self.errors:
                raise RuntimeError(self.errors[0])
            if time.monotonic() > deadline:
                raise RuntimeError(f"the demo made no bad hook edit within {BAD_EDIT_TIMEOUT:.0f} s")
        time.sleep(20)  # a tick or two with the bad edit installed: a session to refresh, a forgotten note
        return found


async def shoot(found: Announcement, workspace: Path, out: Path, size: tuple[int, int]) -> list[Path]:
    from evolve_console.app import EvolveConsole
    from evolve_console.client import Target
    from evolve_console.detail import DetailPane
    from evolve_console.diffview import DiffView
    from evolve_console.replay import ReplayScreen
    from evolve_console.screens import RevertScreen
    from evolve_console.table import KeyedTable
    from evolve_console.turn import TurnScreen

    app = EvolveConsole(Target(found.url, found.token, str(workspace)), bell=False)
    saved: list[Path] = []

    async with app.run_test(size=size) as pilot:

        async def until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while not check():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the console never showed {what}")
                await pilot.pause(0.05)

        def head(selector: str) -> str:
            pane = app.query_one(selector)
            assert isinstance(pane, DetailPane | DiffView)
            return pane.head.plain

        def newest(rows: dict[str, object], keep: Callable[[object], bool]) -> str:
            found = [key for key, row in rows.items() if keep(row)]
            if not found:
                raise RuntimeError("no row to select")
            return found[-1]

        async def select(table_id: str, key: str) -> None:
            table = app.query_one(table_id, KeyedTable)
            await until(f"row {key} in {table_id}", lambda: key in table.rows)
            table.focus()
            table.move_cursor(row=table.get_row_index(key), animate=False)

        async def save(name: str, ready: Callable[[], bool] | None = None) -> None:
            if ready is not None:
                await until(name, ready)
            await pilot.pause(0.4)  # let the last refresh land
            path = out / f"{name}.svg"
            svg = app.export_screenshot().replace("<svg ", '<svg xml:space="preserve" ', 1)
            path.write_text(svg, encoding="utf-8")
            saved.append(path)
            print(f"saved {path}")

        await until("the first load", app.first_load.is_set)
        await until("opencode connected", lambda: bool(app.model.status and app.model.status.opencode))
        model = app.model

        def is_bad(change: object) -> bool:
            files = getattr(change, "files", [])
            installed = getattr(change, "sha", None) is not None  # not an attempt its test rejected
            return installed and "hooks/notes.py" in files and getattr(change, "origin", "") != "operator"

        bad = newest(model.changes, is_bad)  # type: ignore[arg-type]
        chat = next(s.id for s in model.sessions.values() if s.title == CHAT_TITLE)
        rejected = newest(
            model.tool_calls,  # type: ignore[arg-type]
            lambda c: getattr(c, "tool", "") == "evolve_hook_edit" and getattr(c, "error", None) is not None,
        )
        beat_run = newest(model.runs, lambda r: getattr(r, "stage", "") == "heartbeat")  # type: ignore[arg-type]
        beat_dispatch = newest(model.dispatches, lambda d: getattr(d, "stage", "") == "heartbeat")  # type: ignore[arg-type]

        steps: list[tuple[str, str, Callable[[], Awaitable[None]], Callable[[], bool]]] = [
            (
                "runs",
                "1",
                lambda: select("#runs-table", beat_run),
                lambda: "heartbeat" in head("#run-detail"),
            ),
            (
                "stages",
                "2",
                lambda: select("#stages-table", beat_dispatch),
                lambda: "heartbeat" in head("#stage-detail"),
            ),
            (
                "sessions",
                "3",
                lambda: select("#sessions-table", chat),
                lambda: chat in head("#session-detail"),
            ),
            (
                "heartbeat",
                "4",
                lambda: pilot.pause(0),
                lambda: bool(model.heartbeat and model.heartbeat.last),
            ),
            (
                "tools",
                "6",
                lambda: select("#tools-table", rejected),
                lambda: "evolve_hook_edit" in head("#tool-detail"),
            ),
            (
                "changes",
                "5",
                lambda: select("#changes-table", bad),
                lambda: bad[:12] in head("#change-detail"),
            ),
        ]

        def showing(view: str) -> Callable[[], bool]:
            return lambda: app.shown == view

        for name, key, choose, ready in steps:
            await pilot.press(key)
            await until(f"the {name} view", showing(name))
            await choose()
            await save(name, ready)
        # The bad edit selected: the turn that made it, the revert dialog, its replay.
        await pilot.press("enter")
        await until("the turn", lambda: isinstance(app.screen, TurnScreen))
        await save("turn")
        await pilot.press("escape")
        await until("the changes view again", lambda: not isinstance(app.screen, TurnScreen))
        await pilot.press("r")
        await until("the revert dialog", lambda: isinstance(app.screen, RevertScreen))
        await save("revert")
        await pilot.press("escape")
        await until("the changes view again", lambda: not isinstance(app.screen, RevertScreen))
        await pilot.press("e")
        await until("the replay", lambda: isinstance(app.screen, ReplayScreen))
        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        await until(
            "the replay's end", lambda: replay.result is not None and replay.result.state != "running", 180
        )
        await save("replay")
        app.exit()
    return saved


def to_png(svgs: list[Path], width: int) -> None:
    converter = shutil.which("rsvg-convert")
    if converter is None:
        print("warning: rsvg-convert not found (apt-get install librsvg2-bin); PNGs skipped", file=sys.stderr)
        return
    for svg in svgs:
        png = svg.with_suffix(".png")
        subprocess.run([converter, "-w", str(width), str(svg), "-o", str(png)], check=True)
        print(f"saved {png}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", default=str(ROOT / "screenshots"), help="output directory (default screenshots/)"
    )
    parser.add_argument("--size", default="140x40", help="terminal size COLSxROWS (default 140x40)")
    parser.add_argument("--png-width", type=int, default=1400, help="PNG width in pixels (default 1400)")
    parser.add_argument("--keep", action="store_true", help="keep the demo's directory (path printed)")
    args = parser.parse_args()
    # Textual reads TEXTUAL_* (theme, colours, animations) when imported: none of yours in the pictures.
    for key in [k for k in os.environ if k.startswith("TEXTUAL_")] + ["NO_COLOR", "FORCE_COLOR"]:
        os.environ.pop(key, None)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    base = Path(tempfile.mkdtemp(prefix="evolve-screenshots-"))
    scene = Scene(base / "demo")
    try:
        found = scene.start()
        svgs = asyncio.run(shoot(found, scene.demo.workspace, out, (cols, rows)))
    finally:
        print(scene.demo.stop())
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    to_png(svgs, args.png_width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
