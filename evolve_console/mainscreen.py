"""The console's main screen for one agent: the connection bar, the view bar, the views (one shown at
a time), the key bar. It is built from the registry of views: it shows a view on its number key or
a click on its label, hands each view the model's changes, goes from a row to another view's row
(enter; escape comes back), and binds the keys that act from every view."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, cast

from textual import on, work
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import BindingType
from textual.screen import Screen
from textual.widgets import Input
from textual.worker import Worker

from . import controls
from .agent import Agent
from .alerts import Named
from .alertscreen import AlertScreen, Chosen
from .connectionbar import ConnectionBar
from .keybar import KeyBar
from .keys import SCREEN_KEYS, Where, applies, view_keys
from .messages import COMMAND_GROUP, Failed, Go, OpenSession, Reload, SwitchAgent, Toast, pass_failure_up
from .model import Part, Update
from .palette import Command, EvolveCommands, Run
from .screens import MoreScreen, ResultScreen, StageScreen
from .status import Pieces, badges, has_problems, problems_text
from .textual_private import skip_own_layout
from .viewbar import FLEET, ViewBar
from .views import ChangesView, HeartbeatView, Registry, RunsView, View

# The palette's commands that act from every view (each view adds its own, `View.COMMANDS`).
COMMANDS: tuple[Command, ...] = (
    Command("heartbeat: fire now", "fire_heartbeat", "run one heartbeat tick now"),
    Command("heartbeat: pause or resume", "toggle_pause", "stop or restart the heartbeat timer"),
    Command("go: the session of the selected row", "open_session", "from a run, a tool call or a change"),
    Command("go: back", "go_back", "to where the last enter came from"),
    Command("stage: run by hand", "run_stage", "dispatch a stage to every hook with an input you edit"),
    Command("engine: show its problems", "problems", "config errors and warnings in full"),
    Command("engine: start it", "app.start_engine", "start the workspace's engine when it is down"),
    Command("alert: show the change it names", "show_named", "j: the newest alert's change in view 5"),
    Command("alert: revert the change it names", "revert_named", "R: asks first"),
    Command("alert: close the toasts", "close_toasts", "z"),
    Command("alert: read the recent alerts", "read_alerts", "N: each whole"),
)


ALL_PARTS = frozenset(Part)


# Textual takes a closed toast's widgets away a moment after; then the screen is drawn again.
REDRAW_AFTER_TOASTS_S = 0.3


def clear_toasts(app: App[Any]) -> None:
    """Every toast gone. Textual does not always draw again what was under a toast it takes away (a
    piece of the toast stayed on a real terminal after `z`): the screen is drawn again once it is
    gone."""
    app.clear_notifications()

    def redraw() -> None:
        with contextlib.suppress(ScreenStackError):  # the console is closing
            app.screen.refresh()

    app.set_timer(REDRAW_AFTER_TOASTS_S, redraw)


@dataclass(frozen=True)
class Step:
    """Where escape goes back to: a view with its selected row, and what was over it (the screen
    that `Go` came from), opened again by `back`."""

    view: str
    key: str | None
    back: Callable[[], object] | None = None


class MainScreen(Screen[None]):
    """The views of one agent, and going between them.

    Over 30 methods: they are the keys that act from every view (going between views and back, the
    alert's change shown or reverted, the toasts, the heartbeat, a stage by hand, the problems),
    each an `action_` with its dialog's answer or its worker, and the routing of the views' messages;
    what a view does is the view's own."""

    BINDINGS: ClassVar[list[BindingType]] = SCREEN_KEYS
    COMMANDS: ClassVar = {EvolveCommands}
    AUTO_FOCUS = ""  # the shown view says what takes the focus (`on_mount`), not the first widget

    @classmethod
    def of(cls, agent: Agent, views: Registry, *, named: bool = False) -> MainScreen:
        """The main screen of `views`. Textual reads a class's bindings once, when the class is
        made, and the number keys come from the views: each registry gets a class of its own.
        `named`: the view bar names the agent (a console of several)."""
        keys = [*view_keys(views), *SCREEN_KEYS]
        return cast(MainScreen, type(cls.__name__, (cls,), {"BINDINGS": keys})(agent, views, named=named))

    def __init__(self, agent: Agent, views: Registry, *, named: bool = False) -> None:
        super().__init__()
        self.agent = agent
        self.view_classes = views
        self.shown = views[0].NAME  # the view on screen
        self.trail: list[Step] = []  # where escape goes back to, the latest last
        self._titles: dict[str, str | None] = {}  # the session titles the views were drawn with
        # Made here, not in compose: the app draws the connection bar from its own mount on.
        self.connection = ConnectionBar(id="connection")
        bar = [(view.NAME, str(n), view.LABEL) for n, view in enumerate(views, 1)]
        self.view_bar = ViewBar(bar, shown=self.shown, id="views", agent=agent.name if named else None)
        self._views: list[View] = [view(agent) for view in views]
        self.elsewhere = ""  # what waits for the operator at the other agents (the fleet entry's badge)

    def compose(self) -> ComposeResult:
        yield self.connection
        yield self.view_bar
        for view in self._views:
            view.display = self.shown == view.NAME
            yield view
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.set_focus(self.shown_view.focus_target())
        if self.agent.first_load.is_set():
            # Made after its agent was loaded (an agent opened from the fleet view): draw it all now.
            for part in sorted(ALL_PARTS):
                self.draw(part)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        pass_failure_up(self, event)  # the arrow keys move through its rows at once

    @on(Reload)
    @on(Toast)
    @on(Failed)
    def _name_agent(self, message: Reload | Toast | Failed) -> None:
        """What a view asks concerns this screen's agent: the message says so on its way to the app."""
        message.agent = self.agent.name

    # ---- the views -------------------------------------------------------------------------------

    @property
    def views(self) -> list[View]:
        """The views, in the registry's order."""
        return self._views

    def view(self, name: str) -> View:
        return next(view for view in self._views if name == view.NAME)

    @property
    def shown_view(self) -> View:
        return self.view(self.shown)

    # ---- drawing the model ---------------------------------------------------------------------

    def draw(self, part: Part) -> None:
        """Show `part` as the model holds it now, in every view that shows it."""
        for view in self.views:
            if part in view.PARTS:
                view.draw(part)
        if part is Part.SESSIONS:
            self._name_sessions()
        self.render_badges()

    def apply(self, update: Update) -> None:
        """What a batch of events changed, to every view."""
        with self.app.batch_update():
            for view in self.views:
                view.apply(update)
            if Part.SESSIONS in update.redraw:
                self._name_sessions()
            self.render_badges()

    def _name_sessions(self) -> None:
        """The views name sessions by their titles: when a title changed, they draw everything anew."""
        titles = {sid: s.title for sid, s in self.agent.model.sessions.items()}
        if titles != self._titles:
            self._titles = titles
            for view in self.views:
                view.redraw()

    def tick(self) -> None:
        for view in self.views:
            view.tick()

    def show_connection(self, items: Pieces) -> None:
        """The connection bar's pieces (`status.connection_items`); the views follow what they show
        of the engine's status (the way to connect opencode while none is)."""
        self.connection.show(items)
        for view in self.views:
            if view.is_mounted:
                view.status_changed()

    def connection_changed(self) -> None:
        """The engine started or stopped answering: the keys that need it are dimmed or not."""
        self.refresh_bindings()
        for view in self.views:
            view.connection_changed()

    def render_badges(self) -> None:
        """What waits for the operator, beside each view's label (and, in a console of several
        agents, what waits at the others, beside the fleet view's)."""
        self.shown_view.looked_at()
        found = badges(self.agent.model)
        if self.elsewhere:
            found[FLEET] = self.elsewhere
        self.view_bar.set_badges(found)

    # ---- showing views and going between them ----------------------------------------------------

    def action_show_tab(self, name: str) -> None:
        old, new = self.shown_view, self.view(name)
        if new is not old:
            self.shown = name
            old.display, new.display = False, True
            # Lay the screen out once, now (the screen's layout covers both pages).
            skip_own_layout(old)
            skip_own_layout(new)
            self.refresh(layout=True, repaint=False)  # the layout repaints what it moved
            self.view_bar.shown = name
            self.refresh_bindings()
            new.shown()
            self.render_badges()
        # The focus goes with the view, in the same frame (every focus change repaints the whole
        # screen); a widget of a hidden view must not keep it.
        self.set_focus(new.focus_target())

    @on(ViewBar.Selected)
    def view_selected(self, event: ViewBar.Selected) -> None:
        if event.view == FLEET:
            self.post_message(SwitchAgent(None))
        else:
            self.action_show_tab(event.view)

    @on(Go)
    def go(self, message: Go) -> None:
        """Show a view with a row selected; escape comes back here."""
        message.stop()
        self.trail.append(Step(self.shown, self.shown_view.selected_key(), message.back))
        self._show_row(message.view, message.key)

    def _show_row(self, name: str, key: str | None) -> None:
        self.action_show_tab(name)
        if key is not None and not self.shown_view.select(key):
            view = self.shown_view.LABEL.lower()
            self.post_message(
                Toast(
                    f"{key} is not among the {view} shown: it is older than the rows kept, or a filter "
                    "hides it",
                    "warning",
                    6,
                )
            )

    @on(OpenSession)
    def open_session(self, message: OpenSession) -> None:
        message.stop()
        session = message.session
        if not session:
            self.post_message(Toast("no session here", "warning", 4))
        elif session not in self.agent.model.sessions:
            self.post_message(Toast(f"the engine knows no session {session}", "warning", 5))
        else:
            self.post_message(Go("sessions", session))

    def action_open_session(self) -> None:
        self.post_message(OpenSession(self.shown_view.selected_session()))

    def action_go_back(self) -> None:
        """Escape: out of a filter field, else back to where the last enter came from."""
        if isinstance(self.focused, Input):
            self.set_focus(self.shown_view.focus_target())
            return
        if self.trail:
            step = self.trail.pop()
            self._show_row(step.view, step.key)
            if step.back is not None:
                step.back()  # the screen it came from, over that view again

    # ---- keys that act from every view -----------------------------------------------------------

    def where(self) -> Where:
        """What decides whether the console's keys apply now (`keys.applies`)."""
        model = self.agent.model
        named = self.named()
        return Where(
            view=self.shown,
            typing=isinstance(self.focused, Input),
            back=bool(self.trail),
            connected=model.connected,
            problems=has_problems(model.status),
            workspace=self.agent.workspace is not None,
            named=named is not None,
            named_revert=named is not None and named.revert is not None,
            alerts=bool(self.agent.alerts.recent),
        )

    # ---- the change an alert (or the selected row) names -----------------------------------------

    def named(self) -> Named | None:
        """The change the keys `j` and `R` act on: the one the newest alert on screen names (its toast
        says so); with none on screen, the one behind what the shown view selects."""
        alert = self.agent.alerts.current(self.agent.clock())
        if alert is not None and alert.change is not None:
            return Named(alert.change, self.still_revertible(alert.revert))
        return self.shown_view.named_change()

    def still_revertible(self, sha: str | None) -> str | None:
        """`sha`, unless it is reverted already (an alert raised before its revert names it still;
        reverting it again would only be refused)."""
        known = self.agent.model.changes.get(sha) if sha is not None else None
        return None if known is not None and known.state == "reverted" else sha

    def action_show_named(self) -> None:
        named = self.named()
        if named is not None:
            self.show_change(named.change)

    def action_revert_named(self) -> None:
        named = self.named()
        if named is not None and named.revert is not None:
            self.revert_change(named.revert)

    def show_change(self, key: str) -> None:
        """The change `key` selected in view 5; escape comes back."""
        self.trail.append(Step(self.shown, self.shown_view.selected_key()))
        self._show_row(ChangesView.NAME, key)

    def revert_change(self, sha: str) -> None:
        """The change `sha` selected in view 5 (when it is shown there), and the revert dialog for it."""
        self.trail.append(Step(self.shown, self.shown_view.selected_key()))
        self.action_show_tab(ChangesView.NAME)
        changes = self.query_one(ChangesView)
        changes.select(sha)
        changes.revert_commit(sha)

    def action_close_toasts(self) -> None:
        self.agent.alerts.close()
        clear_toasts(self.app)
        self.refresh_bindings()

    def action_read_alerts(self) -> None:
        alerts = [
            replace(a, revert=self.still_revertible(a.revert)) for a in self.agent.alerts.newest_first()
        ]
        if alerts:
            self.read_alerts(AlertScreen(alerts))

    def read_alerts(self, screen: AlertScreen) -> None:
        """The alerts dialog; what it was closed with (show or revert the change) is done here."""

        def chosen(choice: Chosen) -> None:
            if choice is None:
                return
            what, key = choice
            if what == "show":
                self.show_change(key)
            else:
                self.revert_change(key)

        self.app.push_screen(screen, chosen)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return applies(action, self.where(), self.view_classes)

    def action_fire_heartbeat(self) -> None:
        self.query_one(HeartbeatView).fire_now()

    def action_toggle_pause(self) -> None:
        self.query_one(HeartbeatView).toggle_pause()

    def action_focus_filter(self) -> None:
        self.action_show_tab(RunsView.NAME)
        self.query_one(RunsView).focus_filter()

    def action_problems(self) -> None:
        status = self.agent.model.status
        if status is not None:
            self.app.push_screen(MoreScreen("the engine's configuration problems", problems_text(status)))

    @on(ConnectionBar.Clicked)
    def connection_clicked(self) -> None:
        if self.check_action("problems", ()):
            self.action_problems()

    def action_run_stage(self) -> None:
        def chosen(request: dict[str, Any] | None) -> None:
            if request:
                self.run_stage(request)

        self.app.push_screen(StageScreen(), chosen)

    @work(group=COMMAND_GROUP, exit_on_error=False, name="run the stage")
    async def run_stage(self, request: dict[str, Any]) -> None:
        self.app.push_screen(ResultScreen(*await controls.run_stage(self.agent.client, request)))

    # ---- the palette -----------------------------------------------------------------------------

    def commands(self) -> list[tuple[Command, Run]]:
        """The palette's commands: the console's, each view's own, and one to show each view."""
        found: list[tuple[Command, Run]] = [(c, self._runner(c.action)) for c in COMMANDS]
        for view in self.view_classes:
            found += [(c, self._runner(c.action, view.NAME, c.show)) for c in view.COMMANDS]
        for view in self.view_classes:
            show = Command(f"view: {view.LABEL.lower()}", f"show_tab('{view.NAME}')")
            found.append((show, self._runner(show.action)))
        return found

    def _runner(self, action: str, view: str | None = None, show: bool = True) -> Run:
        async def run() -> None:
            if view is None:
                await self.app.run_action(action, self)
                return
            if show:
                self.action_show_tab(view)
            if self.shown == view:  # a command on the selected row needs its view shown
                await self.app.run_action(action, self.view(view))

        return run
