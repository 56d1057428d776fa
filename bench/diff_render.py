"""How long the console's diff view takes to open and draw a 2 MB diff (the most the engine sends).

Two diffs of 2,000,000 characters, made from the example hook repeated: a new file (one hunk of
~52,000 added lines) and a modification (~7,000 hunks, one line in seven changed mid-way, so every
pair is compared word by word). Each is shown in a `DiffView` in a headless Textual app at 140x40.

Printed per diff (median of --repeat runs, milliseconds):
- parse: `diffmodel.parse` of the text;
- prepare (thread): `diffprepare.prepare`, parse included, each line as drawn and its width (the
  console does this in a worker thread);
- show (loop): `DiffView.show` of the prepared diff: the layout at the width (every line's height);
- show + first frame: until Textual has drawn the first screen (syntax highlighting and word
  marks of the lines on it);
- page: drawing a screen after jumping to a place not drawn before (the middle, the end);
- side by side: the layout at the full width with both halves, and its first screen;
- resize: the layout at another width (every line's wrapped height again), and its screen.

Run: .venv/bin/python bench/diff_render.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult

from evolve_console.diffmodel import parse
from evolve_console.diffprepare import Prepared, prepare
from evolve_console.diffview import DiffView

LIMIT = 2_000_000  # the engine cuts a commit's patch here
SOURCE = (Path(__file__).resolve().parent.parent / "engine" / "example" / "hooks" / "notes.py").read_text()


def added_file_diff() -> str:
    lines = (SOURCE * 200).split("\n")
    head = f"diff --git a/hooks/big.py b/hooks/big.py\nnew file mode 100755\n--- /dev/null\n+++ b/hooks/big.py\n@@ -0,0 +1,{len(lines)} @@\n"
    return (head + "".join(f"+{line}\n" for line in lines))[:LIMIT]


def modified_file_diff() -> str:
    lines = (SOURCE * 200).split("\n")
    out = ["diff --git a/hooks/big.py b/hooks/big.py\n--- a/hooks/big.py\n+++ b/hooks/big.py\n"]
    for i in range(3, len(lines) - 3, 7):
        old = lines[i]
        new = old.replace("a", "A", 1) + "  # changed"
        out.append(f"@@ -{i - 2},7 +{i - 2},7 @@\n")
        out += [f" {line}\n" for line in lines[i - 3 : i]]
        out += [f"-{old}\n", f"+{new}\n"]
        out += [f" {line}\n" for line in lines[i + 1 : i + 4]]
    return "".join(out)[:LIMIT]


class BenchApp(App[None]):
    CSS = "DiffView { width: 1fr; height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield DiffView("bench", id="diff")


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return (time.perf_counter() - start) * 1000


def screen(view: DiffView) -> None:
    """Every row on screen, drawn by the widget (Textual's own line cache bypassed)."""
    view._base = view.rich_style
    for y in range(view.size.height):
        view.render_line(y)


async def measure(text: str) -> dict[str, float]:
    app = BenchApp()
    out: dict[str, float] = {}
    async with app.run_test(size=(140, 40)) as pilot:
        view = app.query_one(DiffView)
        await pilot.pause()
        out["parse"] = timed(lambda: parse(text))
        prepared: list[Prepared] = []
        out["prepare (thread)"] = timed(lambda: prepared.append(prepare(text)))
        start = time.perf_counter()
        view.show(Text("head"), prepared[0])
        out["show (loop)"] = (time.perf_counter() - start) * 1000
        await pilot.pause()  # Textual lays out the new scrollbars and draws the first screen
        out["show + first frame"] = (time.perf_counter() - start) * 1000
        rows = view.total_rows
        view.scroll_to(0, rows // 2, animate=False, immediate=True)
        assert view.scroll_offset.y == rows // 2, view.scroll_offset
        out["page (middle)"] = timed(lambda: screen(view))
        view.scroll_to(0, rows, animate=False, immediate=True)
        out["page (end)"] = timed(lambda: screen(view))
        view.scroll_to(0, 0, animate=False, immediate=True)
        await pilot.resize_terminal(240, 40)  # the diff at the full width of a wide terminal
        await pilot.pause()
        out["side by side"] = timed(lambda: view.set_split(True))
        out["side by side screen"] = timed(lambda: screen(view))
        view.set_split(False)
        await pilot.resize_terminal(100, 40)
        await pilot.pause()
        view._layout = None  # measure the relayout itself, not when Textual happened to call it
        out["resize"] = timed(lambda: view._ensure_layout())
        out["resize screen"] = timed(lambda: screen(view))
        out["rows"] = rows
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for name, text in (("new file", added_file_diff()), ("modified", modified_file_diff())):
        runs = [asyncio.run(measure(text)) for _ in range(args.repeat)]
        lines = text.count("\n")
        print(
            f"{name}: {len(text):,} characters, {lines:,} lines, {int(runs[0]['rows']):,} rows at 140 columns"
        )
        for key in runs[0]:
            if key != "rows":
                print(f"  {key:<22} {statistics.median(r[key] for r in runs):8.1f} ms")


if __name__ == "__main__":
    main()
