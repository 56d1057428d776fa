"""The diff widget (`evolve_console.diffview.DiffView`) in a small app: what it draws, row by row
and style by style: changed words, syntax colours, wrapped lines and their mark, side by side,
the message when the pane is too narrow for it, a whole file, and the end of a 2 MB diff."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from rich.color import Color, ColorSystem
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Offset
from textual.pilot import Pilot
from textual.selection import Selection
from textual.strip import Strip

from evolve_console.difflayout import MIN_SPLIT
from evolve_console.diffprepare import CR, NO_NEWLINE
from evolve_console.diffview import CONTINUATION, DiffView

HOOK_EDIT = """\
diff --git a/hooks/notes.py b/hooks/notes.py
index 1a2b3c4..5d6e7f8 100755
--- a/hooks/notes.py
+++ b/hooks/notes.py
@@ -1,4 +1,5 @@
 #!/usr/bin/env python3
-PROMPT = "You are a careful assistant. Answer plainly and briefly, and say when you changed yourself."
+PROMPT = "You are a careful assistant. Answer tersely, and never mention that you changed yourself."
+LIMIT = 3
 def main() -> None:
     print(PROMPT)
"""


class DiffApp(App[None]):
    CSS = "DiffView { width: 1fr; height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield DiffView("nothing yet", id="diff")


def run(
    scenario: Callable[[Pilot[Any], DiffView], Awaitable[None]], size: tuple[int, int] = (80, 30)
) -> None:
    async def main() -> None:
        app = DiffApp()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scenario(pilot, app.query_one(DiffView))

    asyncio.run(main())


def strips(view: DiffView) -> list[Strip]:
    """Every row of the pane as drawn, from the top of the diff (scrolled through as needed)."""
    rows: dict[int, Strip] = {}
    height = view.scrollable_size.height
    for top in range(0, view.total_rows, height):
        view.scroll_to(0, top, animate=False, immediate=True)
        for y in range(height):
            rows.setdefault(round(view.scroll_offset.y) + y, view.render_line(y))
    view.scroll_to(0, 0, animate=False, immediate=True)
    return [rows[row] for row in range(view.total_rows)]


def texts(view: DiffView) -> list[str]:
    return [strip.text.rstrip() for strip in strips(view)]


def row_with(view: DiffView, needle: str) -> Strip:
    return next(strip for strip in strips(view) if needle in strip.text)


def with_background(strip: Strip, color: Color | None) -> list[str]:
    """The runs of text drawn over `color` (adjacent segments joined)."""
    runs: list[str] = []
    previous = False
    for segment in strip:
        over = segment.style is not None and segment.style.bgcolor == color
        if over and previous:
            runs[-1] += segment.text
        elif over:
            runs.append(segment.text)
        previous = over
    return runs


def look(strip: Strip, word: str) -> tuple[Any, ...]:
    """How `word` is drawn in a row: colour, bold, italic, dim."""
    for segment in strip:
        if segment.text.strip() == word and segment.style is not None:
            style = segment.style
            return (style.color, bool(style.bold), bool(style.italic), bool(style.dim))
    raise AssertionError(f"no segment {word!r} in {[s.text for s in strip]}")


def plain(view: DiffView) -> tuple[Any, ...]:
    return (view.rich_style.color, False, False, False)


def test_the_changed_words_of_a_pair_are_marked() -> None:
    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit hook notes.py"), HOOK_EDIT)
        view.set_split(False)
        await pilot.pause()
        word = {
            k: view.get_component_rich_style(f"diff-view--{k}-word").bgcolor for k in ("added", "removed")
        }
        line = {k: view.get_component_rich_style(f"diff-view--{k}").bgcolor for k in ("added", "removed")}
        assert word["added"] != line["added"] and word["removed"] != line["removed"]
        removed, added = row_with(view, "2   - PROMPT"), row_with(view, "  2 + PROMPT")
        assert with_background(removed, word["removed"]) == ["plainly and briefly", "say when"]
        assert with_background(added, word["added"]) == ["tersely", "never mention that"]
        limit = row_with(view, "+ LIMIT = 3")
        assert with_background(limit, word["added"]) == [], (
            "a line with no partner: its whole line is the change"
        )
        assert with_background(limit, line["added"]), "drawn over the added background"

    run(scenario, size=(140, 30))


def test_python_is_highlighted_and_plain_text_is_not() -> None:
    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit"), HOOK_EDIT)
        await pilot.pause()
        row = row_with(view, "def main()")
        assert look(row, "def") != plain(view), "a keyword has its own colour"
        assert look(row, "def") != look(row, "main"), "keyword and function name differ"
        view.show(
            Text("edit"), HOOK_EDIT.replace("hooks/notes.py", "notes/todo.txt").replace("python3", "true")
        )
        await pilot.pause()
        row = row_with(view, "def main()")
        assert look(row, "def main() -> None:") == plain(view), "an unknown type is not coloured"

    run(scenario)


def test_markdown_json_and_shell_by_name_and_shebang() -> None:
    diff = (
        "--- a/prompts/chat.md\n+++ b/prompts/chat.md\n@@ -1 +1 @@\n-# Chat\n+# Talk\n"
        '--- a/config/evolve.jsonc\n+++ b/config/evolve.jsonc\n@@ -1,2 +1,2 @@\n // settings\n-{"review": "log"}\n+{"review": "gate"}\n'
        "--- a/hooks/guard\n+++ b/hooks/guard\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-echo no\n+echo yes\n"
    )

    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("three files"), diff)
        await pilot.pause()
        assert look(row_with(view, "# Talk"), "# Talk") != plain(view), "a Markdown heading"
        assert look(row_with(view, "// settings"), "// settings") != plain(view), "a JSONC comment"
        assert look(row_with(view, '"gate"'), '"review"') != plain(view), "a JSON key"
        assert look(row_with(view, "echo yes"), "echo") != plain(view), "a shell builtin, by its #! line"

    run(scenario)


def test_long_lines_wrap_at_words_with_a_continuation_mark() -> None:
    prose = "Answer plainly and briefly, and say in one line what you changed. " * 4  # 268 characters
    blob = "x" * 130  # no blank to wrap at
    diff = f"--- a/prompts/chat.md\n+++ b/prompts/chat.md\n@@ -1,2 +1,3 @@\n {prose}\n {blob}\n+short\n"

    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("wrap"), diff)
        await pilot.pause()
        text_width = view.scrollable_size.width - 6  # "1 1 " and the sign column ("  ")
        rows = [strip.text[:6] + strip.text[6:].rstrip() for strip in strips(view)]
        first = next(i for i, row in enumerate(rows) if row.startswith("1 1   Answer"))
        last = next(i for i, row in enumerate(rows) if row.startswith("2 2   xxx"))
        wrapped = rows[first:last]
        assert len(wrapped) > 1 and all(len(row) <= 6 + text_width for row in wrapped)
        assert [row[4] for row in wrapped] == [" "] + [CONTINUATION] * (len(wrapped) - 1)
        assert all(row[:4] == "    " for row in wrapped[1:]), "no line numbers on a continuation"
        assert " ".join(row[6:] for row in wrapped) == prose.rstrip(), "cut between words, nothing lost"
        hard = rows[last : last + 3]
        assert [row[6:] for row in hard] == ["x" * text_width, "x" * text_width, "x" * (130 - 2 * text_width)]
        assert rows[last + 3].startswith("  3 + short"), "the next line follows the last row"

    run(scenario, size=(60, 30))


def test_side_by_side_puts_old_and_new_in_two_columns() -> None:
    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit"), HOOK_EDIT)
        view.set_split(True)
        await pilot.pause()
        width = view.scrollable_size.width
        assert width >= MIN_SPLIT
        half = (width - 1) // 2
        rows = texts(view)
        body = [row for row in rows if len(row) > half and row[half] == "│"]
        assert len(body) >= 6, rows
        left, right = ([row[:half].rstrip() for row in body], [row[half + 1 :].rstrip() for row in body])
        assert left[0] == "1   #!/usr/bin/env python3" and right[0] == "1   #!/usr/bin/env python3"
        assert left[1].startswith("2 - PROMPT = ") and right[1].startswith("2 + PROMPT = ")
        row = next(i for i, text in enumerate(right) if text.startswith("3 + LIMIT"))
        assert left[row] == "", "an added line without a partner faces nothing"
        assert any(text.startswith(f"  {CONTINUATION}") for text in left), "each side wraps in its column"
        view.set_split(False)
        await pilot.pause()
        assert not any(len(row) > half and row[half] == "│" for row in texts(view)), "unified again"

    run(scenario, size=(120, 30))


def test_too_narrow_for_side_by_side_says_so_and_stays_unified() -> None:
    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit"), HOOK_EDIT)
        view.set_split(True)
        await pilot.pause()
        assert not view.split_fits()
        rows = texts(view)
        message = f"side by side needs {MIN_SPLIT} columns; this pane has {view.scrollable_size.width}"
        assert any(message in row for row in rows), rows
        assert any(row.startswith("  2 + PROMPT") for row in rows), "the diff is shown unified"
        await pilot.resize_terminal(130, 30)
        await pilot.pause()
        rows = texts(view)
        assert not any("side by side needs" in row for row in rows)
        assert any("│" in row and row.startswith("2 - PROMPT") for row in rows), "wide enough now"

    run(scenario, size=(80, 30))


def test_line_end_marks() -> None:
    diff = "--- a/n.txt\n+++ b/n.txt\n@@ -1 +1 @@\n-two\r\n+two\n\\ No newline at end of file\n"

    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("eol"), diff)
        await pilot.pause()
        rows = texts(view)
        assert f"1   - two{CR}" in rows
        assert f"  1 + two{NO_NEWLINE}" in rows

    run(scenario)


def test_a_whole_file_marks_the_changed_lines_among_all_the_others() -> None:
    lines = ["#!/usr/bin/env python3"] + [f"# line {i}" for i in range(2, 101)]
    lines[49] = "x = 2"
    content = "\n".join(lines) + "\n"
    diff = "--- a/hooks/n.py\n+++ b/hooks/n.py\n@@ -48,5 +48,5 @@\n # line 48\n # line 49\n-x = 1\n+x = 2\n # line 51\n # line 52\n"

    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit"), diff)
        await pilot.pause()
        assert view.current_file() is not None and view.current_file().path == "hooks/n.py"  # type: ignore[union-attr]
        view.show_whole("hooks/n.py", content, "hooks/n.py, whole")
        await pilot.pause()
        on_screen = [view.render_line(y).text.rstrip() for y in range(view.scrollable_size.height)]
        assert on_screen[3:5] == [" 50     - x = 1", "     50 + x = 2"], (
            "it opens at the first change, 3 rows down"
        )
        rows = texts(view)
        assert "hooks/n.py, whole" in rows
        assert not any(row.startswith("@@") for row in rows), "one hunk, the whole file: no hunk header"
        numbered = [row for row in rows if row[:7].strip()[:1].isdigit()]
        assert numbered[0] == "  1   1   #!/usr/bin/env python3"
        assert numbered[48:52] == [
            " 49  49   # line 49",
            " 50     - x = 1",
            "     50 + x = 2",
            " 51  51   # line 51",
        ]
        assert numbered[-1] == "100 100   # line 100"
        assert len(numbered) == 101
        view.show_diff()
        await pilot.pause()
        assert any(row.startswith("@@ -48,5 +48,5 @@") for row in texts(view)), "back to the diff"

    run(scenario)


def test_the_end_of_a_2_mb_diff_is_drawn() -> None:
    lines = [f"value_{i} = compute({i}, 'payload')" for i in range(24_000)]
    diff = f"--- a/hooks/big.py\n+++ b/hooks/big.py\n@@ -1,{len(lines)} +1,{len(lines)} @@\n" + "".join(
        f"-{line}\n+{line.replace('payload', 'PAYLOAD')}\n" for line in lines
    )
    assert 1_900_000 < len(diff) <= 2_000_000  # about the most the engine sends

    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("big"), diff)
        await pilot.pause()
        view.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        rows = [view.render_line(y).text.rstrip() for y in range(view.size.height)]
        assert rows[-1] == "      24000 + value_23999 = compute(23999, 'PAYLOAD')", rows
        word = view.get_component_rich_style("diff-view--added-word").bgcolor
        added = next(view.render_line(y) for y in range(view.size.height) if "+ value_" in rows[y])
        assert with_background(added, word) == ["PAYLOAD"], "the words of the last pairs are marked too"

    run(scenario)


def test_selected_text_is_what_the_rows_show() -> None:
    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit"), HOOK_EDIT)
        await pilot.pause()
        rows = texts(view)
        limit = rows.index("  3 + LIMIT = 3")
        copied = view.get_selection(Selection(Offset(6, limit), Offset(11, limit + 1)))
        assert copied is not None
        assert copied[0] == f"LIMIT = 3\n{rows[limit + 1][:11]}"
        everything = view.get_selection(Selection(None, None))
        assert everything is not None and everything[0].startswith(
            "edit\n\nhooks/notes.py → hooks/notes.py (modified)\n"
        )
        assert "\n-PROMPT = " in everything[0] and "\n+LIMIT = 3\n" in everything[0]
        view.screen.selections = {view: Selection(Offset(6, limit), Offset(11, limit))}
        await pilot.pause()
        selected = view.screen.get_component_rich_style("screen--selection").bgcolor
        row = view.render_line(limit - round(view.scroll_offset.y))
        assert with_background(row, selected) == ["LIMIT"]

    run(scenario, size=(140, 30))


# ---- colours for the terminal's depth -------------------------------------------------------------


def style_at(strip: Strip, needle: str) -> Style:
    """The style of the first character of `needle` in a row."""
    at = strip.text.index(needle)
    x = 0
    for segment in strip:
        if x <= at < x + len(segment.text):
            return segment.style or Style()
        x += len(segment.text)
    raise AssertionError(f"{needle!r} is not in {strip.text!r}")


def drawn(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str | None]
) -> tuple[str, dict[str, Style]]:
    """The edit drawn by an app started under `environment` (TERM, COLORTERM, NO_COLOR): the app's
    colour system, and the style of each of: the pane, a removed and an added line, a removed and an
    added word."""
    for key, value in environment.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    found: dict[str, Style] = {}
    system: list[str] = []

    async def scenario(pilot: Pilot[Any], view: DiffView) -> None:
        view.show(Text("edit hook notes.py"), HOOK_EDIT)
        view.set_split(False)
        await pilot.pause()
        removed, added = row_with(view, "2   - PROMPT"), row_with(view, "  2 + PROMPT")
        found["pane"] = view.rich_style
        found["removed"], found["added"] = style_at(removed, "careful"), style_at(added, "careful")
        found["removed-word"], found["added-word"] = style_at(removed, "plainly"), style_at(added, "tersely")
        found["removed-sign"], found["added-sign"] = style_at(removed, "-"), style_at(added, "+")
        system.append(str(view.app.console.color_system))

    run(scenario, size=(140, 30))
    return system[0], found


LAYERS = ("pane", "removed", "added", "removed-word", "added-word")


def test_added_removed_and_changed_words_keep_apart_in_true_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    system, styles = drawn(monkeypatch, {"TERM": "xterm-256color", "COLORTERM": "truecolor"})
    assert system == "truecolor"
    backgrounds = [styles[name].bgcolor for name in LAYERS]
    assert None not in backgrounds and len(set(backgrounds)) == len(LAYERS), backgrounds


def test_in_256_colours_each_background_rounds_to_a_colour_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A terminal of 256 colours rounds the theme's light tints of the dark pane: added and removed
    lines both came out black."""
    system, styles = drawn(monkeypatch, {"TERM": "xterm-256color", "COLORTERM": None})
    assert system == "256"
    shown = {}
    for name in LAYERS:
        color = styles[name].bgcolor
        assert color is not None, name
        shown[name] = color.downgrade(ColorSystem.EIGHT_BIT).get_truecolor()
    for a, b in itertools.combinations(LAYERS, 2):
        distance = sum((x - y) ** 2 for x, y in zip(shown[a], shown[b], strict=True)) ** 0.5
        assert distance >= 40, f"{a} and {b} look the same in 256 colours: {shown}"


def test_in_16_colours_lines_are_green_and_red_and_words_are_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    system, styles = drawn(monkeypatch, {"TERM": "xterm", "COLORTERM": None})
    assert system == "standard"

    def color(name: str) -> int | None:
        found = styles[name].color
        return found.downgrade(ColorSystem.STANDARD).number if found is not None else None

    assert (color("removed"), color("added")) == (1, 2), "red and green"
    removed, added = styles["removed-word"], styles["added-word"]
    assert removed.reverse and removed.strike and not removed.underline, "a removed word: struck"
    assert added.reverse and added.underline and not added.strike, "an added word: underlined"


def test_without_colour_the_signs_and_the_words_are_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    _, styles = drawn(monkeypatch, {"NO_COLOR": "1"})
    removed, added = styles["removed-word"], styles["added-word"]
    assert removed.strike and not removed.underline and added.underline and not added.strike, (
        "the changed words carry a mark, not only a colour"
    )
    assert not (styles["removed"].strike or styles["removed"].underline), "the rest of the line is not marked"
