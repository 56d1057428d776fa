"""The console's keys: each binding (key, action, label, id, tooltip), and the rules of which key
applies where (`applies`, what the app's `check_action` answers). The key bar (`keybar.py`) shows
them; the rules are a pure function of plain values, tested as a table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from textual.binding import Binding, BindingType

from .diffview import MIN_SPLIT
from .model import ChangeEntry
from .views import VIEWS

BINDINGS: Final[list[BindingType]] = [
    Binding("q", "quit", "Quit", id="app.quit", tooltip="Close the console (the engine keeps running)"),
    # The view keys are shown in the view bar ("1 Hook runs"), not in the key bar.
    *[
        Binding(key, f"show_tab('{view}')", label, id=f"view.{view}", show=False)
        for view, key, label in VIEWS
    ],
    Binding("enter", "open", "Open", id="nav.open", tooltip="Open what the selected row leads to"),
    Binding("escape", "go_back", "Back", id="nav.back", tooltip="Back to where enter came from"),
    Binding("f", "fire_heartbeat", "Fire", id="heartbeat.fire", tooltip="Run one heartbeat tick now"),
    Binding("p", "toggle_pause", "Pause/resume", id="heartbeat.pause", tooltip="Pause or resume the timer"),
    Binding("a", "approve", "Approve", id="change.approve", tooltip="Approve the selected change"),
    Binding("r", "revert", "Revert", id="change.revert", tooltip="Revert the selected change (asks first)"),
    Binding(
        "d",
        "reject",
        "Reject",
        id="change.reject",
        tooltip="Reject the selected pending change (asks why)",
    ),
    Binding(
        "e",
        "replay",
        "Replay",
        id="change.replay",
        tooltip="Replay the selected change on recorded traffic: what it changes for the agent",
    ),
    # Reading a diff (self-modifications view).
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
    Binding("s", "run_stage", "Run stage", id="stage.run", tooltip="Dispatch a stage by hand"),
    Binding("g", "follow", "Follow", id="runs.follow", tooltip="Jump to the newest row and follow"),
    Binding("x", "toggle_failures", "Failures", id="runs.failures", tooltip="Show only failed runs"),
    Binding(
        "slash", "focus_filter", "Filter", id="runs.filter", tooltip="Filter runs by stage, hook, session"
    ),
    Binding(
        "t", "toggle_schemas", "Schemas", id="sessions.schemas", tooltip="The tools offered, with schemas"
    ),
    Binding("m", "more", "More", id="detail.more", tooltip="See a truncated field in full"),
    Binding("c", "problems", "Problems", id="engine.problems", tooltip="The engine's config errors in full"),
    Binding("E", "start_engine", "Start engine", id="engine.start", tooltip="Start the workspace's engine"),
]


@dataclass(frozen=True)
class Where:
    """What decides whether a key applies: the view shown, the change selected in it (None outside
    the changes view), whether a text field has the focus, whether escape has somewhere to go back
    to, whether the engine answers, whether it reports configuration problems, and whether the
    console knows the engine's workspace (so that it can start the engine)."""

    view: str
    change: ChangeEntry | None = None
    typing: bool = False
    back: bool = False
    connected: bool = False
    problems: bool = False
    workspace: bool = False


def applies(action: str, where: Where) -> bool | None:
    """As Textual's `check_action`: True, the key applies; None, it is shown dimmed (nothing here
    for it to act on, such as no change selected); False, it is not shown in this view at all."""
    # Keys that only mean something in some views are shown only there.
    tab = where.view
    if action in ("follow", "toggle_failures"):
        return tab == "runs" or (action == "follow" and tab in ("stages", "changes", "tools"))
    if action == "more":
        return tab in ("runs", "stages", "sessions", "heartbeat", "tools")
    if action == "toggle_schemas":
        return tab == "sessions"
    if action == "toggle_needs_review":
        return tab == "changes"
    if action in ("diff_wide", "diff_split", "diff_file"):
        if tab != "changes":
            return False
        return action != "diff_file" or where.change is not None or None
    if action == "open":
        return tab in ("runs", "tools", "changes", "stages")
    if action == "go_back":
        return where.back or where.typing
    if action == "problems":
        return where.problems
    if action == "start_engine":
        return not where.connected and where.workspace
    if action in ("approve", "revert", "reject", "replay"):
        change = where.change
        if change is None:
            return None if tab == "changes" else False
        if action == "reject" and not change.awaits_decision:
            return None
        if action == "approve" and change.pending_id and not change.awaits_decision:
            return None
        if action == "revert" and not change.revertible:
            return None
    return True
