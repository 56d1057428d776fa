"""The console's tables, drawn without an engine (the snapshots of the views are in
tests/console/test_snapshots.py)."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult

from evolve_console.table import KeyedTable
from tests.support.screens import text_lines


def test_table_columns_fit_rows_drawn_early() -> None:
    class TableApp(App[None]):
        CSS = "KeyedTable { width: 50; height: 8; }"

        def compose(self) -> ComposeResult:
            yield KeyedTable([("time", "time"), ("stage", "stage")], id="t")

    async def main() -> str:
        app = TableApp()
        async with app.run_test(size=(60, 10)) as pilot:
            await pilot.pause()
            app.query_one(KeyedTable).upsert([("a", ["09:10:00", "mutate_request"])])
            app.export_screenshot()  # a frame drawn before the table's idle, as happens at random
            await pilot.pause(0.3)
            return app.export_screenshot()

    svg = asyncio.run(main())
    assert "mutate_request" in svg, [line for line in text_lines(svg) if "mutat" in line]
