"""The console's own widgets in small apps: the keyed table, the detail pane, the key and view bars.

These are the parts drawn line by line for speed; the tests check what they draw and how they
behave under keys, clicks and a stream of rows, through Textual's Pilot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Offset, Region
from textual.pilot import Pilot
from textual.selection import Selection
from textual.widget import Widget
from textual.widgets import Input, TextArea

from evolve_console.connectionbar import ConnectionBar
from evolve_console.detail import DetailPane, Part
from evolve_console.format import PREVIEW_LIMIT
from evolve_console.keybar import KeyBar
from evolve_console.screens import MoreScreen
from evolve_console.status import Pieces
from evolve_console.table import MAX_ROWS, KeyedTable
from evolve_console.viewbar import ViewBar
from evolve_console.wrapbar import place

COLUMNS = [("time", "time"), ("stage", "stage"), ("status", "status")]


def lines(widget: Widget) -> list[str]:
    """The text of each line the widget draws now (what the screen gets from it)."""
    size = widget.outer_size
    return [strip.text for strip in widget.render_lines(Region(0, 0, size.width, size.height))]


def rows(n: int, start: int = 0, stage: str = "idle") -> list[tuple[str, list[Any]]]:
    return [(f"r{i}", [f"{i:08d}", stage, Text("ok", style="green")]) for i in range(start, start + n)]


class TableApp(App[None]):
    CSS = "KeyedTable { height: 12; width: 60; }"

    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[str] = []

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="t")

    def on_keyed_table_row_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.highlighted.append(event.key)


def run_app(
    app: App[Any], scenario: Callable[[Pilot[Any]], Awaitable[None]], size: tuple[int, int] = (80, 20)
) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scenario(pilot)

    asyncio.run(main())


def test_table_follows_new_rows_and_reports_the_highlighted_key() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(30))
        await pilot.pause()
        assert table.following and table.cursor_row == 29 and table.selected_key() == "r29"
        assert app.highlighted[-1] == "r29"
        shown = lines(table)
        assert shown[0].split() == ["time", "stage", "status"]
        assert "00000029" in shown[-1], "the newest row is on screen, at the bottom"
        table.upsert(rows(5, start=30))
        await pilot.pause()
        assert table.selected_key() == "r34" and app.highlighted[-1] == "r34"
        assert "00000034" in lines(table)[-1]

    run_app(app, scenario)


def test_table_parks_the_cursor_and_counts_what_arrives() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(30))
        table.focus()
        await pilot.pause()
        await pilot.press("up", "up")
        assert not table.following and table.selected_key() == "r27"
        table.upsert(rows(4, start=30))
        await pilot.pause()
        assert table.selected_key() == "r27" and table.unseen == 4
        assert app.highlighted[-1] == "r27", "new rows while parked move nothing"
        await pilot.press("end")
        assert table.following and table.unseen == 0 and table.selected_key() == "r33"

    run_app(app, scenario)


def test_table_keeps_a_parked_row_on_screen_while_old_rows_are_dropped() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(MAX_ROWS))
        table.focus()
        await pilot.pause()
        await pilot.press("up", "up", "up")
        parked = table.selected_key()
        before = lines(table)
        line_of_parked = next(i for i, line in enumerate(before) if f"{MAX_ROWS - 4:08d}" in line)
        table.upsert(rows(50, start=MAX_ROWS))  # 50 of the oldest rows are dropped
        await pilot.pause()
        assert table.row_count == MAX_ROWS and "r0" not in table.rows and "r49" not in table.rows
        assert table.selected_key() == parked
        assert table.cursor_row == table.get_row_index(parked)
        after = lines(table)
        assert after == before, "the same rows on the same lines"
        assert f"{MAX_ROWS - 4:08d}" in after[line_of_parked]

    run_app(app, scenario)


def test_table_redraws_an_updated_row_and_keeps_cell_styles() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert([("a", ["1", "idle", Text("ok", style="green")]), ("b", ["2", "idle", "-"])])
        await pilot.pause()
        assert "ok" in lines(table)[1]
        table.upsert([("a", ["1", "idle", Text("failed", style="bold red")])])
        await pilot.pause()
        assert table.row_count == 2 and table.keys() == ["a", "b"]
        assert "failed" in lines(table)[1] and "ok" not in lines(table)[1]
        size = table.outer_size
        strip = table.render_lines(Region(0, 0, size.width, size.height))[1]
        styles = [seg.style for seg in strip if seg.text.strip() == "failed"]
        assert styles and styles[0] is not None and styles[0].bold
        assert styles[0].color is not None and styles[0].color.triplet is not None
        red, green, _ = styles[0].color.triplet
        assert red > green, f"failed is drawn red, got {styles[0].color}"

    run_app(app, scenario)


def test_table_click_selects_the_row() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(5))
        await pilot.pause()
        await pilot.click(KeyedTable, offset=Offset(3, 2))  # line 0 is the header, line 2 is r1
        await pilot.pause()
        assert table.selected_key() == "r1" and app.highlighted[-1] == "r1"
        assert not table.following

    run_app(app, scenario)


def test_table_replace_all_and_a_selected_row_dropped() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(10))
        table.move_cursor(row=2)
        table.replace_all(rows(3, start=100))
        await pilot.pause()
        assert table.keys() == ["r100", "r101", "r102"]
        assert table.following and table.selected_key() == "r102"
        table.clear()
        await pilot.pause()
        assert table.row_count == 0 and table.selected_key() is None
        assert lines(table)[1].strip() == ""

    run_app(app, scenario)


def test_table_reload_keeps_a_parked_row_and_an_updated_row_is_announced() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(20))
        table.focus()
        await pilot.pause()
        await pilot.press("up", "up")
        assert table.selected_key() == "r17"
        table.replace_all(rows(25))  # a reload from the journal, with newer rows
        await pilot.pause()
        assert table.selected_key() == "r17" and not table.following
        seen = len(app.highlighted)
        table.upsert([("r17", ["00000017", "idle", Text("failed", style="red")])])  # the run ended
        await pilot.pause()
        assert app.highlighted[seen:] == ["r17"], "the selected row changed: its details are stale"
        table.upsert([("r3", ["00000003", "idle", "ok"])])  # another row: nothing to announce
        await pilot.pause()
        assert app.highlighted[seen:] == ["r17"]

    run_app(app, scenario)


def test_table_click_below_the_rows_and_a_dropped_parked_row() -> None:
    app = TableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(3))
        table.focus()
        await pilot.pause()
        await pilot.press("up")
        await pilot.click(KeyedTable, offset=Offset(3, 8))  # blank, below the three rows
        await pilot.pause()
        assert table.selected_key() == "r1" and not table.following
        await pilot.press("home")
        table.upsert(rows(MAX_ROWS, start=3))  # r0..r2 are dropped, the parked one with them
        await pilot.pause()
        assert table.selected_key() == "r3" and table.cursor_row == 0

    run_app(app, scenario)


class LiveTableApp(TableApp):
    """A table of live rows, which says when it does not follow them; its clock is the test's."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def compose(self) -> ComposeResult:
        yield KeyedTable(COLUMNS, id="t", tells_following=True, clock=lambda: self.now)


