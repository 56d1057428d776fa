"""The columns of the line-drawn tables: how wide each kind of column wants to be (`WIDTHS`), and
how a table shares its width among its columns (`fit`), a pure function of plain values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Width:
    """How wide a column wants to be, how narrow it may get (0: it may go out of sight, when even the
    others' minimums do not fit; the detail pane shows it), and its share of room to spare."""

    preferred: int
    minimum: int
    grow: int = 0


# Column widths by column key (the same key means the same kind of content in every table). A table
# gives each column its preferred width when its view is wide enough, shares what is left among the
# columns that grow, and, in a narrow view, narrows the columns that can be cut (down to their
# minimum) before any column goes out of sight.
WIDTHS = {
    "time": Width(8, 8),
    "stage": Width(17, 10),
    "hook": Width(14, 8),
    "session": Width(18, 10, grow=1),
    "duration": Width(8, 6),
    "status": Width(6, 6),
    "hooks": Width(5, 5),
    "failed": Width(10, 6),
    "recover": Width(9, 9),
    "title": Width(16, 10, grow=1),
    "agent": Width(8, 6),
    "model": Width(16, 8),
    "prompt": Width(11, 8),  # "123,456 ch", "not frozen"
    "notes": Width(5, 5),  # a count
    "state": Width(5, 5),
    "tokens": Width(7, 6),
    "origin": Width(12, 6),  # "agent (held)"
    "change": Width(
        23, 9, grow=2
    ),  # free text: it gives way first, so that the files read whole at 160 columns
    "files": Width(20, 0, grow=1),  # "config/evolve.jsonc", "prompts/heartbeat.md"
    "review": Width(21, 9),  # "failing since: 3 runs", "rejected by its test", "reverted by 1a2b3c4"
    "tool": Width(18, 10, grow=1),
    "result": Width(9, 7),
    "commit": Width(10, 7),
    # The fleet view's (fleetrows.COLUMNS).
    "fleet.agent": Width(14, 6),
    "fleet.engine": Width(14, 8, grow=1),  # "● up", "○ down 12 s: why"
    "fleet.opencode": Width(9, 6),
    "fleet.busy": Width(5, 4),
    "fleet.activity": Width(13, 8),
    "fleet.failed": Width(7, 5),
    "fleet.changes": Width(22, 8, grow=1),  # "2 pending · 1 unreviewed (+1 new)"
    "fleet.heartbeat": Width(18, 8),  # "waits for opencode"
    "fleet.latest": Width(30, 0, grow=2),
}

SHOWN_AT_LEAST = 4  # a column that may go out of sight is shown at least this wide, or not at all


def fit(widths: list[Width], available: int) -> list[int]:
    """Column widths for a view `available` cells wide (a blank before each column and at the end);
    0 for a column out of sight."""
    floor = sum(w.minimum or SHOWN_AT_LEAST for w in widths) + len(widths) + 1
    if floor > available and any(w.minimum == 0 for w in widths):
        # Even the minimums do not fit: the columns that may go, go (their blank with them).
        kept = [w for w in widths if w.minimum > 0]
        fitted = iter(fit(kept, available))
        return [next(fitted) if w.minimum > 0 else 0 for w in widths]
    shown = [w.preferred for w in widths]
    spare = available - sum(shown) - len(shown) - 1
    if spare > 0:
        growing = sum(w.grow for w in widths)
        if growing:
            given = 0
            for i, w in enumerate(widths):
                share = spare * w.grow // growing
                shown[i] += share
                given += share
            last = max(i for i, w in enumerate(widths) if w.grow)
            shown[last] += spare - given  # the remainder of the integer shares
    elif spare < 0:
        # The columns of free text (those that grow: a change's subject, a session's title) give
        # way first, so that short fixed words (an origin, a review state) stay whole; then all.
        missing = -spare
        for group in ([i for i, w in enumerate(widths) if w.grow], list(range(len(widths)))):
            if missing > 0:
                missing -= _narrow(shown, widths, group, missing)
    return shown


def _narrow(shown: list[int], widths: list[Width], group: list[int], missing: int) -> int:
    """Narrow the columns `group` of `shown` towards their minimum, each by its share of their room
    to give, by up to `missing` cells in all; the cells taken."""
    slack = {i: shown[i] - (widths[i].minimum or SHOWN_AT_LEAST) for i in group}
    room = sum(slack.values())
    if room <= 0:
        return 0
    taken = 0
    for i in group:
        cut = min(slack[i], -(-missing * slack[i] // room))  # rounded up: never short
        shown[i] -= cut
        taken += cut
    # What rounding up took too much goes back to the columns that grow.
    extra = taken - missing
    for i in group:
        if extra <= 0:
            break
        if widths[i].grow and shown[i] < widths[i].preferred:
            back = min(extra, widths[i].preferred - shown[i])
            shown[i] += back
            extra -= back
            taken -= back
    return taken
