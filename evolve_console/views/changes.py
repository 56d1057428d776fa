"""View 5, self-modifications: the workspace's git history and the changes that await review, with
origin and review state, and the selected change's diff."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button

from ..detail import DetailPane, Part
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
            yield DetailPane("select a change", id="change-detail", classes="detail")

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

    def show_change(self, c: ChangeEntry, diff: str, truncated: bool, extra: Text | None = None) -> None:
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
        if extra is not None:
            head.append("\n")
            head.append_text(extra)
        self.query_one(DetailPane).show(
            head, [Part("diff", "diff", diff, empty="(no textual changes)", language="diff")]
        )
