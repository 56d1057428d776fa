"""The console's keys that act from every view (quit, back, the heartbeat, a stage by hand, the runs'
filter, the engine's problems, starting the engine, the change an alert names, the alerts, going
between agents), the number keys that show the views, and `applies`: which key applies where (what
`check_action` answers), a pure function of plain values.

Each view binds its own keys (`View.BINDINGS`) and says when one of them acts (`View.key_state`);
`applies` reads them from the registry, so that one table of rules (tests/unit/console/test_keys.py)
covers the keys of every view and of the console."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Final

from textual.binding import Binding, BindingType

from .alerts import READ_KEY, REVERT_KEY, SHOW_KEY
from .model import ChangeEntry
from .views import VIEWS, Registry, View

# The app's: quitting, starting the engine the console follows, and the keys of what is on screen.
APP_KEYS: Final[list[BindingType]] = [
    Binding("q", "quit", "Quit", id="app.quit", tooltip="Close the console (the engine keeps running)"),
    Binding("E", "start_engine", "Start engine", id="engine.start", tooltip="Start the workspace's engine"),
    Binding(
        "question_mark",
        "help",
        "Keys",
        id="app.help",
        tooltip="The keys of this view or dialog, with what each does",
    ),
]

# Going between agents, in a console of several (hidden with one): the fleet view, the next, the previous.
AGENT_KEYS: Final[list[BindingType]] = [
    Binding(
        "0", "show_fleet", "All agents", id="agent.fleet", tooltip="Every agent in a row (the fleet view)"
    ),
    Binding(
        "left_square_bracket",
        "next_agent(-1)",
        "Previous agent",
        id="agent.previous",
        tooltip="Show the previous agent of the fleet in its views",
    ),
    Binding(
        "right_square_bracket",
        "next_agent(1)",
        "Next agent",
        id="agent.next",
        tooltip="Show the next agent of the fleet in its views",
    ),
]
AGENT_ACTIONS: Final = frozenset({"show_fleet", "next_agent"})
APP_KEYS.extend(AGENT_KEYS)

# The main screen's: they act from every view.
SCREEN_KEYS: Final[list[BindingType]] = [
    Binding("escape", "go_back", "Back", id="nav.back", tooltip="Back to where enter came from"),
    Binding("f", "fire_heartbeat", "Fire", id="heartbeat.fire", tooltip="Run one heartbeat tick now"),
    Binding("p", "toggle_pause", "Pause/resume", id="heartbeat.pause", tooltip="Pause or resume the timer"),
    Binding("s", "run_stage", "Run stage", id="stage.run", tooltip="Dispatch a stage by hand"),
    Binding(
        "slash", "focus_filter", "Filter", id="runs.filter", tooltip="Filter runs by stage, hook, session"
    ),
    Binding("c", "problems", "Problems", id="engine.problems", tooltip="The engine's config errors in full"),
    Binding(
        SHOW_KEY,
        "show_named",
        "Show change",
        id="alert.show",
        tooltip="Select in view 5 the change the newest alert names (with none on screen: the change "
        "behind the selected failed run, the degraded tick, or what made a held change stale)",
    ),
    Binding(
        REVERT_KEY,
        "revert_named",
        "Revert it",
        id="alert.revert",
        tooltip="Revert the change the newest alert (or the selected failed run, the degraded tick) names: "
        "the revert dialog asks first",
    ),
    Binding(
        "z", "close_toasts", "Close toasts", id="alert.close", tooltip="Close the notifications on screen"
    ),
    Binding(READ_KEY, "read_alerts", "Alerts", id="alert.read", tooltip="The recent alerts, each whole"),
]


# The keys of every view that ask the engine to do something: dimmed while it does not answer.
ENGINE_ACTIONS: Final = frozenset({"fire_heartbeat", "toggle_pause", "run_stage", "revert_named"})


def view_keys(views: Registry) -> list[BindingType]:
    """A number key per view, by its place in the registry. They are shown in the view bar
    ("1 Hook runs"), not in the key bar."""
    return [
        Binding(
            str(n),
            f"show_tab('{view.NAME}')",
            view.LABEL,
            id=f"view.{view.NAME}",
            show=False,
            tooltip=f"Show view {n}, {view.LABEL.lower()}",
        )
        for n, view in enumerate(views, 1)
    ]


@functools.cache
def actions_of(view: type[View]) -> frozenset[str]:
    """The actions the keys of `view` run. Cached: a class's keys do not change, and Textual asks
    `check_action` of every key shown at each change of focus or view (reading the bindings anew
    each time was most of a key press's own work)."""
    return frozenset(binding.action for binding in Binding.make_bindings(view.BINDINGS))


@functools.cache
def _views_actions(views: Registry) -> frozenset[str]:
    """The actions of every view's own keys."""
    return frozenset().union(*(actions_of(view) for view in views))


@dataclass(frozen=True)
class Where:
    """What decides whether a key applies: the view shown, the change selected in it (None outside
    the changes view), whether a text field has the focus, whether escape has somewhere to go back
    to, whether the engine answers, whether it reports configuration problems, whether the console
    knows the engine's workspace (so that it can start the engine), whether an alert or the selected
    row names a change (and one that can be reverted), and whether there were alerts."""

    view: str
    change: ChangeEntry | None = None
    typing: bool = False
    back: bool = False
    connected: bool = True
    problems: bool = False
    workspace: bool = False
    named: bool = False
    named_revert: bool = False
    alerts: bool = False


def applies(action: str, where: Where, views: Registry = VIEWS) -> bool | None:
    """As Textual's `check_action`: True, the key applies; None, it is shown dimmed (nothing here
    for it to act on, such as no change selected); False, it is not shown in this view at all."""
    shown = next((view for view in views if where.view == view.NAME), None)
    if action in _views_actions(views):
        # A view's own key: only in the views that bind it, and as the view says.
        if shown is None or action not in actions_of(shown):
            return False
        return shown.key_state(action, where.change, where.connected)
    if action == "show_named":
        return True if where.named else None
    if action == "revert_named" and not where.named_revert:
        return None
    if action == "read_alerts":
        return True if where.alerts else None
    if action in ENGINE_ACTIONS:
        return True if where.connected else None  # shown dimmed while the engine does not answer
    if action == "go_back":
        return where.back or where.typing
    if action == "problems":
        return where.problems
    if action == "start_engine":
        return not where.connected and where.workspace
    return True
