"""The console's dialogs: confirm a revert, see a long value in full, run a stage by hand and the
stage's result, reject a held change or dismiss a stale one."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, SelectionList, Static, TextArea
from textual.widgets.selection_list import Selection

from engine.protocol.records import Impact, SessionInfo
from engine.protocol.stages import ROWS

from .format import MORE_LIMIT, clean
from .help import HELP_KEY

# The input each stage starts with in the "run a stage by hand" dialog (StageFacts.template).
STAGE_TEMPLATES: dict[str, dict[str, Any]] = {
    row.stage.value: dict(row.template) for row in ROWS if row.template is not None
}

STAGES = tuple(STAGE_TEMPLATES)  # the stages an operator can run by hand, in menu order


# In a dialog without a field to type into, q quits the console as everywhere else; in one with a
# field (a reason, a stage's input), q is a letter and escape closes the dialog first.
QUIT = Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)")
# `?` lists a dialog's keys (where a text field has the focus, `?` is a character, as `q` is).
HELP = HELP_KEY


class ConfirmScreen(ModalScreen[bool]):
    """Yes or no for a destructive action."""

    TITLE = "a question before acting"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Do nothing and close"),
        Binding("y", "confirm", "Yes", tooltip="Do it"),
        QUIT,
        HELP,
    ]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question = question
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            if self.detail:
                yield Static(Text(self.detail), id="detail")
            with Horizontal(id="buttons"):
                yield Button("Yes", variant="error", id="yes")
                yield Button("Cancel", id="no")

    @on(Button.Pressed, "#yes")
    def action_confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(False)


def hard_wrap(text: str, width: int = 1000) -> str:
    """Long lines cut into pieces: a TextArea with one huge line freezes the screen."""
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(line[i : i + width] for i in range(0, max(len(line), 1), width))
    return "\n".join(out)


class MoreScreen(ModalScreen[None]):
    """A long value in full (up to a bound), scrollable."""

    TITLE = "a value in full"
    HELP_NOTE = "The arrows, pageup/pagedown and home/end scroll the text; it can be selected and copied."
    BINDINGS = [Binding("escape,m", "close", "Close", tooltip="Close and go back"), QUIT, HELP]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        shown = self.text[:MORE_LIMIT]
        rest = len(self.text) - len(shown)
        with Vertical(id="dialog", classes="wide"):
            label = f"{self.title_text} — {len(self.text):,} characters"
            if rest:
                label += f" (first {len(shown):,} shown; the whole record is in the engine's journal)"
            yield Label(label)
            # Wrapped at the window's width (a line cut there would hide its end); `hard_wrap` bounds
            # the lines first, since a TextArea with one huge line freezes the screen.
            yield TextArea(hard_wrap(clean(shown)), read_only=True, soft_wrap=True, id="more-text")
            yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)


class StageScreen(ModalScreen[dict[str, Any] | None]):
    """Run a stage by hand: pick the stage, edit its input, optionally bind a session."""

    TITLE = "run a stage by hand"
    HELP_NOTE = "tab moves between the stage, the session and the input; type in the fields as usual."
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close without running anything"),
        Binding("ctrl+r", "run", "Run", tooltip="Dispatch the stage to every hook with this input"),
        HELP,
    ]

    def __init__(self, stage: str = "mutate_request") -> None:
        super().__init__()
        self.stage = stage

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label("Run a stage on every hook (ctrl+r runs, escape cancels)")
            yield Select([(s, s) for s in STAGES], value=self.stage, allow_blank=False, id="stage")
            yield Input(placeholder="session id (optional: binds the session's history)", id="session")
            yield TextArea(json.dumps(STAGE_TEMPLATES[self.stage], indent=2), language=None, id="context")
            yield Static("", id="stage-error", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Run", variant="primary", id="run")
                yield Button("Cancel", id="cancel")

    @on(Select.Changed, "#stage")
    def stage_changed(self, event: Select.Changed) -> None:
        self.stage = str(event.value)
        self.query_one("#context", TextArea).text = json.dumps(STAGE_TEMPLATES.get(self.stage, {}), indent=2)

    @on(Button.Pressed, "#run")
    def action_run(self) -> None:
        text = self.query_one("#context", TextArea).text
        try:
            context = json.loads(text or "{}")
        except ValueError as exc:
            self.query_one("#stage-error", Static).update(f"the input is not JSON: {exc}")
            return
        if not isinstance(context, dict):
            self.query_one("#stage-error", Static).update("the input must be a JSON object")
            return
        session = self.query_one("#session", Input).value.strip() or None
        self.dismiss({"stage": self.stage, "context": context, "session": session})

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class ResultScreen(ModalScreen[None]):
    """What a stage run by hand produced: a summary line and the merged output."""

    TITLE = "a stage's result"
    BINDINGS = [Binding("escape", "close", "Close", tooltip="Close and go back"), QUIT, HELP]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(self.title_text)
            with VerticalScroll():
                yield Static(Text(clean(self.text[:MORE_LIMIT])), markup=False)
            yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def action_close(self) -> None:
        self.dismiss(None)


class RejectScreen(ModalScreen[str | None]):
    """Reject a change held for review, with a reason the agent is told."""

    AUTO_FOCUS = "#reason"
    TITLE = "reject a held change"
    HELP_NOTE = "Type the reason (optional; the agent is told it); enter rejects."
    BINDINGS = [Binding("escape", "cancel", "Cancel", tooltip="Close and reject nothing"), HELP]
    VERB = "Reject"

    def __init__(self, subject: str, detail: str = "") -> None:
        super().__init__()
        self.subject = subject
        self.detail = detail or "It is not installed. The agent that proposed it is told, with your reason."

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(f"{self.VERB} “{self.subject}”?", id="question")
            yield Static(Text(self.detail), id="detail")
            yield Input(placeholder=f"the reason (optional; enter {self.VERB.lower()}s)", id="reason")
            with Horizontal(id="buttons"):
                yield Button(self.VERB, variant="error", id="yes")
                yield Button("Cancel", id="no")

    @on(Input.Submitted, "#reason")
    @on(Button.Pressed, "#yes")
    def action_reject(self) -> None:
        self.dismiss(self.query_one("#reason", Input).value.strip())

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(None)


class DismissScreen(RejectScreen):
    """Set aside a held change that went stale (its file changed under it), with a reason the agent
    is told."""

    TITLE = "dismiss a stale held change"
    HELP_NOTE = "Type the reason (optional; the agent is told it); enter dismisses."
    BINDINGS = [Binding("escape", "cancel", "Cancel", tooltip="Close and dismiss nothing"), HELP]
    VERB = "Dismiss"

    def __init__(self, subject: str, why: str | None) -> None:
        super().__init__(
            subject,
            f"{why or 'Its file changed after the agent proposed it.'}\n"
            "It cannot be installed any more. The agent that proposed it is told, with your reason.",
        )


@dataclass(frozen=True)
class RevertChoice:
    refresh: list[str]  # sessions whose frozen prompt to drop
    together: bool  # also undo the later changes to the same files


class RevertScreen(ModalScreen[RevertChoice | None]):
    """Revert a change: what it touches (the sessions still sending a prompt composed under it, the
    later changes to the same files), and what to do about them."""

    TITLE = "revert a change"
    HELP_NOTE = "space checks or unchecks the selected session or the box; tab moves between them."
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", tooltip="Close and revert nothing"),
        Binding("y", "confirm", "Revert", tooltip="Revert, refreshing the checked sessions"),
        QUIT,
        HELP,
    ]

    def __init__(
        self, question: str, files: list[str], impact: Impact, namer: Callable[[str | None], str]
    ) -> None:
        super().__init__()
        self.question = question
        self.files = files
        self.impact = impact
        self.namer = namer

    def _selection(self, session: SessionInfo) -> Selection[str]:
        sid = session.id
        return Selection(f"{self.namer(sid)}  ({sid}, agent {session.agent or '-'})", sid, True)

    def _refresh_text(self, together: bool) -> Text:
        count = len(self.impact.sessions)
        if together:
            count += len(self.impact.later_sessions)
        if not count:
            return Text("No session froze its system prompt while this version was installed.")
        versions = "this version or a later one reverted with it" if together else "this version"
        return Text(
            f"{count} session(s) froze their system prompt while {versions} was installed and keep "
            "sending it. Refresh the checked ones (their next request composes the prompt anew):"
        )

    def compose(self) -> ComposeResult:
        sessions = self.impact.sessions
        later = self.impact.later
        with Vertical(id="dialog", classes="tall"):
            yield Label(self.question, id="question")
            yield Static(
                Text(
                    "A new commit undoes it (history is kept); hooks and prompts reload at once, and the "
                    "agent that made it is told.\nFiles: " + ", ".join(self.files)
                ),
                id="detail",
            )
            yield Static(self._refresh_text(False), id="refresh-note")
            listed = SelectionList[str](*[self._selection(s) for s in sessions], id="refresh")
            # Empty until "together" adds the sessions frozen under the later versions.
            listed.display = bool(sessions)
            yield listed
            if later:
                yield Static(
                    Text(
                        "Later changes touch the same files; reverting this one alone may conflict with them:"
                    )
                )
                yield Static(
                    Text("\n".join(f"  {c['sha'][:10]}  {c.get('subject', '')}" for c in later)), id="later"
                )
                yield Checkbox("revert them together with this one (one commit)", id="together")
            with Horizontal(id="buttons"):
                yield Button("Revert (y)", variant="error", id="yes")
                yield Button("Cancel", id="no")

    @on(Checkbox.Changed, "#together")
    def together_changed(self, event: Checkbox.Changed) -> None:
        """Reverting the later changes too also touches the sessions frozen under them: list them
        (checked), or take them off the list again."""
        listed = self.query_one("#refresh", SelectionList)
        for session in self.impact.later_sessions:
            sid = session.id
            shown = [i for i in range(listed.option_count) if listed.get_option_at_index(i).value == sid]
            if event.value and not shown:
                listed.add_option(self._selection(session))
            elif not event.value and shown:
                listed.remove_option_at_index(shown[0])
        listed.display = listed.option_count > 0
        self.query_one("#refresh-note", Static).update(self._refresh_text(event.value))

    @on(Button.Pressed, "#yes")
    def action_confirm(self) -> None:
        refresh = list(self.query_one("#refresh", SelectionList).selected)
        together = self.query_one("#together", Checkbox).value if self.query("#together") else False
        self.dismiss(RevertChoice([str(s) for s in refresh], together))

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(None)
