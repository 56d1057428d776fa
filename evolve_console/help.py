"""`?`: the keys of what is on screen (the view shown, or the dialog open), with what each does.

Read from the screen's active bindings, the same the key bar shows, so it is always the keys that
work there now: each view's own (with its description and tooltip), those of every view, the
console's; a key that does nothing right now is listed dimmed, with why keys are dimmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

# `?` in a dialog (a modal screen does not take the app's keys: each dialog binds it).
HELP_KEY = Binding(
    "question_mark",
    "app.help",
    "Keys",
    id="dialog.help",
    tooltip="The keys of this dialog, with what each does",
)


@dataclass(frozen=True)
class KeyHelp:
    """One key as the help lists it: as shown, its name, what it does, whether it acts right now."""

    key: str
    name: str
    does: str
    enabled: bool


@dataclass(frozen=True)
class KeyGroup:
    title: str
    keys: list[KeyHelp]


# What moves in the tables and panes of the views (their own keys, not listed one by one).
MOVING = (
    "In a table, the arrows, pageup/pagedown and home/end move the cursor, and a click selects a row; "
    "tab moves the focus to the detail pane, which scrolls with the same keys."
)


def keys_of(screen: Screen[Any], app: App[Any]) -> list[KeyGroup]:
    """The keys that work on `screen`, grouped by where they come from (the focused view or dialog
    first, then the keys of every view, then the console's)."""
    groups: dict[str, list[KeyHelp]] = {}
    seen: set[str] = set()
    for active in screen.active_bindings.values():
        binding, node = active.binding, active.node
        palette = binding.key == app.COMMAND_PALETTE_BINDING
        # Keys shown in the key bar, and those a screen binds without showing them (the number
        # keys of the views, q in a dialog); not the widgets' hidden moving keys, nor the focus
        # keys every Textual screen has (MOVING says them).
        hidden_own = isinstance(node, Screen) and (binding.key, binding.action) not in _EVERY_SCREEN
        if not (binding.show or palette or hidden_own) or not binding.description:
            continue
        shown = app.get_key_display(binding)
        if shown in seen:
            continue
        seen.add(shown)
        does = active.tooltip or binding.tooltip or binding.description
        groups.setdefault(_group_of(node, screen, app), []).append(
            KeyHelp(shown, binding.description, does, active.enabled)
        )
    order = sorted(groups, key=lambda title: _ORDER.index(title.split(":")[0]))
    return [KeyGroup(title, groups[title]) for title in order]


# The bindings of Textual's own Screen (tab, shift+tab), which every screen inherits.
_EVERY_SCREEN = {(b.key, b.action) for b in Binding.make_bindings(Screen.BINDINGS)}

_ORDER = ("this view", "this dialog", "every view", "the console")


def _group_of(node: Any, screen: Screen[Any], app: App[Any]) -> str:
    if node is app:
        return "the console"
    if node is screen:
        return "every view" if not isinstance(screen, ModalScreen) else "this dialog"
    label = getattr(node, "LABEL", "")
    return f"this view: {label}" if label else "this view"


def help_text(groups: list[KeyGroup]) -> Group:
    """The groups as tables: the key, its name, what it does; dimmed when it does nothing now."""
    parts: list[Any] = []
    # The same column widths in every group, so that the lists line up.
    key_width = max((len(k.key) for g in groups for k in g.keys), default=1)
    name_width = max((len(k.name) for g in groups for k in g.keys), default=1)
    for group in groups:
        parts.append(Text(group.title, style="bold underline"))
        table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 0, 0), expand=True)
        table.add_column("key", style="bold", no_wrap=True, min_width=key_width)
        table.add_column("name", no_wrap=True, min_width=name_width)
        table.add_column("does", ratio=1)
        for key in group.keys:
            style = "" if key.enabled else "dim"
            does = key.does if key.enabled else f"{key.does} (not now)"
            table.add_row(Text(key.key, style=style), Text(key.name, style=style), Text(does, style=style))
        parts += [table, Text("")]
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """The keys of the screen under it; escape or `?` closes it."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen #help-dialog {
        width: 90%; max-width: 110; height: 90%; padding: 0 2; background: $surface; border: thick $primary;
    }
    HelpScreen #help-title { text-style: bold; margin: 1 0; }
    HelpScreen #help-body { height: 1fr; }
    HelpScreen #help-note { color: $text-muted; margin: 1 0; }
    """
    TITLE = "Keys"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark", "close", "Close", id="help.close", tooltip="Close the list of keys"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)"),
    ]

    def __init__(self, title: str, groups: list[KeyGroup], note: str = "") -> None:
        super().__init__()
        self.heading = title
        self.groups = groups
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog"):
            yield Label(self.heading, id="help-title")
            with VerticalScroll(id="help-body"):
                yield Static(help_text(self.groups), id="help-keys")
            note = (
                "Dimmed keys do nothing right now (nothing selected for them, or the engine does not answer)."
            )
            yield Static(
                f"{self.note + ' ' if self.note else ''}{note} escape or ? closes this.", id="help-note"
            )

    def action_close(self) -> None:
        self.dismiss(None)

    @property
    def keys(self) -> list[KeyHelp]:
        """Every key listed, in order."""
        return [key for group in self.groups for key in group.keys]
