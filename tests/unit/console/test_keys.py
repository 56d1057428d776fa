"""Which key applies where, on plain values: no engine process, no Textual app.

`applies` answers as Textual's `check_action`: True (the key acts), None (shown dimmed: nothing here
for it to act on), False (not shown in this view). Every rule is a row of the table below."""

from __future__ import annotations

import pytest
from textual.binding import Binding

from engine.protocol import Change, PendingChange
from engine.protocol.records import Attempt
from evolve_console.app import EvolveConsole
from evolve_console.keys import APP_KEYS, SCREEN_KEYS, Where, applies, view_keys
from evolve_console.mainscreen import MainScreen
from evolve_console.model import ChangeEntry
from evolve_console.views import VIEWS


def commit(state: str = "unreviewed", origin: str = "agent") -> ChangeEntry:
    return ChangeEntry.commit(
        Change(
            sha="a" * 40,
            time=1.0,
            message="edit prompt chat.md",
            subject="edit prompt chat.md",
            trailers={},
            files=["prompts/chat.md"],
            origin=origin,
            state=state,
        )
    )


def held(state: str = "pending") -> ChangeEntry:
    return ChangeEntry.pending(
        PendingChange(
            id="p1",
            file="prompts/chat.md",
            base_sha256="0" * 64,
            message="edit prompt chat.md",
            tool="evolve_prompt_edit",
            session="ses_a",
            call_id="call_1",
            hook=None,
            created_at=1.0,
            content=None,
            status=state,
        )
    )


def attempt() -> ChangeEntry:
    return ChangeEntry.attempt(
        Attempt(id="att_1", file="hooks/notes.py", created_at=2.0, message="edit notes.py", session="ses_a")
    )


ALL_VIEWS = [view.NAME for view in VIEWS]
CHANGES = Where("changes")