def test_a_row_picked_with_the_arrows_stays_even_the_last_and_the_table_says_so() -> None:
    app = LiveTableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(30))
        table.focus()
        await pilot.pause()
        assert table.following and "following paused" not in "".join(lines(table))
        await pilot.press("up", "down")  # back on the last row, picked
        assert table.selected_key() == "r29" and not table.following
        assert lines(table)[-1].strip() == "following paused · g: follow"
        app.now += 10
        table.upsert(rows(2, start=30))
        await pilot.pause()
        assert table.selected_key() == "r29" and table.unseen == 2, "new rows move nothing"
        assert app.highlighted[-1] == "r29"
        shown = lines(table)
        assert shown[-1].strip() == "following paused · +2 new · g: follow"
        assert "00000029" in shown[-2], "the picked row above the line that says so"
        await pilot.press("down", "down")  # the last row, picked again
        assert table.selected_key() == "r31" and not table.following
        table.upsert(rows(1, start=32))
        await pilot.pause()
        assert table.selected_key() == "r31" and table.unseen == 3
        # A click on that line follows again, as g (the view's key) and end do.
        await pilot.click(KeyedTable, offset=Offset(3, table.scrollable_size.height - 1))
        await pilot.pause()
        assert table.following and table.selected_key() == "r32" and table.unseen == 0
        assert "following paused" not in "".join(lines(table))
        table.upsert(rows(1, start=33))
        await pilot.pause()
        assert table.selected_key() == "r33"
        await pilot.press("home")
        assert table.selected_key() == "r0" and not table.following
        await pilot.press("end")
        assert table.following and table.selected_key() == "r33"

    run_app(app, scenario)


