"""How the console tells the operator: alerts as toasts (or, for a long error, the alerts dialog),
the bell, and the words of a worker's failure.

An alert is kept with the agent it is about (`Agent.alerts`), to be read again (`N`), and the keys
of the agent's main screen act on the change it names while its toast is shown; in a console of
several agents its text names its agent. A toast that waited for a decision goes when the decision
is made (`Notifier.update`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.worker import Worker

from .agent import Agent
from .agentscreens import AgentScreens
from .alerts import Alert, Severity, failure_alert, notice_alert
from .alertscreen import AlertScreen
from .client import EngineGone
from .failures import failure_text
from .mainscreen import clear_toasts
from .messages import COMMAND_GROUP, Toast
from .parts import Update


class Notifier:
    """Tells the operator, through `app` (its toasts, dialogs and bell), about the agents of
    `screens`; `bell`: whether what needs the operator rings the terminal's bell."""

    def __init__(self, app: App[Any], screens: AgentScreens, clock: Callable[[], float], bell: bool) -> None:
        self.app = app
        self.screens = screens
        self.clock = clock
        self.bell = bell
        self._alerted: int | None = None  # the number of the alert the keys acted on at the last tick

    def toast(self, message: str, severity: Severity = "information", timeout: float = 8.0) -> None:
        """Tell the operator `message`, about the agent shown (`alert`)."""
        self.alert(Alert(message, severity, timeout=timeout))

    def alert(self, alert: Alert, agent: Agent | None = None, *, named: bool = False) -> None:
        """Tell the operator: a toast (at most a minute, unless it waits for a decision; a long one
        shows its beginning), or, for a long error, a dialog that shows it whole. It is kept with
        the agent it is about (the one shown by default; `named`: its text names the agent
        already), to be read again (`N`), and the keys act on the change it names while its toast
        is shown. In a console of several agents it names its agent."""
        agent = agent or self.screens.shown
        if self.screens.several and not named:
            alert = dataclasses.replace(alert, text=f"{agent.name}: {alert.text}")
        kept = agent.alerts.add(alert, self.clock())
        if kept.severity == "error" and kept.long:
            self.app.push_screen(AlertScreen([kept]))
        else:
            self._notify(kept)
        if kept.bell and self.bell:
            self.app.bell()
        self._alerted = None  # the keys follow at the next tick, or now
        if (main := self.screens.mounted(self.screens.current)) is not None:
            main.refresh_bindings()

    def _notify(self, alert: Alert, timeout: float | None = None) -> None:
        self.app.notify(
            alert.toast_text(),
            title=alert.toast_title(),
            severity=alert.severity,
            timeout=alert.lasts if timeout is None else timeout,
            markup=False,
        )

    def show_toasts(self) -> None:
        """The toasts of the alerts still on screen, anew (one of them went before its time)."""
        clear_toasts(self.app)
        now = self.clock()
        for alert in self.screens.current.alerts.on_screen(now):
            if not (alert.severity == "error" and alert.long):
                self._notify(alert, timeout=max(alert.lasts - (now - alert.at), 1.0))
        if (main := self.screens.mounted(self.screens.current)) is not None:
            main.refresh_bindings()

    def update(self, update: Update, agent: Agent) -> None:
        """The alerts a batch of the agent's events raised; the toasts that waited for a decision
        made in it go."""
        for severity, notice in update.notices:
            self.alert(notice_alert(severity, notice, agent.model.changes), agent)
        for alert in update.alerts:
            self.alert(alert, agent)
        now = self.clock()
        if any([agent.alerts.decided(key, now) for key in update.decided]) and agent is self.screens.current:
            self.show_toasts()  # the toast that waited for that decision goes

    def failing(self, agent: Agent) -> None:
        """The hooks failing as the console starts: what is broken, and the change behind it (the
        engine lists the newest first: the newest alert is the latest failure)."""
        for failure in reversed(list(agent.model.failures.values())):
            self.alert(failure_alert(failure, since=True), agent)

    def toast_of(self, message: Toast) -> None:
        """A view's `Toast`, about its agent."""
        whose = f"{message.agent}: " if self.screens.several and message.agent else ""
        alert = Alert(
            whose + message.text,
            message.severity,
            timeout=message.timeout,
            change=message.change,
            revert=message.revert,
        )
        self.alert(alert, self.screens.named(message.agent), named=True)

    def keys_follow(self, now: float) -> None:
        """Once a second: when the toast of the alert the keys acted on went, the keys follow."""
        main = self.screens.mounted(self.screens.current)
        if main is not None:
            current = self.screens.current.alerts.current(now)
            number = current.number if current is not None else None
            if number != self._alerted:
                self._alerted = number
                main.refresh_bindings()

    def failure(self, worker: Worker[object], agent: str | None = None) -> bool:
        """A worker failed (the app's own, or a view's, a widget's, a screen's: `Failed`): the
        operator is told what it was doing and why it failed, in words (naming the agent, in a
        console of several). True when the engine may be gone: its health check says."""
        error = worker.error
        # Workers are named for what they do ("approve the change"); those of the "actions" group
        # send commands, which may have been done although their answer was lost.
        said = failure_text(worker.name or "do that", error, command=worker.group == COMMAND_GROUP)
        if self.screens.several and agent:
            said = f"{agent}: {said}"
        if isinstance(error, EngineGone):
            # One request lost (a connection closed as it was reused, a slow answer) does not mean
            # the engine is gone, and saying so would stop the reloads while the stream goes on:
            # only the health check says the engine is down.
            self.alert(Alert(said, "warning", timeout=8), self.screens.named(agent), named=True)
            return True
        self.toast(said, "error")
        return False
