"""The selected change in the changes view: what the operator needs above its diff (who made it, why,
what was checked, where it stands, the hooks failing since it, its latest replay and behaviour
checks, who runs it) and the diff itself, or one file of it whole. It fetches what it shows through
the agent (`changesource.py`)."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.worker import Worker

from ..agent import Agent
from ..alerts import SHOW_KEY
from ..changesource import ChangeDiff, WholeFile, change_diff, change_reach, latest_replay, whole_file
from ..describe import evidence_text
from ..detail import Part
from ..diffmodel import FileDiff
from ..diffview import DiffView
from ..entries import ATTEMPT
from ..evals import eval_text, latest_eval
from ..format import as_json, date_time, preview
from ..messages import pass_failure_up
from ..model import ChangeEntry
from ..reach import reach_text
from ..replay import replay_line

Namer = Callable[[str | None], str]

# How each review state reads in the table, and its colour.
STATES = {
    "unreviewed": ("not reviewed", "bold yellow"),
    "approved": ("approved", "green"),
    "reverted": ("reverted", "dim strike"),
    "none": ("no review", "dim"),
    "pending": ("awaits review", "bold red reverse"),
    "rejected": ("rejected", "red"),
    "stale": ("stale", "bold yellow"),
    "dismissed": ("dismissed", "dim"),
    ATTEMPT: (ATTEMPT, "red"),
}


def state_text(c: ChangeEntry) -> Text:
    label, style = STATES.get(c.state, (c.state, ""))
    if c.state == "reverted" and c.reverted_by:
        label = f"reverted by {c.reverted_by[:7]}"
    return Text(label, style=style)


def failing_text(c: ChangeEntry) -> Text | None:
    """`failing since: 3 runs`, for a change the hooks failing since it most likely started failing
    with; None when none is."""
    if not c.failing:
        return None
    runs = c.failing_runs
    return Text(f"failing since: {runs} run{'s' if runs != 1 else ''}", style="bold red")


class ChangeDetail(DiffView):
    """A change's head above its diff; `o` swaps the diff for the file at the top of the pane, whole."""

    def __init__(self, agent: Agent, *, id: str, classes: str | None = None) -> None:
        super().__init__("select a change", id=id, classes=classes)
        self.agent = agent
        self.shown_key: str | None = None  # the change whose diff is shown
        self.entry: ChangeEntry | None = None  # the row shown (or being loaded), as it was then

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        pass_failure_up(self, event)

    def follow(self, change: ChangeEntry | None, nothing: str) -> None:
        """Show the selected row `change` as it is now: load it when another row, or this row
        changed (its review state, its note); `nothing` when no row is selected."""
        if change is None:
            if self.entry is not None or self.head.plain != nothing:
                self.entry, self.shown_key = None, None
                self.show(Text(nothing, style="dim"), "", empty="")
        elif change != self.entry:
            self.load_change(change)

    def load_change(self, change: ChangeEntry) -> None:
        """Fetch the change's latest replay and its diff, and show them."""
        self.entry = change
        self._load(change)

    @work(exclusive=True, group="change-detail", exit_on_error=False, name="load the change")
    async def _load(self, change: ChangeEntry) -> None:
        client = self.agent.client
        extra = Text()
        if change.attempt_id is None:
            extra.append_text(replay_line(await latest_replay(client, change)))
            extra.append("\n")
            extra.append_text(eval_text(await latest_eval(client, change)))
        reach = reach_text(await change_reach(client, change)) if change.is_commit else None
        diff = await change_diff(client, change)
        self.show_change(change, diff, self.agent.name_session, extra, reach)

    @staticmethod
    def head_of(c: ChangeEntry, name: Namer) -> tuple[Text, list[Part]]:
        """What the operator needs above the diff: who, why, what was checked, where it stands."""
        head = Text()
        if c.attempt_id is not None:
            head.append("attempt: ", style="bold red")  # the same subject as the commit it was not
        head.append(c.subject or "", style="bold")
        head.append(f"\n{c.origin} · {date_time(c.time)}")
        if c.sha:
            head.append(f" · {c.sha[:12]}")
        head.append(" · ")
        head.append_text(state_text(c))
        if c.attempt_id is not None:
            head.append("\nnever installed: its test rejected it (it takes no decision)", style="red")
        failing = failing_text(c)
        if failing is not None:
            head.append("\n")
            head.append_text(failing)
            for f in c.failing:
                runs = f"{f.runs} failed run{'s' if f.runs != 1 else ''}"
                head.append(f"\n  hooks/{f.hook} at {f.stage}: {runs}: {f.error}", style="red")
            if c.revertible and c.state != "reverted":
                head.append("\n  (r reverts it, asking first)", style="dim")
        if c.review:
            head.append(f"\n{c.review}", style="green")
        if c.note:
            head.append(f"\n{c.note}", style="red" if c.state != "stale" else "yellow")
        if c.stale and c.changed_by:
            head.append(f"\nchanged under it by {c.changed_by[:10]} ({SHOW_KEY}: show it) · d: dismiss it")
        if c.evals:
            head.append(f"\n{c.evals}", style="bold red" if "fails after" in c.evals else "")
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
            elif c.untested:
                parts.append(Part("validation", "what was checked", "", empty=c.untested))
            elif any(f.startswith("hooks/") for f in c.files):
                parts.append(
                    Part("validation", "what was checked", "", empty="(no test ran: the hook has none)")
                )
        elif c.untested:
            parts.append(Part("validation", "what was checked", "", empty=c.untested))
        return head, parts

    def show_change(
        self,
        c: ChangeEntry,
        diff: ChangeDiff,
        name: Namer,
        extra: Text | None = None,
        reach: Text | None = None,
    ) -> None:
        """`extra`: the latest replay and behaviour checks, under the change's head; `reach`: who runs
        it, after why it was made and what was checked, just above the diff."""
        head, parts = self.head_of(c, name)
        tail = c.provenance.validation.output_tail if c.provenance and c.provenance.validation else ""
        if diff.test_output is not None and diff.test_output.strip() != tail.strip():
            # The whole output, when the evidence above holds only its end.
            parts.append(Part("output", "the output of the test that rejected it", diff.test_output))
        if extra is not None:
            head.append("\n")
            head.append_text(extra)
        for part in parts:  # the diff pane draws one head: the parts above the diff go into it
            head.append(f"\n\n{part.title}\n", style="bold")
            if part.text:
                shown, more = preview(part.text, 4000)  # keeps the lines: a test's output, the arguments
                head.append(shown + (f"\n… {more:,} more characters (the turn: enter)" if more else ""))
            else:
                head.append(part.empty, style="dim")
        if reach is not None:
            head.append("\n\n")
            head.append_text(reach)
        if diff.truncated:
            head.append("\n(diff truncated; see it in full with git show)", style="yellow")
        if diff.warning:
            head.append(f"\n{diff.warning}", style="yellow")
        if c.attempt_id is not None:
            head.append("\n\nthe diff it proposed:", style="bold")
        self.shown_key = c.key
        self.show(head, diff.prepared, empty="(no textual changes)")

    # ---- one file whole ---------------------------------------------------------------------------

    def toggle_file(self, change: ChangeEntry | None) -> None:
        """The whole file or the diff again: from a whole file, back to the diff; else the file at
        the top of the pane, fetched and shown whole, if `change` (the selected one) is the change
        shown and that file can be shown whole (when not, the operator is told why)."""
        if self.whole is not None:
            self.show_diff()
            return
        file = self.current_file()
        if change is None or change.key != self.shown_key:
            return
        if change.attempt_id is not None:
            self.notify("an attempt was never installed: its diff is what it proposed", timeout=4)
        elif file is None:
            self.notify("this change has no file to show", timeout=4)
        elif file.binary:
            self._binary(file)
        elif file.new_path is None:
            self.notify(f"this change deleted {file.path}: the diff shows all of it", timeout=5)
        else:
            self.load_whole_file(change, file)

    @work(exclusive=True, group="change-file", exit_on_error=False, name="load the whole file")
    async def load_whole_file(self, change: ChangeEntry, file: FileDiff) -> None:
        self.show_file(change.key, file, await whole_file(self.agent.client, change, file))

    def show_file(self, key: str, file: FileDiff, whole: WholeFile) -> None:
        """`file` of the change `key` whole, if that change is still the one shown and its diff is."""
        if whole.binary:
            self._binary(file)
            return
        if self.shown_key == key and self.whole is None:
            self.show_whole(
                file.path, whole.content, f"{file.path}, whole, {whole.note}; o: back to the diff"
            )

    def _binary(self, file: FileDiff) -> None:
        self.notify(f"{file.path} is a binary file: it cannot be shown", timeout=5)
