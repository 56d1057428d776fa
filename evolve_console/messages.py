"""What a view tells the screen and the app, as messages: it never reaches into them.

A view owns its table, its detail and its keys; what it cannot do on its own (show another view,
fetch a part of the model anew, tell the operator something) it asks for with one of these, and
they bubble up to the main screen (`Go`, `OpenSession`) or the app (`Reload`, `Toast`). The app's
stream workers report each engine's connection with `ConnectionChanged`.

With several agents, what a view asks concerns its own agent: its main screen writes the agent's
name into `Reload`, `Toast` and `Failed` as they pass (`agent`); None means the agent shown. Going
to another agent, or to the fleet view, is `SwitchAgent`.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker, WorkerState

from .alerts import Severity
from .model import Part

# The worker group of the operator's commands (approve, revert, fire, ...): a command whose answer
# was lost may have been done, and the operator is told so (`failures.failure_text`). Workers are
# named for what they do, as the operator is told it: "could not <name>: <why>".
COMMAND_GROUP = "actions"


class Go(Message):
    """Show the view `view` with its row `key` selected; escape comes back to where this came from.
    `back`: what escape does once that view is shown again, when this came from a screen over it
    (the turn that made a change is opened again, as it was)."""

    def __init__(self, view: str, key: str | None, back: Callable[[], object] | None = None) -> None:
        super().__init__()
        self.view = view
        self.key = key
        self.back = back


class OpenSession(Message):
    """Show the session `session` in the sessions view (None: the row has none, the operator is told)."""

    def __init__(self, session: str | None) -> None:
        super().__init__()
        self.session = session


class Reload(Message):
    """Fetch `part` from the engine anew and draw it (a filter changed, a decision was made)."""

    def __init__(self, part: Part) -> None:
        super().__init__()
        self.part = part
        self.agent: str | None = None  # whose engine (set by its main screen); None: the agent shown


class Toast(Message):
    """Tell the operator `text` (a toast, at most a minute; a long error opens in a dialog).
    `change`: the change it names, which a key then selects in view 5; `revert`: the commit a key
    then reverts (asking first)."""

    def __init__(
        self,
        text: str,
        severity: Severity = "information",
        timeout: float = 8.0,
        *,
        change: str | None = None,
        revert: str | None = None,
    ) -> None:
        super().__init__()
        self.text = text
        self.severity = severity
        self.timeout = timeout
        self.change = change
        self.revert = revert
        self.agent: str | None = None  # which agent it is about (set by its main screen)


class ConnectionChanged(Message):
    """The connection to an agent's engine changed (latest wins, per agent)."""

    def __init__(self, connected: bool, detail: str, agent: str = "") -> None:
        super().__init__()
        self.connected = connected
        self.detail = detail
        self.agent = agent

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ConnectionChanged) and message.agent == self.agent


class SwitchAgent(Message):
    """Show the agent `agent` in the six views (None: the fleet view, every agent in a row)."""

    def __init__(self, agent: str | None) -> None:
        super().__init__()
        self.agent = agent


class Failed(Message):
    """A worker of a view, a widget or a screen failed (a refused command, a request without an
    answer). Textual tells only the worker's own node of its end, and does not pass that on: the
    node passes it up with this, so that the app words every failure in one place."""

    def __init__(self, worker: Worker[object]) -> None:
        super().__init__()
        self.worker = worker
        self.agent: str | None = None  # whose worker (set by its main screen)


def pass_failure_up(node: MessagePump, event: Worker.StateChanged) -> None:
    """For a node's `on_worker_state_changed`: a failed worker goes to the app as `Failed`."""
    if event.state is WorkerState.ERROR:
        node.post_message(Failed(event.worker))
