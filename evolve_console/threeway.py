"""The three versions of a held change whose file changed under it, as the engine's refusal to approve
it gives them (a `409` with `stale: true`): what the change was based on, what is there now (what
changed under it), and what it would install (what the agent changed). Installing it would undo
what changed under it; the operator compares, then dismisses it or asks the agent to redo it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from .detail import DetailPane, Part
from .diffview import DiffView
from .help import HELP_KEY


@dataclass(frozen=True)
class ThreeWay:
    """An approval refused because the file changed: the engine's words and the three versions (None
    where the engine no longer knows the version the change was based on)."""

    message: str
    file: str
    changed_by: str | None
    base: str | None
    current: str
    proposed: str
    proposed_diff: str | None
    changed_diff: str | None

    @classmethod
    def of(cls, message: str, details: dict[str, Any]) -> ThreeWay | None:
        """The three versions of a refusal's details; None when it was refused for another reason."""
        if details.get("stale") is not True:
            return None

        def text(key: str) -> str | None:
            found = details.get(key)
            return found if isinstance(found, str) else None

        return cls(
            message,
            str(details.get("file") or ""),
            text("changed_by"),
            text("base"),
            text("current") or "",
            text("proposed") or "",
            text("proposed_diff"),
            text("changed_diff"),
        )


class ThreeWayScreen(ModalScreen[bool]):
    """The refusal's words above the three versions side by side; `d` dismisses the change (a reason
    is asked next), escape goes back. Dismissed with True when the operator chose to dismiss it."""

    TITLE = "a held change whose file changed under it"
    HELP_NOTE = "tab moves between the three versions; each scrolls with the arrows."
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", tooltip="Close and decide nothing"),
        Binding("d", "dismiss_change", "Dismiss it", tooltip="Set the change aside, with a reason"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)"),
        HELP_KEY,
    ]

    def __init__(self, subject: str, three: ThreeWay) -> None:
        super().__init__()
        self.subject = subject
        self.three = three

    def compose(self) -> ComposeResult:
        three = self.three
        with Vertical():
            yield Static(Text(f"Not installed: “{self.subject}”", style="bold"), id="three-way-title")
            yield Static(Text(three.message), id="three-way-message")
            with Horizontal(id="three-way"):
                yield DetailPane("", id="three-base", classes="detail")
                yield DiffView("", id="three-current")
                yield DiffView("", id="three-proposed")
            with Horizontal(id="buttons"):
                yield Button("Dismiss it (d)", variant="warning", id="dismiss")
                yield Button("Close (escape)", id="close")

    def on_mount(self) -> None:
        three = self.three
        file = three.file
        base = self.query_one("#three-base", DetailPane)
        if three.base is None:
            base.show(
                Text(f"what it was based on: {file}", style="bold"),
                [Part("base", "(not known any more: it was held by an older engine)", "")],
            )
        else:
            base.show(
                Text(f"what it was based on: {file}", style="bold"), [Part("base", "the file", three.base)]
            )
        changed_by = f" (changed by {three.changed_by[:10]})" if three.changed_by else ""
        current = Text(f"what is there now{changed_by}: what changed under it", style="bold")
        proposed = Text("what it would install: what the agent changed", style="bold")
        self.query_one("#three-current", DiffView).show(
            current, three.changed_diff if three.changed_diff is not None else "", empty=three.current
        )
        self.query_one("#three-proposed", DiffView).show(
            proposed, three.proposed_diff if three.proposed_diff is not None else "", empty=three.proposed
        )
        self.query_one("#three-proposed", DiffView).focus()

    @on(Button.Pressed, "#dismiss")
    def action_dismiss_change(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(False)
