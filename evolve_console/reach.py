"""A change's reach: the sessions that run it (their prompt frozen under it, or their hooks run after
it) and, in each, the agent's answers since; in the selected change's detail, and on a screen of its
own where each session opens in view 3 and each answer in view 2 (the stage result that recorded it).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import ModalScreen

from engine.protocol.records import Answer, Reach, SessionReach

from .detail import DetailPane, Part
from .format import clock_time, date_time, session_label, short
from .help import HELP_KEY
from .keybar import KeyBar
from .table import KeyedTable

REACH_KEY = "u"  # the changes view's key that opens the screen
ANSWERS_SHOWN = 3  # answers per session in the change's detail (the screen lists them all)

# What the screen is dismissed with: ("session", id) to open it in view 3, ("answer", dispatch) to
# open the stage result that recorded it in view 2, or None.
Opened = tuple[str, str] | None


def reach_text(reach: Reach | None) -> Text:
    """The reach in the change's detail: each session, how it runs the change, and its latest
    answers since (one line when no session does)."""
    text = Text()
    text.append("who runs it: ", style="bold")
    if reach is None:
        text.append("not known (the engine did not say)", style="dim")
        return text
    until = f", until {reach.later[:10]} changed the same files" if reach.later else ""
    if not reach.sessions:
        text.append(f"no session since it took effect ({date_time(reach.since)}{until})", style="dim")
        return text
    sessions = len(reach.sessions)
    text.append(f"{sessions} session{'s' if sessions != 1 else ''} since {date_time(reach.since)}{until}")
    text.append(f" ({REACH_KEY}: open one, or one of its answers)", style="dim")
    for found in reach.sessions:
        info = found.session
        count = len(found.answers) + found.more
        text.append(f"\n  {session_label(info.id, info.title)}", style="bold")
        text.append(f" ({found.how}; {count} answer{'s' if count != 1 else ''} since)")
        for answer in found.answers[:ANSWERS_SHOWN]:
            text.append(f"\n    {clock_time(answer.at)} ", style="dim")
            text.append(short(answer.text, 120) or "(no text)")
            if answer.calls:
                text.append(f"  [tools: {', '.join(answer.calls)}]", style="dim")
        hidden = count - min(len(found.answers), ANSWERS_SHOWN)
        if hidden > 0:
            text.append(f"\n    … {hidden} more", style="dim")
    return text


def _session_key(found: SessionReach) -> str:
    return f"session:{found.session.id}"


def _answer_key(answer: Answer) -> str:
    return f"answer:{answer.dispatch}"


class ReachScreen(ModalScreen[Opened]):
    """The sessions that run a change, each with the agent's answers since: enter opens the selected
    session in view 3, or the selected answer's stage result in view 2 (escape there comes back)."""

    TITLE = "who runs a change"
    HELP_NOTE = "The arrows move through the sessions and their answers; tab moves to the detail."
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", tooltip="Back to the change"),
        Binding(
            "enter",
            "open",
            "Open",
            tooltip="The selected session in view 3, or the selected answer's stage result in view 2",
        ),
        Binding("o", "open_session", "Session", tooltip="The session of the selected row, in view 3"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)"),
        HELP_KEY,
    ]

    def __init__(self, subject: str, reach: Reach, at: str | None = None) -> None:
        """`at`: the row selected when the screen opens (where it was left, coming back)."""
        super().__init__()
        self.subject = subject
        self.reach = reach
        self.at = at
        self.left_at: str | None = None  # the row selected when it was left for another view
        self._sessions: dict[str, SessionReach] = {}  # row key -> the session it is, or is under
        self._answers: dict[str, Answer] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            yield KeyedTable(
                [("time", "time"), ("session", "session"), ("change", "how, or the answer")], id="reach-rows"
            )
            yield DetailPane("", id="reach-detail", classes="detail")
        yield KeyBar(id="reach-keys")

    def on_mount(self) -> None:
        rows = []
        for found in self.reach.sessions:
            key = _session_key(found)
            self._sessions[key] = found
            info = found.session
            rows.append((key, [clock_time(found.since), session_label(info.id, info.title), found.how]))
            for answer in found.answers:
                akey = _answer_key(answer)
                self._sessions[akey] = found
                self._answers[akey] = answer
                rows.append((akey, [clock_time(answer.at), "", f"↳ {short(answer.text, 60) or '(no text)'}"]))
        table = self.query_one("#reach-rows", KeyedTable)
        table.replace_all(rows)
        # Where it was left, coming back; else the first session (the table would follow its last row).
        at = self.at if self.at is not None and self.at in table.rows else (rows[0][0] if rows else None)
        if at is not None:
            table.move_cursor(row=table.get_row_index(at))
            self._show(at)
        else:
            self._show("")
        table.focus()

    @on(KeyedTable.RowHighlighted, "#reach-rows")
    def row_highlighted(self, event: KeyedTable.RowHighlighted) -> None:
        self._show(event.key)

    def _show(self, key: str) -> None:
        found = self._sessions.get(key)
        head = Text()
        head.append(f"who runs “{self.subject}”", style="bold")
        if self.reach.untested:
            head.append(f"\n{self.reach.untested}", style="yellow")
        if found is None:
            self.query_one("#reach-detail", DetailPane).show(head, [])
            return
        info = found.session
        head.append(f"\nsession {session_label(info.id, info.title)} ({info.id}) · {found.how}")
        head.append(f" · since {date_time(found.since)}")
        answer = self._answers.get(key)
        parts = []
        if answer is not None:
            calls = ", ".join(answer.calls) or "(none)"
            head.append(f"\nanswer of {date_time(answer.at)} · tools it called: {calls}")
            head.append("\nenter: its stage result in view 2 · o: the session in view 3", style="dim")
            parts.append(Part("answer", "the agent's answer", answer.text, empty="(no text)"))
        else:
            head.append("\nenter: the session in view 3", style="dim")
            listed = "\n\n".join(f"{date_time(a.at)}\n{a.text}" for a in found.answers)
            if found.more:
                listed += f"\n\n… {found.more} more answers since (not listed)"
            parts.append(Part("answers", f"its answers since ({len(found.answers) + found.more})", listed))
        self.query_one("#reach-detail", DetailPane).show(head, parts)

    def _selected(self) -> str | None:
        return self.query_one("#reach-rows", KeyedTable).selected_key()

    def action_back(self) -> None:
        self.dismiss(None)

    def action_open(self) -> None:
        key = self._selected()
        if key is None:
            return
        self.left_at = key
        answer = self._answers.get(key)
        if answer is not None:
            self.dismiss(("answer", answer.dispatch))
        elif key in self._sessions:
            self.dismiss(("session", self._sessions[key].session.id))

    def action_open_session(self) -> None:
        key = self._selected()
        if key is not None and key in self._sessions:
            self.left_at = key
            self.dismiss(("session", self._sessions[key].session.id))
