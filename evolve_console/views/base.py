"""What every view of the console is (`View`), and the view of a table with its selected row in
detail beside it (`TableView`), which five of the six views are.

A view owns what it shows and what its keys do: it draws the parts of the model it names
(`PARTS`) when the app says they changed, binds its own keys (`BINDINGS`, each with a
description and a tooltip: the key bar shows them while the view is shown), loads the details of
its selected row through the agent, and asks the screen or the app for the rest with messages
(`messages.py`). The registry (`views/__init__.py`) lists the views in order.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import Widget
from textual.worker import Worker

from ..agent import Agent
from ..alerts import Named
from ..detail import DetailPane
from ..messages import OpenSession, pass_failure_up
from ..model import ChangeEntry, ConsoleModel, Part, Update
from ..nextstep import SEE_VIEW_1, without_opencode
from ..palette import Command
from ..screens import MoreScreen
from ..table import KeyedTable

# Keys more than one view binds, each to its own handler.
OPEN = Binding("enter", "open", "Open", id="nav.open", tooltip="Open what the selected row leads to")
FOLLOW = Binding("g", "follow", "Follow", id="runs.follow", tooltip="Jump to the newest row and follow")
MORE = Binding("m", "more", "More", id="detail.more", tooltip="See a truncated field in full")


class View(Vertical):
    """One page of the main screen: the view bar names it (`LABEL`), a number key shows it (its
    place in the registry), and it draws the model's `PARTS`."""

    NAME: ClassVar[str] = ""  # what navigation (`Go`) and the palette call it; its widget id
    LABEL: ClassVar[str] = ""  # in the view bar and the palette ("Hook runs")
    PARTS: ClassVar[frozenset[Part]] = frozenset()  # the parts of the model it draws
    COMMANDS: ClassVar[tuple[Command, ...]] = ()  # its commands in the palette

    def __init__(self, agent: Agent) -> None:
        super().__init__(id=self.NAME, classes="page")
        self.agent = agent

    @property
    def model(self) -> ConsoleModel:
        return self.agent.model

    # ---- what the screen asks of every view ----------------------------------------------------

    def draw(self, part: Part) -> None:
        """Show `part` (one of `PARTS`) as the model holds it now."""

    def apply(self, update: Update) -> None:
        """A batch of events changed the model: show what changed of `PARTS`."""
        for part in sorted(update.redraw & self.PARTS):
            self.draw(part)

    def redraw(self) -> None:
        """Everything anew (the sessions' titles, which name sessions everywhere, changed)."""
        for part in sorted(self.PARTS):
            self.draw(part)

    def tick(self) -> None:
        """Once a second (a countdown, a count line)."""

    def shown(self) -> None:
        """The view was just shown (by its key, a click on its label, or going to one of its rows)."""

    def looked_at(self) -> None:
        """The view is on screen: what it holds counts as seen (before the badges are drawn)."""

    def focus_target(self) -> Widget | None:
        """What takes the focus when the view is shown: its keys apply while the focus is inside it
        (None: nothing; the keys of the screen and the app still do)."""
        return self if self.focusable else None

    def selected_key(self) -> str | None:
        """The key of the selected row (None: no row, or a view without rows)."""
        return None

    def select(self, key: str) -> bool:
        """Select the row `key`; False when the view does not show it."""
        return False

    def selected_session(self) -> str | None:
        """The session the selected row belongs to (where enter, or "go: session", leads)."""
        return self.session_of(self.model, self.selected_key())

    @classmethod
    def session_of(cls, model: ConsoleModel, key: str | None) -> str | None:
        """The session of the row `key` as the model knows it; None when it has none or is not known."""
        return None

    def named_change(self) -> Named | None:
        """The change what is selected here names (the change behind a failed run, a degraded tick),
        which the screen's keys show and revert when no alert on screen names one."""
        return None

    # ---- its keys ------------------------------------------------------------------------------

    # The view's keys that need the engine to answer (a command, or a fetch of what they show):
    # dimmed while it does not.
    ENGINE_KEYS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def key_state(cls, action: str, change: ChangeEntry | None, connected: bool = True) -> bool | None:
        """As Textual's `check_action`, for one of the view's own keys: True, it acts; None, it is
        shown dimmed (nothing here for it to act on, or the engine it needs does not answer).
        `change`: the change selected in the view, if it selects changes; `connected`: whether the
        engine answers. Pure, so that `keys.applies` answers for every view."""
        return None if action in cls.ENGINE_KEYS and not connected else True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.key_state(action, None, self.model.connected)

    def connection_changed(self) -> None:
        """The engine started or stopped answering: keys and buttons that need it follow."""
        self.refresh_bindings()

    def status_changed(self) -> None:
        """The engine's status may have changed (its opencode connections, whether it answers):
        what the view says of it follows (an empty table's words, the way to connect opencode)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        pass_failure_up(self, event)


class TableView(View):
    """Rows in a table on the left, the selected one in detail on the right (`DetailPane`, or the
    changes' diff). Highlighting a row shows it (`highlighted`). While the table is empty it says
    what will appear there and when (`EMPTY`), and how to connect opencode while none is."""

    EMPTY: ClassVar[str] = ""  # what the empty table says: what will appear there, and when

    def on_mount(self) -> None:
        self.status_changed()

    def status_changed(self) -> None:
        self.table.empty = self.empty_text()

    def empty_text(self) -> Text:
        """What the table says while it is empty: `EMPTY`, and while no opencode is connected (nothing
        comes until then), where the way to connect one is."""
        text = Text(self.EMPTY)
        if without_opencode(self.model):
            text.append(f"\n\n{SEE_VIEW_1}", style="bold")
        return text

    @property
    def table(self) -> KeyedTable:
        return self.query_one(KeyedTable)

    def detail_pane(self) -> DetailPane | None:
        """The detail pane whose cut fields `m` shows in full (None: the view has none)."""
        found = self.query(DetailPane)
        return found.first() if found else None

    def focus_target(self) -> Widget | None:
        # The table, or the detail when the table is out of the way (a diff at the full width).
        table = self.table
        if table.display:
            return table
        return next((w for w in self.query("DetailPane, DiffView") if w.display), None)

    def selected_key(self) -> str | None:
        return self.table.selected_key()

    def select(self, key: str) -> bool:
        table = self.table
        if key not in table.rows:
            return False
        table.move_cursor(row=table.get_row_index(key))
        return True

    def show_rows(self, rows: list[tuple[str, list[Any]]]) -> None:
        """All rows of the table anew, in the order given (a reload of sessions or changes, a
        filter): rows that stay and keep their place are updated where they are, new ones added
        after them; when the order differs (a row gone, or one to put between others), the table
        is drawn anew in that order, its selected row kept."""
        table = self.table
        if table.keys() != [key for key, _ in rows][: table.row_count]:
            table.replace_all(rows)
        else:
            table.upsert(rows)

    @on(KeyedTable.RowHighlighted)
    def _row_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self.highlighted(event.key)

    def highlighted(self, key: str) -> None:
        """The cursor is on the row `key`: show it in detail."""

    # ---- keys a table view may bind (each binds those that mean something there) --------------

    def action_open(self) -> None:
        """Enter: the session the selected row belongs to."""
        if self.selected_key() is not None:
            self.post_message(OpenSession(self.selected_session()))

    def action_follow(self) -> None:
        self.table.follow()

    def action_more(self) -> None:
        pane = self.detail_pane()
        truncated = pane.truncated if pane is not None else []
        if not truncated:
            self.notify("nothing is truncated here", timeout=3)
            return
        self.app.push_screen(MoreScreen(truncated[0].title, truncated[0].text))
