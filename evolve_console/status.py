"""What the console says of the state of things in a line: the connection bar at the top, the runs'
count line, the view bar's badges, and the engine's configuration problems in full.

Pure functions of the model and plain values (the time, when the engine stopped or last answered,
the runs table's state): no widget, so each is tested on plain data."""

from __future__ import annotations

from typing import NamedTuple

from rich.text import Text

from engine.protocol import EngineStatus

from .format import ago, clock_time, short
from .model import ConsoleModel


class Pieces(NamedTuple):
    """The top bar's pieces: `pieces`, which it wraps between, never cutting one, and the engine's
    `address` (None while it does not answer), last, which it cuts at the line's end rather than
    give it a line of its own."""

    pieces: list[Text]
    address: Text | None


def connection_items(
    model: ConsoleModel,
    workspace: str | None,
    now: float,
    down_since: float | None,
    heard_at: float | None,
) -> Pieces:
    """The top bar, as the pieces it wraps between (never within one, so that `(c: read)` is never
    cut): the engine, the workspace, opencode, the engine's problems (a journal that cannot write,
    configuration errors), and last its address. While
    the engine does not answer, what only it knew is shown as last known, dimmed, with its time.

    `workspace`: the workspace the console was started for (None: only an address), which tells how
    to start the engine; `down_since`: when the engine stopped answering; `heard_at`: when it last
    answered."""
    items: list[Text] = []
    if model.connected:
        items.append(Text(" engine ● connected ", style="bold reverse green"))
    else:
        down = f" for {ago(now - down_since)}" if down_since else ""
        items.append(Text(f" engine ○ down{down} ", style="bold reverse red"))
    shown = (model.status.workspace if model.status else None) or workspace
    if shown:
        items.append(Text(f" {shown} ", style="bold"))
    if not model.connected:
        if workspace:
            items.append(Text(f" start it: evolve serve --workspace {workspace} (or E) ", style="yellow"))
        else:
            items.append(Text(f" {short(model.detail, 80)} ", style="yellow"))
    opencode = model.status.opencode if model.status else []
    if opencode:
        modes = ", ".join(sorted({str(c.mode) for c in opencode}))
        style = "bold reverse green" if model.connected else "dim reverse"
        item = Text(f" opencode ● {len(opencode)} connected ({modes}) ", style=style)
    else:
        style = "bold reverse yellow" if model.connected else "dim reverse"
        item = Text(" opencode ○ not connected ", style=style)
    if not model.connected and model.status is not None and heard_at:
        item.append(f" (as of {clock_time(heard_at)} UTC)", style="dim")
    items.append(item)
    failing = model.status.journal_failing if model.status else None
    if failing and model.connected:
        items.append(
            Text(f"  journal failing: {short(failing, 60)}; the engine refuses new work", style="bold red")
        )
    errors = model.status.config_errors if model.status else []
    if errors:
        items.append(
            Text(
                f"  config: {len(errors)} error{'s' if len(errors) > 1 else ''}, last good config in use (c: read)",
                style="bold red",
            )
        )
    return Pieces(items, Text(f"  {model.detail}", style="dim") if model.connected else None)


def runs_line(model: ConsoleModel, shown: int, following: bool, unseen: int) -> str:
    """The line under the runs: the journal's counts, the runs received live, the rows shown
    (`shown`), and while the table does not follow (the operator moved its cursor), first (a line
    cut at the terminal's width never cuts it), that it does not, the new ones below (`unseen`) and
    the key that follows again."""
    counts, live = model.counts, model.events_seen["hook_run"]
    runs = counts.get("runs", 0)
    text = (
        f"{runs:,} {'run' if runs == 1 else 'runs'} in the journal · {counts.get('failed_runs', 0):,} failed · "
        f"{live:,} received live · showing {shown:,}"
    )
    if not following:
        new = f" · +{unseen:,} new" if unseen else ""
        text = f"following paused{new} (g to follow) · {text}"
    return text


def badges(model: ConsoleModel) -> dict[str, str]:
    """What waits for the operator, by view: failed runs not yet seen, changes held (that can still be
    decided) or unreviewed, attempts their test rejected not yet seen."""
    found = {}
    if model.failed_unseen:
        found["runs"] = f"{model.failed_unseen} failed"
    attempts = "new attempt" if model.attempts_unseen == 1 else "new attempts"
    waiting = [
        f"{n} {what}"
        for n, what in (
            (model.pending_count, "pending"),
            (model.unreviewed_count, "unreviewed"),
            (model.attempts_unseen, attempts),  # the agent's edits their test rejected, not yet seen
        )
        if n
    ]
    if waiting:
        found["changes"] = " · ".join(waiting)
    return found


def has_problems(status: EngineStatus | None) -> bool:
    """Whether the engine reports configuration errors or warnings (`c` shows them)."""
    return bool(status and (status.config_errors or status.config_warnings))


def problems_text(status: EngineStatus) -> str:
    """The engine's configuration errors and warnings in full, one paragraph each."""
    lines = [f"error: {e}" for e in status.config_errors] + [f"warning: {w}" for w in status.config_warnings]
    return "\n\n".join(lines) or "(none)"
