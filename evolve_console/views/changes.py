"""View 5, self-modifications: the workspace's git history and the changes held for review, each with
where it came from and its review state; the selected change with why it was made, what was checked,
and its diff (`DiffView`: full width, side by side, whole file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button

from ..changesource import WholeFile
from ..detail import Part
from ..diffmodel import FileDiff
from ..diffview import MIN_SPLIT, DiffView, Prepared
from ..format import as_json, clock_time, date_time, preview, short
from ..model import ChangeEntry
from ..table import KeyedTable
from .tools import evidence_text

Namer = Callable[[str | None], str]

ORIGIN_STYLES = {
    "agent": "bold magenta",
    "heartbeat": "cyan",
    "operator": "green",
    "external": "yellow",
    "pending": "bold red",
    "hook": "blue",
}

# How each review state reads in the table, and its colour.
STATES = {
    "unreviewed": ("not reviewed", "bold yellow"),
    "approved": ("approved", "green"),
    "reverted": ("reverted", "dim strike"),
    "none": ("no review", "dim"),
    "pending": ("awaits review", "bold red reverse"),
    "rejected": ("rejected", "red"),
    "stale": ("stale", "red"),
}


def state_text(c: ChangeEntry) -> Text:
    label, style = STATES.get(c.state, (c.state, ""))
    if c.state == "reverted" and c.reverted_by:
        label = f"reverted by {c.reverted_by[:7]}"
    return Text(label, style=style)


class ChangesView(Vertical):
    """The history with origin and review state, and the selected change in detail."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="change-actions"):
            yield Button("Approve (a)", id="change-approve", variant="success")
            yield Button("Revert (r)", id="change-revert", variant="error")
            yield Button("Reject pending (d)", id="change-reject", variant="warning")
        with Horizontal(classes="split changes-split"):
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

    def row(self, c: ChangeEntry, name: Namer) -> tuple[str, list[Any]]:
        origin = c.origin or "manual"
        who = "agent (held)" if origin == "pending" else origin
        return str(c.key), [
            clock_time(c.time),
            Text(who, style=ORIGIN_STYLES.get(origin, "")),
            c.subject,
            ", ".join(c.files or []),
            state_text(c),
        ]

    @staticmethod
    def head(c: ChangeEntry, name: Namer) -> tuple[Text, list[Part]]:
        """What the operator needs above the diff: who, why, what was checked, where it stands."""
        head = Text()
        head.append(c.subject or "", style="bold")
        head.append(f"\n{c.origin} · {date_time(c.time)}")
        if c.sha:
            head.append(f" · {c.sha[:12]}")
        head.append(" · ")
        head.append_text(state_text(c))
        if c.review:
            head.append(f"\n{c.review}", style="green")
        if c.note:
            head.append(f"\n{c.note}", style="red")
        prov = c.provenance
        session = c.session
        if session:
            title = prov.session_title if prov else None
            head.append(f"\nsession {title or name(session)} ({session})")
        for key in ("tool", "call", "stage", "file"):
            if c.trailers.get(key):
                head.append(f"\n{key}: {c.trailers[key]}")
        if prov is not None:
            head.append("\nenter: the turn that made it", style="dim")
        parts: list[Part] = []
        if prov is not None:
            parts.append(
                Part("said", "why: what the agent said before the call", prov.agent_text, empty="(nothing)")
            )
            if prov.reasoning:
                parts.append(Part("reasoning", "its reasoning", prov.reasoning))
            parts.append(Part("call", f"the call: {prov.tool}", as_json(prov.args)))
            if prov.validation is not None:
                parts.append(Part("validation", "what was checked", evidence_text(prov.validation)))
            elif any(f.startswith("hooks/") for f in c.files):
                parts.append(
                    Part("validation", "what was checked", "", empty="(no test ran: the hook has none)")
                )
        return head, parts

    def show_change(
        self, c: ChangeEntry, diff: Prepared | str, truncated: bool, name: Namer, extra: Text | None = None
    ) -> None:
        head, parts = self.head(c, name)
        if extra is not None:  # the latest replay's summary
            head.append("\n")
            head.append_text(extra)
        for part in parts:  # the diff pane draws one head: the parts above the diff go into it
            head.append(f"\n\n{part.title}\n", style="bold")
            if part.text:
                shown, more = preview(part.text, 4000)  # keeps the lines: a test's output, the arguments
                head.append(shown + (f"\n… {more:,} more characters (the turn: enter)" if more else ""))
            else:
                head.append(part.empty, style="dim")
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

    def toggle_split(self) -> None:
        """Side by side, or unified again. Side by side needs MIN_SPLIT columns: the table goes out
        of the way when that makes room; when even the full width is too narrow, the operator is
        told so and nothing changes."""
        diff = self.query_one(DiffView)
        if diff.split:
            diff.set_split(False)
            return
        if not diff.split_fits():
            if self.full_width() < MIN_SPLIT:
                self.notify(
                    f"side by side needs {MIN_SPLIT} columns for the diff; at the full width it has "
                    f"{self.full_width()}: widen the terminal",
                    title="too narrow",
                    severity="warning",
                    timeout=6,
                )
                return
            self.set_wide(True)  # the table goes out of the way to make room
        diff.set_split(True)

    def file_to_show(self, change: ChangeEntry | None) -> FileDiff | None:
        """The whole file or the diff again: from a whole file, back to the diff (None); else the
        file at the top of the pane, to be fetched and shown whole, if `change` (the selected one)
        is the change shown and that file can be shown whole (when not, the operator is told why)."""
        diff = self.query_one(DiffView)
        if diff.whole is not None:
            diff.show_diff()
            return None
        file = diff.current_file()
        if change is None or change.key != self.shown_key:
            return None
        if file is None:
            self.notify("this change has no file to show", timeout=4)
        elif file.binary:
            self._binary(file)
        elif file.new_path is None:
            self.notify(f"this change deleted {file.path}: the diff shows all of it", timeout=5)
        else:
            return file
        return None

    def show_whole(self, key: str, file: FileDiff, whole: WholeFile) -> None:
        """`file` of the change `key` whole, if that change is still the one shown and its diff is."""
        if whole.binary:
            self._binary(file)
            return
        diff = self.query_one(DiffView)
        if self.shown_key == key and diff.whole is None:
            diff.show_whole(
                file.path, whole.content, f"{file.path}, whole, {whole.note}; o: back to the diff"
            )

    def _binary(self, file: FileDiff) -> None:
        self.notify(f"{file.path} is a binary file: it cannot be shown", timeout=5)


def short_subject(c: ChangeEntry) -> str:
    return short(c.subject, 60)