def test_a_key_pressed_as_new_rows_arrive_moves_from_the_row_the_operator_saw() -> None:
    app = LiveTableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(30))
        table.focus()
        await pilot.pause()
        # Two rows arrive while the operator, looking at r29 under the cursor, presses up: the
        # press was aimed from r29, not from the row that arrived a moment before it.
        table.upsert(rows(2, start=30))
        await pilot.pause()
        assert table.selected_key() == "r31", "following: the cursor went to the new last row"
        app.now += 0.2
        await pilot.press("up", "up", "up", "up")
        assert table.selected_key() == "r25" and not table.following
        # Seen long enough ago, the new row is where a key counts from.
        table.follow()
        table.upsert(rows(1, start=32))
        await pilot.pause()
        app.now += 2
        await pilot.press("up")
        assert table.selected_key() == "r31"

    run_app(app, scenario)


def test_a_reload_in_another_order_keeps_a_parked_row_on_its_line() -> None:
    app = LiveTableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.upsert(rows(40))
        table.focus()
        await pilot.pause()
        await pilot.press("up", "up", "up", "up")
        parked = table.selected_key()
        before = lines(table)
        line_of = next(i for i, line in enumerate(before) if "00000035" in line)
        seen = len(app.highlighted)
        # A row inserted before the parked one (a commit before the held changes) and one gone:
        # every index below them shifts.
        reloaded = rows(40)
        reloaded.insert(20, ("n1", ["new-0001", "idle", "ok"]))
        del reloaded[5]
        table.replace_all(reloaded)
        await pilot.pause()
        assert table.selected_key() == parked == "r35" and not table.following
        after = lines(table)
        assert "00000035" in after[line_of], "the parked row on the line it was on"
        assert after[1:line_of] == before[1:line_of], "and the rows above it where they were"
        assert app.highlighted[seen:] == ["r35"], "the row it stays on, said once"

    run_app(app, scenario)


def test_an_empty_table_says_what_will_appear_and_when() -> None:
    app = LiveTableApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        table.empty = "Rows appear here as the hooks run, once an opencode is connected to the agent."
        await pilot.pause()
        shown = [line.strip() for line in lines(table)]
        assert shown[0].split() == ["time", "stage", "status"]
        assert shown[1] == "", "a blank line under the header"
        words = " ".join(line for line in shown[2:] if line)
        assert words == "Rows appear here as the hooks run, once an opencode is connected to the agent."
        assert len(shown[2]) < len(words), "wrapped at the table's width"
        table.upsert(rows(1))
        await pilot.pause()
        assert "Rows appear" not in "".join(lines(table))
        table.clear()
        await pilot.pause()
        assert "Rows appear here" in "".join(lines(table))

    run_app(app, scenario)


class PageApp(TableApp):
    """The table in a page that another view hides, as in the console."""

    CSS = "KeyedTable { height: 12; width: 60; }"

    def compose(self) -> ComposeResult:
        with Vertical(id="page"):
            yield KeyedTable(COLUMNS, id="t")

    def on_mount(self) -> None:
        # Rows before the first layout: the table has its scrollbar from the start.
        self.query_one(KeyedTable).upsert(rows(MAX_ROWS))


