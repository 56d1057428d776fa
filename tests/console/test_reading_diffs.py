"""Reading a change's diff in the console, against a real engine on a real workspace: an edit of the
example hook through `evolve_hook_edit`, then the keys an operator presses in view 5 (`w` full
width, `v` side by side, `o` the whole file), checked against git; and the engine's route behind
`o`, `GET /v1/changes/{rev}/file`."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot

from evolve_console.app import EvolveConsole
from evolve_console.difflayout import MIN_SPLIT
from evolve_console.diffmodel import parse
from evolve_console.diffview import DiffView
from evolve_console.keybar import KeyBar
from evolve_console.table import KeyedTable
from tests.console.conftest import StartEngine, connected, select_row, settle, wait_until
from tests.support.engine_process import EngineProcess
from tests.support.waiting import wait_for

Scenario = Callable[[EvolveConsole, Pilot[Any], list[Message]], Coroutine[Any, Any, None]]
OLD = "List your notes, one per line, oldest first; optionally only those with a tag."
NEW = "List your notes, one per line, newest first; optionally only those with a tag."


def drive(engine: EngineProcess, scenario: Scenario, size: tuple[int, int] = (160, 40)) -> list[Message]:
    seen: list[Message] = []

    async def main() -> None:
        app = EvolveConsole(engine.target)
        async with app.run_test(size=size, message_hook=seen.append) as pilot:
            await connected(pilot)
            await scenario(app, pilot, seen)
            await settle(pilot)

    asyncio.run(main())
    return seen


def edit_hook(engine: EngineProcess) -> str:
    """Change one word in the middle of a long line of hooks/notes.py, as an operator's tool call
    (the hook's test runs first); returns the commit."""
    result = engine.call_tool(
        "evolve_hook_edit", {"hook": "notes.py", "oldString": OLD, "newString": NEW}, origin="operator"
    )
    assert result["commit"], result
    return str(result["commit"])


def rows(view: DiffView) -> list[str]:
    """The rows of the diff pane on screen now."""
    return [view.render_line(y).text.rstrip() for y in range(view.scrollable_size.height)]


def all_rows(view: DiffView) -> list[str]:
    out: dict[int, str] = {}
    height = view.scrollable_size.height
    for top in range(0, view.total_rows, height):
        view.scroll_to(0, top, animate=False, immediate=True)
        for y in range(height):
            out.setdefault(round(view.scroll_offset.y) + y, view.render_line(y).text.rstrip())
    view.scroll_to(0, 0, animate=False, immediate=True)
    return [out[row] for row in range(view.total_rows)]


def shown_keys(app: EvolveConsole) -> list[str]:
    return [key for key, *_ in app.query_one(KeyBar).keys]


async def open_change(app: EvolveConsole, pilot: Pilot[Any], sha: str) -> DiffView:
    await pilot.press("5")
    table = app.query_one("#changes-table", KeyedTable)
    await wait_until(pilot, lambda: sha in table.rows, "the hook edit in the changes table")
    await select_row(pilot, table, sha)
    view = app.query_one("#change-detail", DiffView)
    await wait_until(
        pilot, lambda: [f.path for f in view.diff.files] == ["hooks/notes.py"], "the hook edit's diff"
    )
    return view


def test_reading_a_hook_edit_full_width_side_by_side_and_whole(engine: EngineProcess) -> None:
    sha = edit_hook(engine)
    at_commit = engine.git("show", f"{sha}:hooks/notes.py")

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        assert "w" not in shown_keys(app), "the diff keys are not shown in the hook runs view"
        view = await open_change(app, pilot, sha)
        assert {"w", "v", "o"} <= set(shown_keys(app))
        table = app.query_one("#changes-table", KeyedTable)
        # The changed word is marked inside the long line.
        word = view.get_component_rich_style("diff-view--added-word").bgcolor
        # The last row with the word: the head above the diff quotes the call's arguments too.
        row = max(y for y, text in enumerate(all_rows(view)) if "newest" in text)
        view.scroll_to(0, row, animate=False, immediate=True)
        added = view.render_line(row - round(view.scroll_offset.y))
        view.scroll_to(0, 0, animate=False, immediate=True)
        assert [s.text for s in added if s.style is not None and s.style.bgcolor == word] == ["newest"]

        narrow = view.scrollable_size.width
        await pilot.press("w")
        await wait_until(
            pilot, lambda: view.scrollable_size.width > narrow, "the diff to take the full width"
        )
        assert not table.display and app.focused is view, (
            "the table is out of the way, the diff has the focus"
        )
        assert view.scrollable_size.width >= MIN_SPLIT

        await pilot.press("v")
        await pilot.pause()
        half = (view.scrollable_size.width - 1) // 2
        pair = next(text for text in rows(view) if "oldest" in text and "│" in text)  # a diff row
        assert pair[half] == "│" and "oldest" in pair[:half] and "newest" in pair[half + 1 :], pair

        await pilot.press("o")
        await wait_until(pilot, lambda: view.whole == "hooks/notes.py", "the whole file")
        shown = all_rows(view)
        assert any(f"hooks/notes.py, whole, as {sha[:10]} left it" in text for text in shown)
        half = (view.scrollable_size.width - 1) // 2
        # Side by side, the right column holds the file as the commit left it, line by line.
        right = [text[half + 1 :] for text in shown if len(text) > half and text[half] == "│"]
        lines = at_commit.rstrip("\n").split("\n")
        digits = len(str(len(lines)))
        numbered = {
            int(text[:digits]): text[digits + 3 :] for text in right if text[:digits].strip().isdigit()
        }
        assert sorted(numbered) == list(range(1, len(lines) + 1)), "every line of the file, in order"
        assert all(lines[n - 1].startswith(numbered[n]) for n in numbered), "each as in git (its first row)"
        await pilot.press("o")
        await wait_until(pilot, lambda: view.whole is None, "the diff again")

        await pilot.press("w")
        await wait_until(pilot, lambda: table.display and app.focused is table, "the table back, focused")
        assert any("side by side needs" in text for text in rows(view)), (
            "too narrow beside the table: it says so"
        )
        await pilot.press("v")
        await pilot.pause()
        assert not view.split and not any("side by side needs" in text for text in rows(view))

    seen = drive(engine, scenario)
    assert not [m for m in seen if isinstance(m, Notify) and m.notification.severity == "error"]


def test_side_by_side_in_a_terminal_too_narrow_for_it(engine: EngineProcess) -> None:
    sha = edit_hook(engine)

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        view = await open_change(app, pilot, sha)
        await pilot.press("v")
        await pilot.pause()
        notes = [m.notification for m in seen if isinstance(m, Notify)]
        assert notes and notes[-1].title == "too narrow", notes
        assert notes[-1].message.startswith(f"side by side needs {MIN_SPLIT} columns for the diff"), notes[-1]
        assert not view.split and app.query_one("#changes-table", KeyedTable).display, "nothing changed"

    drive(engine, scenario, size=(100, 40))


def file_at(engine: EngineProcess, rev: str, **params: str) -> dict[str, Any]:
    found: dict[str, Any] = engine.request("GET", f"/v1/changes/{rev}/file", params=params).json()
    return found


def test_the_file_route_gives_both_sides(workspace: Path, start_engine: StartEngine) -> None:
    engine = start_engine(workspace)
    sha = edit_hook(engine)
    found = file_at(engine, sha, path="hooks/notes.py")
    assert found["sha"] == engine.git("rev-parse", sha).strip()
    assert found["content"] == engine.git("show", f"{sha}:hooks/notes.py")
    assert found["before"] == engine.git("show", f"{sha}^:hooks/notes.py")
    assert (found["binary"], found["truncated"]) == (False, False)
    # A hand edit (a rename and a binary file) is committed by the engine as an external change.
    engine.git("mv", "prompts/chat.md", "prompts/talk.md")
    (workspace / "data.bin").write_bytes(b"\0\1\2")
    head = wait_for(
        "the engine to commit the hand edit",
        lambda: next(
            (c["sha"] for c in engine.get("/v1/changes")["changes"] if "prompts/talk.md" in c["files"]), None
        ),
    )
    renamed = file_at(engine, head, path="prompts/talk.md", old_path="prompts/chat.md")
    assert renamed["before"] == renamed["content"] == (workspace / "prompts" / "talk.md").read_text()
    binary = file_at(engine, head, path="data.bin")
    assert (binary["binary"], binary["content"], binary["before"]) == (True, None, None)
    missing = engine.request("GET", f"/v1/changes/{head}/file", params={"path": "nope.md"}, check=False)
    assert missing.status_code == 409 and "has no file 'nope.md'" in missing.json()["error"]
    no_path = engine.request("GET", f"/v1/changes/{head}/file", check=False)
    assert no_path.status_code == 400 and "'path' is required" in no_path.json()["error"]


def test_a_pending_change_to_a_file_without_final_newline(workspace: Path, start_engine: StartEngine) -> None:
    """The review gate's diff of a last line without a newline, and the whole file as it would be."""
    chat = workspace / "prompts" / "chat.md"
    chat.write_text(chat.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    engine = start_engine(workspace, EVOLVE_REVIEW="gate")
    out = engine.call_tool(
        "evolve_prompt_edit",
        {"prompt": "chat.md", "oldString": "only promising to remember.", "newString": "only promising."},
        origin="tool",
        session="ses_agent",
        call_id="call_1",
    )
    assert "awaits review" in out["output"], out
    [pending] = engine.get("/v1/changes")["pending"]
    diff = engine.get(f"/v1/pending/{pending['id']}")["diff"]
    assert diff.endswith(
        "-behaviour, rather than only promising to remember.\n\\ No newline at end of file\n"
        "+behaviour, rather than only promising.\n\\ No newline at end of file\n"
    ), diff

    async def scenario(app: EvolveConsole, pilot: Pilot[Any], seen: list[Message]) -> None:
        await pilot.press("5")
        table = app.query_one("#changes-table", KeyedTable)
        await wait_until(pilot, lambda: pending["id"] in table.rows, "the pending change in the table")
        await select_row(pilot, table, pending["id"])
        view = app.query_one("#change-detail", DiffView)
        await wait_until(pilot, lambda: view.diff.files, "the pending change's diff")
        removed, added = [line for line in view.diff.files[0].hunks[0].lines if line.kind != " "]
        assert (removed.text, added.text) == (
            "behaviour, rather than only promising to remember.",
            "behaviour, rather than only promising.",
        )
        await pilot.press("o")
        await wait_until(pilot, lambda: view.whole == "prompts/chat.md", "the whole file")
        shown = all_rows(view)
        assert any("prompts/chat.md, whole, as it would be once approved" in text for text in shown)
        count = len(chat.read_text(encoding="utf-8").split("\n"))
        assert any(
            text.lstrip().startswith(f"{count} + behaviour, rather than only promising.") for text in shown
        )

    drive(engine, scenario)


def test_what_git_prints_for_a_commit(tmp_path: Path) -> None:
    """The real thing: a commit renaming, editing and adding files, as `git show --patch` prints it."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=repo,
            env=env,
            check=True,
            capture_output=True,
        ).stdout.decode()

    git("init", "-q")
    (repo / "a.md").write_text("".join(f"line {i}\n" for i in range(20)))
    (repo / "c.txt").write_bytes(b"one\r\ntwo")
    git("add", "-A")
    git("commit", "-qm", "one")
    (repo / "a.md").unlink()
    (repo / "b.md").write_text("".join(f"line {i}\n" for i in range(20)).replace("line 7", "line seven"))
    (repo / "c.txt").write_bytes(b"one\r\ntwo\r\n")
    git("add", "-A")
    git("commit", "-qm", "two")
    moved, crlf = parse(git("show", "--format=", "--patch", "--no-color", "HEAD")).files
    assert (moved.status, moved.old_path, moved.new_path) == ("renamed", "a.md", "b.md")
    [hunk] = moved.hunks
    removed = next(line for line in hunk.lines if line.kind == "-")
    added = hunk.lines[removed.partner or 0]
    assert (removed.old, added.new, added.text) == (8, 8, "line seven")
    old, new = crlf.hunks[0].lines[1:]
    assert (old.text, old.cr, old.no_newline) == ("two", False, True)
    assert (new.text, new.cr, new.no_newline) == ("two", True, False)