RULES: list[tuple[str, Where, bool | None]] = [
    # Following new rows: every table (each grows); failures only: the runs.
    *[("follow", Where(v), v in ("runs", "stages", "sessions", "changes", "tools")) for v in ALL_VIEWS],
    *[("toggle_failures", Where(v), v == "runs") for v in ALL_VIEWS],
    # See more: the views with a detail pane that cuts (the changes' diff does not).
    *[("more", Where(v), v != "changes") for v in ALL_VIEWS],
    *[("toggle_schemas", Where(v), v == "sessions") for v in ALL_VIEWS],
    *[("toggle_needs_review", Where(v), v == "changes") for v in ALL_VIEWS],
    *[("open", Where(v), v in ("runs", "tools", "changes", "stages")) for v in ALL_VIEWS],
    # Reading a diff: only in the changes view; the whole file needs a change.
    *[(a, Where(v), v == "changes") for a in ("diff_wide", "diff_split") for v in ALL_VIEWS],
    ("diff_file", Where("runs", commit()), False),
    ("diff_file", CHANGES, None),
    ("diff_file", Where("changes", commit()), True),
    # Escape: out of a text field, or back along the trail.
    ("go_back", Where("runs"), False),
    ("go_back", Where("runs", back=True), True),
    ("go_back", Where("sessions", typing=True), True),
    ("problems", Where("runs"), False),
    ("problems", Where("heartbeat", problems=True), True),
    # Starting the engine: only when it is down and the console knows its workspace.
    ("start_engine", Where("runs"), False),
    ("start_engine", Where("runs", connected=False), False),
    ("start_engine", Where("runs", connected=False, workspace=True), True),
    ("start_engine", Where("runs", connected=True, workspace=True), False),
    # Decisions on a change: dimmed in the changes view without one, absent elsewhere.
    *[(a, CHANGES, None) for a in ("approve", "revert", "reject", "replay")],
    *[(a, Where("runs"), False) for a in ("approve", "revert", "reject", "replay")],
    ("approve", Where("changes", commit()), True),
    ("approve", Where("changes", commit("reverted")), True),  # asks first
    ("approve", Where("changes", held()), True),
    ("approve", Where("changes", held("rejected")), None),
    # A stale one is asked too: the engine refuses it and gives the three versions to compare.
    ("approve", Where("changes", held("stale")), True),
    ("approve", Where("changes", held("dismissed")), None),
    ("revert", Where("changes", commit()), True),
    ("revert", Where("changes", commit("none", origin="initial")), None),
    ("revert", Where("changes", held()), None),
    ("reject", Where("changes", held()), True),
    ("reject", Where("changes", held("rejected")), None),
    ("reject", Where("changes", held("stale")), True),  # dismisses it, with a reason
    ("reject", Where("changes", held("dismissed")), None),
    ("reject", Where("changes", commit()), None),
    # An attempt its test rejected takes no decision, no replay, no check; its turn still opens.
    *[
        (a, Where("changes", attempt()), None)
        for a in ("approve", "revert", "reject", "replay", "evaluate", "reach", "diff_file")
    ],
    ("open", Where("changes", attempt()), True),
    # Behaviour checks: a commit but the first, a held change that can still be decided.
    ("evaluate", Where("changes", commit()), True),
    ("evaluate", Where("changes", commit("none", origin="initial")), None),
    ("evaluate", Where("changes", held()), True),
    ("evaluate", Where("changes", held("rejected")), None),
    ("evaluate", CHANGES, None),
    *[("evaluate", Where(v), False) for v in ALL_VIEWS if v != "changes"],
    # Who runs it: a commit only.
    ("reach", Where("changes", commit()), True),
    ("reach", Where("changes", held()), None),
    *[("reach", Where(v), False) for v in ALL_VIEWS if v != "changes"],
    # The change an alert (or the selected failed run, degraded tick, stale change) names.
    *[("show_named", Where(v), None) for v in ALL_VIEWS],
    *[("show_named", Where(v, named=True), True) for v in ALL_VIEWS],
    ("show_named", Where("runs", named=True, connected=False), True),  # only shows a view
    ("revert_named", Where("runs", named=True), None),  # names nothing that can be reverted
    ("revert_named", Where("runs", named=True, named_revert=True), True),
    ("revert_named", Where("runs", named=True, named_revert=True, connected=False), None),
    *[("close_toasts", Where(v), True) for v in ALL_VIEWS],
    ("read_alerts", Where("runs"), None),
    ("read_alerts", Where("heartbeat", alerts=True), True),
    ("replay", Where("changes", commit("reverted")), True),
    ("replay", Where("changes", held("rejected")), True),
    # The rest apply everywhere.
    *[
        (a, Where(v), True)
        for a in ("quit", "show_tab", "fire_heartbeat", "toggle_pause", "run_stage", "focus_filter")
        for v in ALL_VIEWS
    ],
    ("open_session", Where("heartbeat"), True),
    # While the engine does not answer, what needs it is dimmed; what only reads the screen is not.
    *[
        (a, Where(v, connected=False), None)
        for a in ("fire_heartbeat", "toggle_pause", "run_stage")
        for v in ALL_VIEWS
    ],
    *[
        (a, Where("changes", commit(), connected=False), None)
        for a in ("approve", "revert", "replay", "evaluate", "reach", "diff_file", "open")
    ],
    ("reject", Where("changes", held(), connected=False), None),
    ("toggle_failures", Where("runs", connected=False), None),
    *[(a, Where("changes", commit(), connected=False), True) for a in ("diff_wide", "diff_split", "follow")],
    *[(a, Where("runs", connected=False), True) for a in ("follow", "more", "open", "quit", "focus_filter")],
    ("toggle_schemas", Where("sessions", connected=False), True),
]


@pytest.mark.parametrize(("action", "where", "expected"), RULES)
def test_which_key_applies_where(action: str, where: Where, expected: bool | None) -> None:
    assert applies(action, where) is expected


def test_each_key_names_an_action_of_the_console_and_the_rules_name_only_those() -> None:
    owners = [
        (EvolveConsole, APP_KEYS),
        (MainScreen, [*SCREEN_KEYS, *view_keys(VIEWS)]),
        *[(view, view.BINDINGS) for view in VIEWS],
    ]
    bound: set[str] = set()
    missing: list[str] = []
    for owner, keys in owners:
        actions = {b.action.split("(")[0] for b in keys if isinstance(b, Binding)}
        missing += sorted(
            f"{owner.__name__}.{a}" for a in actions if not callable(getattr(owner, f"action_{a}", None))
        )
        bound |= actions
    assert not missing, f"keys bound to actions the console does not have: {missing}"
    named = {action for action, _, _ in RULES} - {"open_session"}  # the palette's, not a key's
    assert named <= bound, f"rules for actions no key has: {sorted(named - bound)}"