def test_table_rows_drawn_while_hidden_span_the_view_and_stripes_stay_put() -> None:
    app = PageApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        table = app.query_one(KeyedTable)
        page = app.query_one("#page")
        await pilot.pause()
        page.display = False
        await pilot.pause()
        table.upsert(rows(5, start=MAX_ROWS))  # drawn ahead while hidden
        page.display = True
        await pilot.pause()
        size = table.outer_size
        strips = table.render_lines(Region(0, 0, size.width, size.height))
        cursor = strips[-1].crop(0, table.scrollable_size.width)  # (the scrollbar's column aside)
        assert f"{MAX_ROWS + 4:08d}" in cursor.text
        backgrounds = {seg.style.bgcolor for seg in cursor if seg.style is not None}
        assert len(backgrounds) == 1, f"the cursor's colour spans the row: {backgrounds}"

        def background_of(number: int) -> object:
            line = next(
                s
                for s in table.render_lines(Region(0, 0, size.width, size.height))
                if f"{number:08d}" in s.text
            )
            return next(seg.style.bgcolor for seg in line if seg.style is not None)

        table.focus()
        await pilot.press("up", "up", "up")  # park, so that the rows on screen stay
        stripe = background_of(MAX_ROWS)
        table.upsert(rows(1, start=MAX_ROWS + 5))  # one row more: one dropped, every index shifts
        await pilot.pause()
        assert background_of(MAX_ROWS) == stripe, "a row keeps its stripe"

    run_app(app, scenario)


class PaneApp(App[None]):
    CSS = "DetailPane { height: 10; width: 40; }"

    def compose(self) -> ComposeResult:
        yield DetailPane("nothing yet", id="pane")


def test_detail_pane_wraps_cuts_and_scrolls() -> None:
    app = PaneApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        pane = app.query_one(DetailPane)
        assert lines(pane)[0].startswith("nothing yet")
        huge = "x" * (PREVIEW_LIMIT + 500)
        words = " ".join(f"word{i}" for i in range(60))
        pane.show(
            Text("head line", style="bold"),
            [Part("short", "short", words), Part("huge", "huge", huge), Part("empty", "empty", "")],
        )
        await pilot.pause()
        shown = lines(pane)
        assert shown[0].startswith("head line")
        assert all(len(line.rstrip()) <= 40 for line in shown)
        assert [p.id for p in pane.truncated] == ["huge"]
        assert pane.bodies["huge"] == "x" * PREVIEW_LIMIT
        assert "500 more characters (press m to see more)" in pane.plain
        assert "(none)" in pane.plain, "an empty part says so"
        assert pane.show_vertical_scrollbar
        pane.focus()
        await pilot.press("end")
        await pilot.wait_for_animation()
        assert "(none)" in lines(pane)[-1], "the last line is on screen after end"

    run_app(app, scenario)


def test_detail_pane_height_changes_update_the_scrollbar() -> None:
    app = PaneApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        pane = app.query_one(DetailPane)
        pane.show(Text("a"), [Part("p", "p", "\n".join(str(i) for i in range(50)))])
        await pilot.pause()
        assert pane.show_vertical_scrollbar
        assert pane.vertical_scrollbar.window_virtual_size == pane.virtual_size.height >= 50
        pane.show(Text("b"), [Part("p", "p", "\n".join(str(i) for i in range(20)))])
        await pilot.pause()
        assert pane.vertical_scrollbar.window_virtual_size == pane.virtual_size.height < 30
        pane.show(Text("c"), [Part("p", "p", "short")])
        await pilot.pause()
        assert pane.virtual_size.height < 10 and pane.max_scroll_y == 0
        pane.show(Text("d"), [Part("p", "p", "\n".join(str(i) for i in range(40)))])
        await pilot.pause()
        assert pane.show_vertical_scrollbar and pane.max_scroll_y > 0

    run_app(app, scenario)


def test_detail_pane_text_can_be_selected_for_copying() -> None:
    app = PaneApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        pane = app.query_one(DetailPane)
        pane.show(Text("session ses_42"), [Part("p", "prompt", "You are opencode.")])
        await pilot.pause()
        selected = pane.get_selection(Selection(Offset(8, 0), Offset(14, 0)))
        assert selected is not None and selected[0] == "ses_42"
        everything = pane.get_selection(Selection(None, None))
        assert everything is not None and "You are opencode." in everything[0]
        app.screen.selections = {pane: Selection(Offset(8, 0), Offset(14, 0))}
        assert pane.text_selection is not None
        pane.show(Text("session abcdef"), [Part("p", "prompt", "other")])
        assert pane.text_selection is None, "a selection made on the text shown before is dropped"


