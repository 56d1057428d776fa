"""View 5, self-modifications: the workspace's git history, the changes held for review and the
attempts their test rejected, each with where it came from and its review state; the selected
change with why it was made, what was checked, the hooks failing since it, its latest replay and
behaviour checks, who runs it, and its diff (`ChangeDetail`: full width, side by side, whole file).
The operator's decisions on the selected change (approve, revert, reject, dismiss) are made here,
each asked first where it must be; its behaviour checks and its reach open from here too.

Over 500 lines: the view has a dozen keys, each declared here with its description and tooltip,
and handled here (its dialog, its worker); the change's detail is `changedetail.py`'s."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Button

from engine.protocol import calls
from engine.protocol.records import EvalRun, Reach, ReplayProgress

from .. import decisions
from ..agent import Agent
from ..alerts import Named
from ..decisions import Outcome
from ..difflayout import MIN_SPLIT
from ..evals import EVAL_KEY, EvalScreen
from ..format import clock_time
from ..messages import COMMAND_GROUP, Go, Reload, Toast
from ..model import ChangeEntry, ConsoleModel, Part, Update
from ..palette import Command
from ..reach import REACH_KEY, ReachScreen
from ..replay import ReplayScreen
from ..screens import ConfirmScreen, DismissScreen, RejectScreen, RevertChoice, RevertScreen
from ..table import KeyedTable
from ..threeway import ThreeWayScreen
from ..turn import Turn, TurnScreen, load_turn
from .base import FOLLOW, OPEN, TableView
from .changedetail import ChangeDetail, failing_text, state_text

ORIGIN_STYLES = {
    "agent": "bold magenta",
    "heartbeat": "cyan",
    "operator": "green",
    "external": "yellow",
    "pending": "bold red",
    "hook": "blue",
}
DECISIONS = ("approve", "revert", "reject")  # the keys its buttons mirror
# The keys that act on a version of the change (the engine replays or checks it, or tells who runs it).
VERSIONED = ("replay", "evaluate", "reach")
DIFF_WIDTH = 70  # columns the diff keeps beside the table when the table could use them


def change_row(c: ChangeEntry) -> tuple[str, list[Any]]:
    """A row: a change followed by failures says so in its review column (what needs the operator
    first), a held change's subject is followed by its behaviour checks' line."""
    origin = c.origin or "manual"
    who = "agent (held)" if origin == "pending" else origin
    subject = Text(c.subject)
    if c.evals:
        subject.append(f"  {c.evals}", style="bold red" if "fails after" in c.evals else "dim")
    return str(c.key), [
        clock_time(c.time),
        Text(who, style=ORIGIN_STYLES.get(origin, "")),
        subject,
        ", ".join(c.files or []),
        failing_text(c) or state_text(c),
    ]


class ChangesView(TableView):
    """The history with origin and review state, and the selected change in detail.

    Over 30 methods: view 5 has a dozen keys (approve, revert, reject, dismiss, the turn, replay,
    behaviour checks, who runs it, the review filter, the diff wide, side by side, a file whole),
    each an `action_` with its dialog's answer and the worker that sends the command; apart from the
    view they would be keys without their handlers. What a change shows is `changedetail.py`'s."""

    NAME = "changes"
    LABEL = "Self-modifications"
    PARTS = frozenset({Part.CHANGES})
    BINDINGS: ClassVar[list[BindingType]] = [
        OPEN,
        Binding("a", "approve", "Approve", id="change.approve", tooltip="Approve the selected change"),
        Binding(
            "r", "revert", "Revert", id="change.revert", tooltip="Revert the selected change (asks first)"
        ),
        Binding(
            "d",
            "reject",
            "Reject/dismiss",
            id="change.reject",
            tooltip="Reject the selected held change, or dismiss one gone stale (asks why)",
        ),
        Binding(
            "e",
            "replay",
            "Replay",
            id="change.replay",
            tooltip="Replay the selected change on recorded traffic: what it changes for the agent",
        ),
        Binding(
            EVAL_KEY,
            "evaluate",
            "Check behaviour",
            id="change.evaluate",
            tooltip="Run the behaviour checks (the workspace's scenarios) before and after the selected "
            "change, through opencode",
        ),
        Binding(
            REACH_KEY,
            "reach",
            "Who runs it",
            id="change.reach",
            tooltip="The sessions that run the selected change, and the agent's answers since",
        ),
        Binding(
            "w",
            "diff_wide",
            "Wide",
            id="diff.wide",
            tooltip="The diff at the full width, the table out of the way",
        ),
        Binding(
            "v",
            "diff_split",
            "Split",
            id="diff.side_by_side",
            tooltip=f"Old and new side by side (needs {MIN_SPLIT} columns), or unified",
        ),
        Binding(
            "o",
            "diff_file",
            "File",
            id="diff.file",
            tooltip="The whole file at this change with its changes marked, or back to the diff",
        ),
        Binding(
            "n",
            "toggle_needs_review",
            "Needs review",
            id="change.needs-review",
            tooltip="Show only what needs review",
        ),
        FOLLOW,
    ]
    COMMANDS = (
        Command(
            "change: approve selected",
            "approve",
            "record an approval of the selected change in git",
            show=False,
        ),
        Command(
            "change: revert selected", "revert", "undo the selected change with a new commit", show=False
        ),
        Command(
            "change: reject selected pending change",
            "reject",
            "drop a change that awaits review, or dismiss one gone stale",
            show=False,
        ),
        Command(
            "change: replay selected",
            "replay",
            "what the change does to the agent's recorded traffic",
            show=False,
        ),
        Command(
            "change: check the behaviour of selected",
            "evaluate",
            "the scenarios before and after it, through opencode",
            show=False,
        ),
        Command(
            "change: who runs selected", "reach", "the sessions that run it, their answers since", show=False
        ),
        Command("diff: full width or beside the table", "diff_wide", "w in view 5"),
        Command("diff: side by side or unified", "diff_split", "v in view 5"),
        Command("diff: whole file or diff", "diff_file", "o in view 5"),
        Command("change: only what needs review", "toggle_needs_review", "hide what needs no look"),
        Command("go: the turn that made the selected change", "open", "its agent's words, call, runs"),
    )

    EMPTY = (
        "Changes appear here as commits of the workspace: each change the agent, a hook, the heartbeat "
        "or an operator makes to it, and each change the review gate holds for your decision."
    )

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent)
        self.needs_review_only = False  # the table shows only what needs review

    def empty_text(self) -> Text:
        if self.needs_review_only:
            return Text(
                "Nothing needs review: no change awaits your decision or your look (n: every change)."
            )
        return super().empty_text()

    def compose(self) -> ComposeResult:
        with Horizontal(id="change-actions"):
            yield Button("Approve (a)", id="change-approve", variant="success")
            yield Button("Revert (r)", id="change-revert", variant="error")
            yield Button("Reject/dismiss (d)", id="change-reject", variant="warning")
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
                tells_following=True,
            )
            yield ChangeDetail(self.agent, id="change-detail", classes="detail")

    @property
    def detail(self) -> ChangeDetail:
        return self.query_one(ChangeDetail)

    def on_resize(self) -> None:
        # The table takes what its columns need to be read whole (origin, files, review), as long as
        # the diff keeps DIFF_WIDTH columns beside it; in a narrow terminal, two fifths of the view.
        width = self.size.width
        if width:
            self.table.styles.width = max(2 * width // 5, min(width - DIFF_WIDTH, self.table.preferred_width))

    # ---- drawing and the selected change -------------------------------------------------------

    def draw(self, part: Part) -> None:
        shown = [c for c in self.model.changes.values() if c.needs_review or not self.needs_review_only]
        self.show_rows([change_row(c) for c in shown])
        self.refresh_decisions()
        self.follow_selection()

    def follow_selection(self) -> None:
        """The detail shows the selected row as it is now: another row when the selected one left
        the table, nothing when none is left."""
        nothing = "nothing needs review (n: every change)" if self.needs_review_only else "no change"
        self.detail.follow(self.selected_change(), nothing)

    def apply(self, update: Update) -> None:
        super().apply(update)
        # A replay or behaviour checks of the selected change ended: its detail says so now.
        selected = self.selected_change()
        ended = {r.target for r in update.replays if not isinstance(r, ReplayProgress)}
        ended |= {e.target for e in update.evals if isinstance(e, EvalRun)}
        if selected is not None and (selected.pending_id or selected.key) in ended:
            self.detail.load_change(selected)

    def looked_at(self) -> None:
        self.model.looked_at_changes()  # the attempts are seen now

    def named_change(self) -> Named | None:
        """A held change gone stale names the commit that changed its file under it."""
        change = self.selected_change()
        if change is not None and change.stale and change.changed_by:
            return Named(change.changed_by)
        return None

    def highlighted(self, key: str) -> None:
        self.refresh_decisions()
        change = self.model.changes.get(key)
        if change is not None and change != self.detail.entry:
            self.detail.load_change(change)

    def selected_change(self) -> ChangeEntry | None:
        key = self.selected_key()
        return self.model.changes.get(key) if key else None

    @classmethod
    def session_of(cls, model: ConsoleModel, key: str | None) -> str | None:
        found = model.changes.get(key) if key else None
        return found.session if found else None

    # ---- which keys act ------------------------------------------------------------------------

    ENGINE_KEYS = frozenset(
        {"approve", "revert", "reject", "replay", "evaluate", "reach", "diff_file", "open"}
    )

    @classmethod
    def key_state(cls, action: str, change: ChangeEntry | None, connected: bool = True) -> bool | None:
        if action in cls.ENGINE_KEYS and not connected:
            return None
        if action == "diff_file":
            return (change is not None and change.attempt_id is None) or None
        if action in (*DECISIONS, *VERSIONED):
            if change is None or change.attempt_id is not None:
                return None  # an attempt was never installed: nothing to decide, replay or check
            if action == "reject" and not (change.awaits_decision or change.stale):
                return None
            # A stale one is asked too: the engine's refusal shows the three versions to compare.
            if action == "approve" and change.pending_id and not (change.awaits_decision or change.stale):
                return None
            if action == "revert" and not change.revertible:
                return None
            if action == "evaluate" and change.pending_id and not change.awaits_decision:
                return None  # the engine checks only a held change that can still be decided
            if action == "evaluate" and change.origin == "initial":
                return None  # nothing before it to compare with
            if action == "reach" and not change.is_commit:
                return None
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.key_state(action, self.selected_change(), self.model.connected)

    def connection_changed(self) -> None:
        self.refresh_decisions()

    def refresh_decisions(self) -> None:
        """The keys of the selected change, and its buttons, which mirror them."""
        self.refresh_bindings()
        for action in DECISIONS:
            self.query_one(f"#change-{action}", Button).disabled = self.check_action(action, ()) is not True

    # ---- decisions -----------------------------------------------------------------------------

    @on(Button.Pressed, "#change-approve")
    def action_approve(self) -> None:
        change = self.selected_change()
        if change is None:
            return
        question = decisions.approve_question(change)
        if question is None:
            self.approve_change(change)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.approve_change(change)

        self.app.push_screen(ConfirmScreen(*question), confirmed)

    @work(group=COMMAND_GROUP, exit_on_error=False, name="approve the change")
    async def approve_change(self, change: ChangeEntry) -> None:
        outcome = await decisions.approve(self.agent.client, change)
        self.post_message(Reload(Part.CHANGES))
        if outcome.three is not None:
            self.show_refusal(change, outcome)
        else:
            self.notify(outcome.text, timeout=5)

    def show_refusal(self, change: ChangeEntry, outcome: Outcome) -> None:
        """An approval refused because the file changed under the held change: the three versions;
        dismissing it from there asks for a reason."""
        assert outcome.three is not None

        def closed(dismiss: bool | None) -> None:
            if dismiss:
                self.ask_dismiss(change, outcome.text)

        self.app.push_screen(ThreeWayScreen(change.subject, outcome.three), closed)

    @on(Button.Pressed, "#change-revert")
    def action_revert(self) -> None:
        change = self.selected_change()
        if change is not None and change.revertible:
            self.ask_revert(change)

    @work(group="lookups", exit_on_error=False, name="read what reverting the change touches")
    async def ask_revert(self, change: ChangeEntry) -> None:
        impact = await decisions.revert_impact(self.agent.client, change)

        def chosen(choice: RevertChoice | None) -> None:
            if choice is not None:
                self.revert_change(change, choice)

        question = decisions.revert_question(change)
        self.app.push_screen(RevertScreen(question, change.files, impact, self.agent.name_session), chosen)

    @work(group=COMMAND_GROUP, exit_on_error=False, name="revert the change")
    async def revert_change(self, change: ChangeEntry, choice: RevertChoice) -> None:
        outcome = await decisions.revert(self.agent.client, change, choice)
        if outcome.refused:
            self.post_message(Toast(outcome.text, "error"))
            return
        self.notify(outcome.text, timeout=6)
        self.post_message(Reload(Part.CHANGES))

    def revert_commit(self, sha: str) -> None:
        """The revert dialog for the commit `sha` (the change an alert names), fetched when it is
        older than the changes shown."""
        known = self.model.changes.get(sha)
        if known is not None:
            if known.revertible:
                self.ask_revert(known)
            return
        self.revert_unlisted(sha)

    @work(group="lookups", exit_on_error=False, name="read the change to revert")
    async def revert_unlisted(self, sha: str) -> None:
        change = ChangeEntry.commit(await self.agent.client.send(calls.change(sha)))
        if change.revertible:
            self.ask_revert(change)

    @on(Button.Pressed, "#change-reject")
    def action_reject(self) -> None:
        change = self.selected_change()
        if change is None:
            return
        if change.stale:
            self.ask_dismiss(change, change.note)
            return
        if not change.awaits_decision:
            return

        def reason(given: str | None) -> None:
            if given is not None:
                self.reject_change(change, given)

        self.app.push_screen(RejectScreen(change.subject), reason)

    def ask_dismiss(self, change: ChangeEntry, why: str | None) -> None:
        def reason(given: str | None) -> None:
            if given is not None:
                self.dismiss_change(change, given)

        self.app.push_screen(DismissScreen(change.subject, why), reason)

    @work(group=COMMAND_GROUP, exit_on_error=False, name="reject the change")
    async def reject_change(self, change: ChangeEntry, reason: str) -> None:
        self.notify(await decisions.reject(self.agent.client, change, reason), timeout=5)
        self.post_message(Reload(Part.CHANGES))

    @work(group=COMMAND_GROUP, exit_on_error=False, name="dismiss the change")
    async def dismiss_change(self, change: ChangeEntry, reason: str) -> None:
        self.notify(await decisions.dismiss(self.agent.client, change, reason), timeout=5)
        self.post_message(Reload(Part.CHANGES))

    # ---- other keys ----------------------------------------------------------------------------

    def action_open(self) -> None:
        """Enter: the turn that made the selected change."""
        change = self.selected_change()
        if change is not None:
            self.open_turn(change)

    @work(group="lookups", exit_on_error=False, name="load the turn that made the change")
    async def open_turn(self, change: ChangeEntry) -> None:
        """The turn that made a change: its call, its hook runs, its session, on a screen."""
        turn = await load_turn(self.agent.client, change)
        if turn is None:
            self.post_message(Toast("this change was not made by the agent in a session", "warning", 5))
            return
        self.show_turn(turn)

    def show_turn(self, turn: Turn, run: str | None = None) -> None:
        """The turn's screen, at the hook run `run`. Enter on a run (or `o`) goes to it in view 1
        (or to the session in view 3); escape from there comes back to this screen as it was."""
        screen = TurnScreen(turn, run)

        def done(where: tuple[str, str] | None) -> None:
            if where is not None:
                view = "runs" if where[0] == "run" else "sessions"
                self.post_message(Go(view, where[1], back=lambda: self.show_turn(turn, screen.left_at)))

        self.app.push_screen(screen, done)

    def action_replay(self) -> None:
        change = self.selected_change()
        if change is not None:
            agent = self.agent
            self.app.push_screen(ReplayScreen(lambda: agent.client, change))

    def action_evaluate(self) -> None:
        change = self.selected_change()
        if change is not None and change.attempt_id is None:
            agent = self.agent
            self.app.push_screen(EvalScreen(lambda: agent.client, change))

    def action_reach(self) -> None:
        change = self.selected_change()
        if change is not None and change.is_commit:
            self.open_reach(change)

    @work(group="lookups", exit_on_error=False, name="read who runs the change")
    async def open_reach(self, change: ChangeEntry) -> None:
        self.show_reach(change, await self.agent.client.send(calls.reach(change.key)))

    def show_reach(self, change: ChangeEntry, reach: Reach, at: str | None = None) -> None:
        """Who runs the change, on a screen: a session opens in view 3, an answer's stage result in
        view 2; escape from there comes back to this screen as it was."""
        screen = ReachScreen(change.subject, reach, at)

        def done(opened: tuple[str, str] | None) -> None:
            if opened is None:
                return
            what, key = opened
            view = "sessions" if what == "session" else "stages"
            self.post_message(Go(view, key, back=lambda: self.show_reach(change, reach, screen.left_at)))

        self.app.push_screen(screen, done)

    def action_toggle_needs_review(self) -> None:
        self.needs_review_only = not self.needs_review_only
        self.table.empty = self.empty_text()
        self.draw(Part.CHANGES)
        self.notify("only what needs review" if self.needs_review_only else "every change", timeout=2)

    # ---- reading a diff --------------------------------------------------------------------------

    @property
    def wide(self) -> bool:
        return self.has_class("-wide")

    def set_wide(self, wide: bool) -> None:
        """The diff at the view's full width, the table out of the way; or both side by side again.
        The focus goes with the diff, and back to the table."""
        table, diff = self.table, self.detail
        self.set_class(wide, "-wide")
        table.display = not wide
        if wide and not diff.has_focus:
            diff.focus()
        elif not wide and diff.has_focus:
            table.focus()

    def full_width(self) -> int:
        """The diff's width at the full width of the view (its text: without padding and scrollbar)."""
        diff = self.detail
        return self.size.width - (diff.outer_size.width - diff.scrollable_size.width)

    def action_diff_wide(self) -> None:
        self.set_wide(not self.wide)

    def action_diff_split(self) -> None:
        """Side by side, or unified again. Side by side needs MIN_SPLIT columns: the table goes out
        of the way when that makes room; when even the full width is too narrow, the operator is
        told so and nothing changes."""
        diff = self.detail
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

    def action_diff_file(self) -> None:
        self.detail.toggle_file(self.selected_change())
