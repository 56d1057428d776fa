#!/usr/bin/env python3
"""Screenshots of the operator console's five views: the real app, a real engine, real runs.

What it does:

1. Creates the example workspace (`python -m engine init`) in a temporary directory, with HOME and
   the global git config pointed there too, so nothing of yours leaks into the pictures.
2. Starts the engine (`python -m engine serve`) on it.
3. Makes real activity through the engine's HTTP API, the same calls the opencode shim and the agent
   make: a second hook `hooks/flaky.sh` appears (an external change, committed by the watcher) that
   fails on observe_message, and on mutate_request for `ses_beta`; two sessions (`ses_alpha`,
   `ses_beta`) get a title, a model and a frozen system prompt (mutate_request; for ses_beta flaky.sh
   fails and recover steps in); `ses_alpha` finishes a message (observe_message: flaky.sh fails;
   then idle); the agent calls `notes_add` and edits `prompts/chat.md` with
   `evolve_prompt_edit`; `ses_beta` edits `prompts/heartbeat.md`; the operator approves the first
   edit and reverts the second; a heartbeat is fired by hand.
4. Runs the console (`EvolveConsole(target).run_test(size=...)`, headless) against that engine,
   goes to each view, selects an interesting row, waits for its detail, and saves
   `screenshots/runs.svg`, `stages.svg`, `sessions.svg`, `heartbeat.svg`, `changes.svg`
   (Textual's `export_screenshot()`, the SVG `App.save_screenshot` writes, with
   `xml:space="preserve"` added so that librsvg keeps leading spaces of text runs).
5. Converts each SVG to PNG with `rsvg-convert -w 1400` (skipped with a warning when rsvg-convert is
   missing: `apt-get install librsvg2-bin`).

Selected rows: runs - the failed observe_message run of flaky.sh (error, log line and stderr in the
detail); stages - ses_beta's mutate_request, where recover stepped in; sessions - ses_alpha with its frozen prompt;
heartbeat - after the manual tick; changes - the approved prompt edit with its diff.

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
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # evolve_console of this checkout, and tests/support (not an installed package)

from tests.support.engine_process import EngineProcess  # noqa: E402
from tests.support.environment import EVOLVE, isolated_env  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

FLAKY_HOOK = """#!/bin/sh
# A hook that answers nothing, except when its metrics service is down: on observe_message, and on
# mutate_request for ses_beta (where recover then steps in).
input=$(cat)
case "$1" in
  discover) echo '{"name": "flaky"}' ;;
  observe_message)
    echo '{"log": "posting the answer to the metrics service"}'
    echo "flaky.sh: connection refused: http://127.0.0.1:9/metrics" >&2
    exit 3 ;;
  mutate_request)
    case "$input" in
      *ses_beta*)
        echo '{"log": "loading the team style guide"}'
        echo "flaky.sh: style guide service timed out after 2 s" >&2
        exit 1 ;;
    esac ;;