def test_detail_pane_focus_changes_do_not_wrap_again() -> None:
    app = PaneApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        pane = app.query_one(DetailPane)
        pane.show(Text("head"), [Part("p", "p", "word " * 20_000)])
        await pilot.pause()
        wrapped = pane._wrapped  # the wrapped lines, as the pane keeps them
        pane.focus()
        await pilot.pause()
        pane.blur()
        await pilot.pause()
        assert pane._wrapped is wrapped, "a focus change restyles, it does not wrap 100 KB again"
        assert lines(pane)[0].startswith("head")

    run_app(app, scenario)


class KeysApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "fire", "Fire", tooltip="fire it"),
        Binding("a", "approve", "Approve"),
        Binding("x", "hidden", "Hidden"),
        Binding("1", "first", "First", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.done: list[str] = []

    def compose(self) -> ComposeResult:
        yield KeyBar(id="keys")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return {"approve": None, "hidden": False}.get(action, True)

    def action_fire(self) -> None:
        self.done.append("fire")

    def action_approve(self) -> None:
        self.done.append("approve")


def test_key_bar_shows_keys_and_clicks_press_them() -> None:
    app = KeysApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        bar = app.query_one(KeyBar)
        await pilot.pause()
        text = lines(bar)[0]
        assert "f Fire" in text and "a Approve" in text
        assert "Hidden" not in text, "check_action False hides a key"
        assert "First" not in text, "show=False keys are not listed"
        assert "palette" in text
        assert [k[0] for k in bar.keys if not k[3]] == ["a"], "check_action None dims a key"
        fire_x = text.index("f Fire")
        await pilot.click(KeyBar, offset=Offset(fire_x + 2, 0))
        await pilot.pause()
        assert app.done == ["fire"]
        await pilot.click(KeyBar, offset=Offset(text.index("a Approve") + 2, 0))
        await pilot.pause()
        assert app.done == ["fire"], "a dimmed key does nothing"
        await pilot.hover(KeyBar, offset=Offset(fire_x, 0))
        await pilot.pause()
        assert bar.tooltip == "fire it"

    run_app(app, scenario, size=(80, 6))


class Panel(Vertical, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("g", "follow", "Follow")]

    def action_follow(self) -> None:
        pass


class ChainApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "fire", "Fire"),
        Binding("q", "quit", "Quit"),
    ]

    def compose(self) -> ComposeResult:
        yield Panel()
        yield KeyBar(id="keys")

    def action_fire(self) -> None:
        pass


def test_key_bar_lists_quit_then_the_focused_keys_then_the_rest_and_the_palette_last() -> None:
    app = ChainApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        bar = app.query_one(KeyBar)
        app.query_one(Panel).focus()
        await pilot.pause()
        assert [k[0] for k in bar.keys] == ["q", "g", "f", "ctrl+p"]
        app.screen.set_focus(None)
        await pilot.pause()
        assert [k[0] for k in bar.keys] == ["q", "f", "ctrl+p"], "the focused widget's keys go with it"

    run_app(app, scenario, size=(80, 6))


class ViewsApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Input(id="field")
        yield ViewBar([("a", "1", "First view"), ("b", "2", "Second view")], shown="a", id="views")

    def on_view_bar_selected(self, event: ViewBar.Selected) -> None:
        self.query_one(ViewBar).shown = event.view


def test_view_bar_marks_the_shown_view_and_clicks_press_its_key() -> None:
    app = ViewsApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        bar = app.query_one(ViewBar)
        text = lines(bar)[0]
        assert "1 First view" in text and "2 Second view" in text

        def styles_of(label: str) -> set[str]:
            size = bar.outer_size
            strip = bar.render_lines(Region(0, 0, size.width, size.height))[0]
            return {str(seg.style) for seg in strip if label in seg.text}

        first, second = styles_of("First view"), styles_of("Second view")
        assert first and second and first != second, "the shown view is drawn apart"
        app.query_one(Input).focus()
        await pilot.pause()
        await pilot.click(ViewBar, offset=Offset(text.index("2 Second") + 3, 0))
        await pilot.pause()
        assert bar.shown == "b"
        assert app.query_one(Input).value == "", "a click is not a key press into the focused field"
        assert styles_of("Second view") == first, "the mark moved to the clicked view"

    run_app(app, scenario, size=(80, 6))


