"""View 5, self-modifications: the workspace's git history and the changes that await review, with
origin and review state, and the selected change's diff (`DiffView`: full width, side by side,
whole file)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button

from ..diffview import DiffView, Prepared
from ..format import clock_time, date_time, short
from ..model import ChangeEntry
from ..table import KeyedTable


class ChangesView(Vertical):
    """The workspace's git history with origin and review state, and the selected change's diff."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="change-actions"):
            yield Button("Approve (a)", id="change-approve", variant="success")
            yield Button("Revert (r)", id="change-revert", variant="error")
            yield Button("Reject pending (d)", id="change-reject", variant="warning")
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("time", "time"),
                    ("origin", "origin"),
                    ("change", "change"),
                    ("files", "files"),
                    ("review", "review"),
                ],
                id="changes-table",
            )
            yield DiffView("select a change", id="change-detail", classes="detail")

    ORIGIN_STYLES = {
        "agent": "bold magenta",
        "heartbeat": "cyan",
        "operator": "green",
        "external": "yellow",
        "pending": "bold red",
        "hook": "blue",
    }

    def row(self, c: ChangeEntry) -> tuple[str, list[Any]]:
        origin = c.origin or "manual"
        who = origin
        if origin == "agent" and c.trailers.get("session"):
            who = f"agent {short(c.trailers.get('session'), 14)}"
        if origin == "pending":
            review_text = Text("awaits review", style="bold red")
        elif c.review:
            review_text = Text("reviewed", style="green")
        else:
            review_text = Text("not reviewed", style="dim")
        return str(c.key), [
            clock_time(c.time),
            Text(who, style=self.ORIGIN_STYLES.get(origin, "")),
            short(c.subject, 34),
            short(", ".join(c.files or []), 22),
            review_text,
        ]

    def show_change(self, c: ChangeEntry, diff: Prepared | str, truncated: bool) -> None:
        head = Text()
        head.append(c.subject or "", style="bold")
        head.append(f"\n{c.origin} · {date_time(c.time)} UTC")
        if c.sha:
            head.append(f" · {c.sha[:12]}")
        for key in ("tool", "session", "call", "stage", "file"):
            if c.trailers.get(key):
                head.append(f"\n{key}: {c.trailers[key]}")
        if c.review:
            head.append(f"\nreview: {c.review}", style="green")
        if truncated:
            head.append("\n(diff truncated; see it in full with git show)", style="yellow")
        self.shown_key = c.key
        self.query_one(DiffView).show(head, diff, empty="(no textual changes)")

    # ---- reading a diff ----------------------------------------------------------------------

    shown_key: str | None = None  # the change whose diff is shown

    @property
    def wide(self) -> bool:
        return self.has_class("-wide")

    def set_wide(self, wide: bool) -> None:
        """The diff at the view's full width, the table out of the way; or both side by side again.
        The focus goes with the diff, and back to the table."""
        table, diff = self.query_one(KeyedTable), self.query_one(DiffView)
        self.set_class(wide, "-wide")
        table.display = not wide
        if wide and not diff.has_focus:
            diff.focus()
        elif not wide and diff.has_focus:
            table.focus()

    def full_width(self) -> int:
        """The diff's width at the full width of the view (its text: without padding and scrollbar)."""
        diff = self.query_one(DiffView)
        return self.size.width - (diff.outer_size.width - diff.scrollable_size.width)
