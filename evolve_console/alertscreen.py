"""The alerts dialog (`N`, and a long error on its own): the console's recent alerts, one at a time and
whole, newest first, with the keys that act on the change an alert names."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from .alerts import READ_KEY, REVERT_KEY, SHOW_KEY, Alert, short_key
from .format import clean, clock_time
from .help import HELP_KEY

SEVERITY_STYLES = {"information": "bold", "warning": "bold yellow", "error": "bold red"}

# What the dialog is dismissed with: ("show", change) to select the change in view 5, ("revert",
# sha) to revert it (the revert dialog asks first), or None.
Chosen = tuple[str, str] | None


class AlertScreen(ModalScreen[Chosen]):
    """One alert whole; left and right go to older and newer ones."""

    DEFAULT_CSS = """
    AlertScreen { align: center middle; }
    AlertScreen #alert-dialog {
        width: 90%; max-width: 120; height: auto; max-height: 90%;
        padding: 1 2; background: $surface; border: thick $primary;
    }
    AlertScreen #alert-heading { text-style: bold; }
    AlertScreen #alert-body { height: auto; max-height: 30; margin: 1 0; }
    AlertScreen #alert-keys { color: $text-muted; }
    AlertScreen #alert-buttons { height: 3; margin-top: 1; }
    AlertScreen #alert-buttons Button { margin-right: 2; }
    """
    TITLE = "the console's alerts"
    HELP_NOTE = "The arrows up and down scroll a long alert."
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(f"escape,{READ_KEY}", "close", "Close", id="alert.close", tooltip="Close and go back"),
        Binding("left", "older", "Older", id="alert.older", tooltip="The alert before this one"),
        Binding("right", "newer", "Newer", id="alert.newer", tooltip="The alert after this one"),
        Binding(
            SHOW_KEY, "show", "Show change", id="alert.show", tooltip="Select the change it names in view 5"
        ),
        Binding(
            REVERT_KEY,
            "revert",
            "Revert it",
            id="alert.revert",
            tooltip="Revert the change it names (the revert dialog asks first)",
        ),
        Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)"),
        HELP_KEY,
    ]

    def __init__(self, alerts: list[Alert], index: int = 0) -> None:
        """`alerts`: newest first; `index`: the one shown first."""
        super().__init__()
        self.alerts = alerts
        self.index = index

    @property
    def alert(self) -> Alert | None:
        return self.alerts[self.index] if self.alerts else None

    def compose(self) -> ComposeResult:
        with Vertical(id="alert-dialog"):
            yield Label("", id="alert-heading")
            with VerticalScroll(id="alert-body"):
                yield Static("", id="alert-text", markup=False)
            yield Static("", id="alert-keys", markup=False)
            with Horizontal(id="alert-buttons"):
                yield Button(f"Show the change ({SHOW_KEY})", id="alert-show", variant="primary")
                yield Button(f"Revert it ({REVERT_KEY})", id="alert-revert", variant="error")
                yield Button("Close", id="alert-close")

    def on_mount(self) -> None:
        self.show()

    def show(self) -> None:
        alert = self.alert
        heading = Text()
        body = Text()
        if alert is None:
            heading.append("no alert yet")
        else:
            heading.append(alert.title or alert.severity, style=SEVERITY_STYLES.get(alert.severity, ""))
            heading.append(f" · {clock_time(alert.at)} UTC")
            heading.append(f"  ({self.index + 1} of {len(self.alerts)}, newest first)", style="dim")
            body.append(clean(alert.text))
        self.query_one("#alert-heading", Label).update(heading)
        self.query_one("#alert-text", Static).update(body)
        keys = ["left/right: older/newer"]
        if alert is not None and alert.change:
            keys.append(f"{SHOW_KEY}: show {short_key(alert.change)} in view 5")
        if alert is not None and alert.revert:
            keys.append(f"{REVERT_KEY}: revert it")
        self.query_one("#alert-keys", Static).update(" · ".join(keys))
        self.query_one("#alert-show", Button).display = bool(alert and alert.change)
        self.query_one("#alert-revert", Button).display = bool(alert and alert.revert)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        alert = self.alert
        if action == "show":
            return True if alert is not None and alert.change else None
        if action == "revert":
            return True if alert is not None and alert.revert else None
        if action == "older":
            return True if self.index + 1 < len(self.alerts) else None
        if action == "newer":
            return True if self.index > 0 else None
        return True

    def action_older(self) -> None:
        if self.index + 1 < len(self.alerts):
            self.index += 1
            self.show()

    def action_newer(self) -> None:
        if self.index > 0:
            self.index -= 1
            self.show()

    @on(Button.Pressed, "#alert-show")
    def action_show(self) -> None:
        alert = self.alert
        if alert is not None and alert.change:
            self.dismiss(("show", alert.change))

    @on(Button.Pressed, "#alert-revert")
    def action_revert(self) -> None:
        alert = self.alert
        if alert is not None and alert.revert:
            self.dismiss(("revert", alert.revert))

    @on(Button.Pressed, "#alert-close")
    def action_close(self) -> None:
        self.dismiss(None)