def test_items_are_placed_on_lines_whole() -> None:
    assert place([5, 5, 5], 16) == [[0, 1, 2]]
    assert place([5, 5, 5], 12) == [[0, 1], [2]], "an item that does not fit goes whole to the next line"
    assert place([20, 3], 10) == [[0], [1]], "an item wider than a line has a line of its own"
    assert place([], 10) == []


class ManyKeysApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(key, f"press('{key}')", f"Key number {n}") for n, key in enumerate("abcdefghij", 1)
    ]

    def __init__(self) -> None:
        super().__init__()
        self.pressed: list[str] = []

    def compose(self) -> ComposeResult:
        yield KeyBar(id="keys")

    def action_press(self, key: str) -> None:
        self.pressed.append(key)


def test_key_bar_wraps_onto_more_lines_and_a_key_on_the_second_line_is_pressed_by_a_click() -> None:
    app = ManyKeysApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        bar = app.query_one(KeyBar)
        await pilot.pause()
        shown = lines(bar)
        assert len(shown) >= 2 and bar.size.height == len(shown), shown
        assert all(len(line.rstrip()) <= 60 for line in shown)
        text = " ".join(shown)
        for n, key in enumerate("abcdefghij", 1):
            assert f"{key} Key number {n}" in text, f"{key} is out of sight: {shown}"
        assert "^p palette" in text
        y, line = next((y, line) for y, line in enumerate(shown) if "j Key number 10" in line)
        assert y >= 1, "the last key went to another line"
        await pilot.click(KeyBar, offset=Offset(line.index("j Key") + 2, y))
        await pilot.pause()
        assert app.pressed == ["j"]
        await pilot.resize_terminal(200, 6)
        await pilot.pause()
        assert len(lines(bar)) == 1 and bar.size.height == 1, "one line when they fit"

    run_app(app, scenario, size=(60, 8))


def test_view_bar_wraps_with_its_badges_and_a_view_on_the_second_line_is_clicked() -> None:
    class WideViews(App[None]):
        def compose(self) -> ComposeResult:
            labels = [
                "Hook runs",
                "Stage results",
                "Sessions",
                "Heartbeat",
                "Self-modifications",
                "Tool calls",
            ]
            yield ViewBar([(f"v{n}", str(n), label) for n, label in enumerate(labels, 1)], shown="v1")

        def on_view_bar_selected(self, event: ViewBar.Selected) -> None:
            self.query_one(ViewBar).shown = event.view

    app = WideViews()

    async def scenario(pilot: Pilot[Any]) -> None:
        bar = app.query_one(ViewBar)
        bar.set_badges({"v5": "3 pending · 2 unreviewed", "v1": "4 failed"})
        await pilot.pause()
        shown = lines(bar)
        assert len(shown) == 2 and bar.size.height == 2, shown
        text = " ".join(shown)
        assert "5 Self-modifications 3 pending · 2 unreviewed" in text and "1 Hook runs 4 failed" in text
        y, line = next((y, line) for y, line in enumerate(shown) if "6 Tool calls" in line)
        await pilot.click(ViewBar, offset=Offset(line.index("6 Tool") + 2, y))
        await pilot.pause()
        assert bar.shown == "v6"

    run_app(app, scenario, size=(100, 8))


def test_connection_bar_keeps_the_key_to_the_problems_whole_and_cuts_only_the_address() -> None:
    pieces = [
        Text(" engine ● connected "),
        Text(" /home/someone/workspace "),
        Text(" opencode ● 1 connected (in-process) "),
        Text("  config: 2 errors, last good config in use (c: read)"),
    ]
    address = Text("  http://127.0.0.1:46661 · pid 26517")

    class BarApp(App[None]):
        def compose(self) -> ComposeResult:
            yield ConnectionBar(id="connection")

    def at(
        app: BarApp, width: int, problems_line: int, address_ends: str
    ) -> Callable[[Pilot[Any]], Awaitable[None]]:
        async def scenario(pilot: Pilot[Any]) -> None:
            bar = app.query_one(ConnectionBar)
            bar.show(Pieces(pieces, address))
            await pilot.pause()
            shown = [line.rstrip() for line in lines(bar)]
            assert bar.size.height == len(shown) and all(len(line) <= width for line in shown), shown
            problems = "config: 2 errors, last good config in use (c: read)"
            assert [y for y, line in enumerate(shown) if problems in line] == [problems_line], shown
            assert shown[-1].endswith(address_ends), shown
            bar.show(Pieces(pieces[:3], address))  # the problems fixed: one line
            await pilot.pause()
            assert len(lines(bar)) == 1 and bar.size.height == 1

        return scenario

    # 160 columns: one line, the address cut at its end; 100: the problems whole on a second line.
    for width, problems_line, address_ends in ((160, 0, "  http://127.0.0.1:46661…"), (100, 1, "pid 26517")):
        app = BarApp()
        run_app(app, at(app, width, problems_line, address_ends), size=(width, 6))


