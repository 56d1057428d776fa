"""What the fleet view says of each agent, in a row, and of all of them, in a line: pure functions of
an agent's model and plain values (the time, when its engine last answered or stopped answering),
so that each is tested on plain data.

A row: the agent's name, its engine (up, slow, down and why), its opencode, its busy sessions, its
last activity, its failed runs and the changes waiting since the operator last looked at it, its
heartbeat and next tick, its latest change. The totals line adds the same counts up across agents.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text

from .format import ago, short
from .model import ConsoleModel

SLOW_S = 1.0  # a check without an answer for this long: the engine shows as slow
COLUMNS = (
    ("fleet.agent", "agent"),
    ("fleet.engine", "engine"),
    ("fleet.opencode", "opencode"),
    ("fleet.busy", "busy"),
    ("fleet.activity", "last activity"),
    ("fleet.failed", "failed"),
    ("fleet.changes", "changes"),
    ("fleet.heartbeat", "heartbeat"),
    ("fleet.latest", "latest change"),
)


@dataclass(frozen=True)
class Facts:
    """What a row is made of, read off one agent: its model and how its engine answers."""

    name: str
    model: ConsoleModel
    down_since: float | None
    slow_since: float | None
    failed_since_looked: int
    changes_since_looked: int


@dataclass(frozen=True)
class Counts:
    """The numbers of one row, which the totals line adds up."""

    up: int = 0
    down: int = 0
    slow: int = 0
    opencode: int = 0
    busy: int = 0
    failed: int = 0
    pending: int = 0
    unreviewed: int = 0
    new_changes: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple[int, ...]:
        return (
            self.up,
            self.down,
            self.slow,
            self.opencode,
            self.busy,
            self.failed,
            self.pending,
            self.unreviewed,
            self.new_changes,
        )


def engine_state(facts: Facts, now: float) -> str:
    """up, slow or down."""
    if not facts.model.connected:
        return "down"
    if facts.slow_since is not None and now - facts.slow_since >= SLOW_S:
        return "slow"
    return "up"


def counts(facts: Facts, now: float) -> Counts:
    model = facts.model
    state = engine_state(facts, now)
    return Counts(
        up=int(state == "up"),
        down=int(state == "down"),
        slow=int(state == "slow"),
        opencode=len(model.status.opencode) if model.status else 0,
        busy=sum(1 for s in model.sessions.values() if s.busy),
        failed=facts.failed_since_looked,
        pending=model.pending_count,
        unreviewed=model.unreviewed_count,
        new_changes=facts.changes_since_looked,
    )


def row(facts: Facts, now: float) -> list[Text | str]:
    """The cells of the agent's row, in the order of COLUMNS."""
    model, numbers = facts.model, counts(facts, now)
    state = engine_state(facts, now)
    if state == "up":
        engine = Text("● up", style="bold green")
    elif state == "slow":
        assert facts.slow_since is not None
        engine = Text(f"◌ no answer {ago(now - facts.slow_since)}", style="bold yellow")
    elif facts.down_since is None:
        engine = Text("… connecting", style="dim")  # not answered yet, nor refused
    else:
        engine = Text(f"○ down {ago(now - facts.down_since)}: {short(model.detail, 200)}", style="bold red")
    known = model.status is not None
    if not known:
        opencode = Text("-", style="dim")
    elif numbers.opencode:
        opencode = Text(f"● {numbers.opencode}", style="green" if state == "up" else "dim")
    else:
        opencode = Text("○ none", style="yellow" if state == "up" else "dim")
    activity = ago(now - model.last_activity) + " ago" if model.last_activity else "-"
    failed = Text(str(numbers.failed), style="bold red") if numbers.failed else Text("0", style="dim")
    return [
        Text(facts.name, style="bold"),
        engine,
        opencode,
        str(numbers.busy) if known or numbers.busy else "-",
        activity,
        failed,
        changes_cell(numbers),
        heartbeat_cell(model, now),
        latest_change(model, now),
    ]


def changes_cell(numbers: Counts) -> Text:
    """ "2 pending · 1 unreviewed (+1 new)": what waits for the operator, and what came since they looked."""
    parts = [
        f"{n} {what}" for n, what in ((numbers.pending, "pending"), (numbers.unreviewed, "unreviewed")) if n
    ]
    if not parts:
        return Text("-", style="dim")
    text = Text(" · ".join(parts), style="bold yellow" if numbers.pending else "yellow")
    if numbers.new_changes:
        text.append(f" (+{numbers.new_changes} new)", style="bold")
    return text


def heartbeat_cell(model: ConsoleModel, now: float) -> str:
    beat = model.heartbeat
    if beat is None:
        return "-"
    if not beat.enabled:
        return "off"
    if beat.running:
        return "ticking now"
    if beat.paused:
        return "paused"
    if not beat.connected:
        return "waits for opencode"
    if beat.next_at:
        return f"next in {ago(beat.next_at - now)}" if beat.next_at > now else "next: due"
    return "on"


def latest_change(model: ConsoleModel, now: float) -> str:
    """The newest change: its subject and how long ago."""
    newest = max(model.changes.values(), key=lambda c: c.time or 0.0, default=None)
    if newest is None:
        return "-"
    when = f"{ago(now - newest.time)} ago · " if newest.time else ""
    return when + newest.subject


def totals(all_counts: Iterable[Counts]) -> Text:
    """The line under the table: every agent's counts added up."""
    listed = list(all_counts)
    total = sum(listed, Counts())
    text = Text(f" {len(listed)} agent{'s' if len(listed) != 1 else ''}: ", style="bold")
    text.append(f"{total.up} up", style="green" if total.up else "dim")
    if total.slow:
        text.append(f" · {total.slow} not answering", style="bold yellow")
    if total.down:
        text.append(f" · {total.down} down", style="bold red")
    text.append(f" · {total.opencode} opencode · {total.busy} busy")
    text.append(f" · {total.failed} failed runs", style="bold red" if total.failed else "")
    text.append(f" · {total.pending} pending", style="bold yellow" if total.pending else "")
    text.append(f" · {total.unreviewed} unreviewed", style="yellow" if total.unreviewed else "")
    text.append("  (failed runs and new changes: since you last looked at each agent)", style="dim")
    return text


def elsewhere(others: Iterable[Facts]) -> str:
    """What waits for the operator at the other agents, by name ("b 2 failed · c 1 pending"): the
    badge beside the fleet view's entry in an agent's view bar."""
    said = []
    for facts in others:
        model = facts.model
        parts = [
            f"{n} {what}"
            for n, what in (
                (facts.failed_since_looked, "failed"),
                (model.pending_count, "pending"),
                (int(not model.connected and facts.down_since is not None), "down"),
            )
            if n
        ]
        if parts:
            said.append(f"{facts.name} {', '.join(parts)}")
    return " · ".join(said[:3]) + (f" · +{len(said) - 3} more" if len(said) > 3 else "")