esac
exit 0
"""

OPENCODE_SYSTEM = [
    "You are opencode, an interactive CLI tool that helps users with software engineering tasks.",
    "Here is some useful information about the environment you are running in: <env> Working "
    "directory: /home/dev/shop Is directory a git repo: yes Platform: linux </env>",
]

SESSIONS = {
    "ses_alpha": ("Fix the checkout rounding bug", "build", ("anthropic", "claude-sonnet-4")),
    "ses_beta": ("Plan the Q3 migration", "plan", ("openai", "gpt-5")),
}


def call(
    engine: EngineProcess, tool: str, args: dict[str, Any], session: str, call_id: str
) -> dict[str, Any]:
    """A tool call through the API, as the shim makes it; a failed call stops the script."""
    result = engine.call_tool(tool, args, session=session, call_id=call_id)
    if result.get("error"):
        raise RuntimeError(f"{tool} failed: {result['error']}")
    return result


def make_activity(engine: EngineProcess, workspace: Path) -> dict[str, str]:
    """Real activity through the API; returns the ids of the rows to select."""
    # A new hook appears: the watcher commits it ("external change") and discovers it.
    hook = workspace / "hooks" / "flaky.sh"
    hook.write_text(FLAKY_HOOK)
    hook.chmod(0o755)
    wait_for(
        "flaky.sh to be discovered",
        lambda: any(h["file"] == "flaky.sh" for h in engine.get("/v1/status")["hooks"]),
        timeout=30,
    )
    wait_for(
        "the external change to be committed",
        lambda: any("hooks/flaky.sh" in (c.get("files") or []) for c in engine.get("/v1/changes")["changes"]),
        timeout=30,
    )

    # Two opencode sessions: title, model, frozen system prompt (mutate_request).
    for sid, (title, agent, (provider, model)) in SESSIONS.items():
        engine.post(
            "/v1/opencode/event",
            {"type": "session.created", "properties": {"info": {"id": sid, "title": title}}},
        )
        engine.post(
            "/v1/opencode/chat-message",
            {"session": sid, "agent": agent, "model": {"providerID": provider, "modelID": model}},
        )
        engine.post("/v1/opencode/system", {"session": sid, "system": OPENCODE_SYSTEM})

    history = [
        {
            "info": {"id": "msg_1", "role": "user"},
            "parts": [{"type": "text", "text": "The checkout total is off by a cent for 3 x 0.10. Fix it."}],
        }
    ]
    # The agent's tool calls: a note, then a prompt edit.
    call(
        engine,
        "notes_add",
        {"text": "Money is integer cents everywhere; never float.", "priority": "high", "tags": ["shop"]},
        "ses_alpha",
        "call_notes_1",
    )
    edit = call(
        engine,
        "evolve_prompt_edit",
        {
            "prompt": "chat.md",
            "oldString": "Answer plainly and briefly.",
            "newString": "Answer plainly and briefly, in the language the person writes in.",
        },
        "ses_alpha",
        "call_edit_1",
    )
    # ses_alpha's answer: observe_message (flaky.sh fails, recover steps in), then idle.
    engine.post(
        "/v1/opencode/assistant",
        {
            "session": "ses_alpha",
            "message": {"id": "msg_2", "role": "assistant", "agent": "build"},
            "parts": [
                {"type": "reasoning", "text": "0.1 * 3 in floats is 0.30000000000000004; use cents."},
                {"type": "text", "text": "Fixed: totals are now summed in integer cents (cart.py)."},
            ],
            "history": history,
        },
    )
    # ses_beta edits the heartbeat prompt; the operator approves the first edit, reverts this one.
    second = call(
        engine,
        "evolve_prompt_edit",
        {
            "prompt": "heartbeat.md",
            "oldString": (workspace / "prompts" / "heartbeat.md").read_text().split("\n")[0],
            "newString": "Every heartbeat: re-read the migration plan and list what is still open.",
        },
        "ses_beta",
        "call_edit_2",
    )
    engine.post(f"/v1/changes/{edit['commit']}/approve", {"by": "operator"})
    engine.post(f"/v1/changes/{second['commit']}/revert", {"by": "operator"})
    engine.post("/v1/heartbeat/fire")

    failed = engine.get("/v1/runs", hook="flaky.sh", stage="observe_message", failed="true")["runs"]
    dispatches = [
        d for d in engine.get("/v1/dispatches", stage="mutate_request")["dispatches"] if d["recovered"]
    ]
    if not failed or not dispatches:
        raise RuntimeError("the activity did not produce a failed run and a recovered dispatch")
    return {"run": failed[0]["id"], "dispatch": dispatches[0]["id"], "change": edit["commit"]}


async def shoot(engine: EngineProcess, ids: dict[str, str], out: Path, size: tuple[int, int]) -> list[Path]:

    from evolve_console.app import EvolveConsole
    from evolve_console.detail import DetailPane
    from evolve_console.diffview import DiffView
    from evolve_console.table import KeyedTable

    app = EvolveConsole(engine.target)
    saved: list[Path] = []

    async with app.run_test(size=size) as pilot:

        async def until(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
            deadline = time.monotonic() + timeout
            while not check():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the console never showed {what}")
                await pilot.pause(0.05)

        def head(selector: str) -> str:
            pane = app.query_one(selector)
            assert isinstance(pane, DetailPane | DiffView)
            return pane.head.plain

        async def select(table_id: str, key: str) -> None:
            table = app.query_one(table_id, KeyedTable)
            await until(f"row {key} in {table_id}", lambda: key in table.rows)
            table.focus()
            table.move_cursor(row=table.get_row_index(key), animate=False)

        async def save(name: str, ready: Callable[[], bool] | None = None) -> None:
            if ready is not None:
                await until(name, ready)
            await pilot.pause(0.3)  # let the last refresh land
            path = out / f"{name}.svg"
            # Textual writes spaces as &#160; inside <text>; librsvg drops them at the start of a
            # text run unless whitespace is preserved, which glues "ses_alpha" to the next word.
            svg = app.export_screenshot().replace("<svg ", '<svg xml:space="preserve" ', 1)
            path.write_text(svg, encoding="utf-8")
            saved.append(path)
            print(f"saved {path}")

        async def nothing() -> None:
            return None

        steps: list[tuple[str, str, Callable[[], Awaitable[None]], Callable[[], bool]]] = [
            (
                "runs",
                "1",
                lambda: select("#runs-table", ids["run"]),
                lambda: "flaky.sh" in head("#run-detail") and "exit 3" in head("#run-detail"),
            ),
            (
                "stages",
                "2",
                lambda: select("#stages-table", ids["dispatch"]),
                lambda: "recover stepped in" in head("#stage-detail"),
            ),
            (
                "sessions",
                "3",
                lambda: select("#sessions-table", "ses_alpha"),
                lambda: "ses_alpha" in head("#session-detail"),
            ),
            ("heartbeat", "4", nothing, lambda: bool(app.model.heartbeat and app.model.heartbeat.last)),
            (
                "changes",
                "5",
                lambda: select("#changes-table", ids["change"]),
                lambda: ids["change"][:12] in head("#change-detail"),
            ),
        ]
        await until("the first load", app.first_load.is_set, 30)
        await until("the connection", lambda: app.engine_connected)
        for name, key, choose, ready in steps:
            await pilot.press(key)
            await until(f"the {name} view", lambda name=name: app.shown == name)
            await choose()
            await save(name, ready)
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
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace (path printed)")
    args = parser.parse_args()
    # Textual reads TEXTUAL_* (theme, colours, animations) when imported: none of yours in the pictures.
    for key in [k for k in os.environ if k.startswith("TEXTUAL_")] + ["NO_COLOR", "FORCE_COLOR"]:
        os.environ.pop(key, None)
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

    base = Path(tempfile.mkdtemp(prefix="evolve-screenshots-"))
    home = base / "home"
    env = isolated_env(home)
    workspace = home / "workspace"
    subprocess.run(
        [*EVOLVE, "init", str(workspace)], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )
    engine = EngineProcess(workspace, env, home / "engine.log", cwd=ROOT, own_session=True)
    try:
        engine.start(timeout=60)
        ids = make_activity(engine, workspace)
        svgs = asyncio.run(shoot(engine, ids, out, (cols, rows)))
    finally:
        engine.stop(wait=20)
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    to_png(svgs, args.png_width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