def test_place_cuts_only_a_last_item_that_has_room_enough_left() -> None:
    assert place([10, 10, 30], 40) == [[0, 1], [2]]
    assert place([10, 10, 30], 40, cut_last=16) == [[0, 1, 2]], "20 cells left: the last item stays, cut"
    assert place([10, 20, 30], 40, cut_last=16) == [[0, 1], [2]], "10 left: a line of its own"
    assert place([10, 35, 10], 40, cut_last=4) == [[0], [1, 2]], "only the last item is ever cut"


def test_more_wraps_a_long_line_at_the_window_width() -> None:
    sent = "sent: [heartbeat] " + " ".join(f"word{i}" for i in range(80)) + " THE-END"

    class MoreApp(App[None]):
        def on_mount(self) -> None:
            self.push_screen(MoreScreen("last tick", f"manual tick at 10:00: ok\n{sent}\ntook 2 s"))

    app = MoreApp()

    async def scenario(pilot: Pilot[Any]) -> None:
        await pilot.pause()
        area = app.screen.query_one("#more-text", TextArea)
        width = area.scrollable_content_region.width
        shown = [
            strip.text.rstrip()
            for strip in area.render_lines(Region(0, 0, area.size.width, area.size.height))
        ]
        text = " ".join(line.strip() for line in shown)
        assert "THE-END" in text, f"the end of the line is out of sight: {shown}"
        assert all(len(line) <= area.size.width for line in shown)
        assert area.virtual_size.width <= width + 1, "nothing to scroll sideways"

    run_app(app, scenario, size=(80, 30))


# ---- column widths that fit the view --------------------------------------------------------------


def test_columns_fit_the_view_growing_narrowing_and_giving_way() -> None:
    from evolve_console.columns import WIDTHS, fit

    columns = [WIDTHS[k] for k in ("time", "origin", "change", "files", "review")]

    def total(widths: list[int]) -> int:
        return sum(widths) + sum(1 for w in widths if w) + 1

    preferred = [w.preferred for w in columns]
    assert fit(columns, total(preferred)) == preferred
    wide = fit(columns, 140)
    assert total(wide) == 140 and wide[0] == 8 and wide[2] > preferred[2], "the growing columns share"
    narrow = fit(columns, 60)
    assert total(narrow) == 60 and all(n >= w.minimum for n, w in zip(narrow, columns, strict=True))
    tight = fit(columns, 40)
    assert tight[3] == 0 and total(tight) <= 40, "the files column gives way before the review state"
    assert tight[4] >= columns[4].minimum


def test_free_text_gives_way_before_the_short_words_of_a_column() -> None:
    """A change's subject and its files yield their room first: its origin (`agent (held)`) and its
    review state (`failing since: 3 runs`, the longest of `reverted by 1a2b3c4`, `rejected by its
    test`) stay whole as long as they can."""
    from evolve_console.columns import WIDTHS, fit

    columns = [WIDTHS[k] for k in ("time", "origin", "change", "files", "review")]
    longest = max(len(s) for s in ("reverted by 1a2b3c4", "rejected by its test", "failing since: 3 runs"))
    for available in (60, 69, 80):
        time, origin, change, files, review = fit(columns, available)
        assert (time, origin, review) == (8, len("agent (held)"), longest), available
        assert change < WIDTHS["change"].preferred and files < WIDTHS["files"].preferred
    every = sum(w.preferred for w in columns) + len(columns) + 1  # a blank before each, and at the end
    assert fit(columns, every) == [w.preferred for w in columns], "room for every column"
    assert fit(columns, every)[3] >= len("config/evolve.jsonc") and fit(columns, every)[1] >= len(
        "agent (held)"
    )
