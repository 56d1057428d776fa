"""The fleet view's rows and totals on plain data: an engine up, slow and down, what waits since the
operator last looked, and the totals adding every row up."""

from __future__ import annotations

from evolve_console.entries import ChangeEntry
from evolve_console.fleetrows import Counts, Facts, counts, elsewhere, engine_state, row, totals
from evolve_console.model import ConsoleModel

NOW = 1_700_000_000.0


def change(key: str, state: str, *, held: bool = False, at: float = NOW - 60) -> ChangeEntry:
    return ChangeEntry(
        key=key,
        subject=f"edit {key}",
        origin="pending" if held else "agent",
        time=at,
        files=[],
        trailers={},
        pending_id=key if held else None,
        state=state,
    )


def model(connected: bool = True, **changes: ChangeEntry) -> ConsoleModel:
    found = ConsoleModel()
    found.set_connection(connected, "http://127.0.0.1:1 · pid 7" if connected else "nothing listens there")
    found.changes = dict(changes)
    return found


def facts(
    name: str,
    m: ConsoleModel,
    *,
    down: float | None = None,
    slow: float | None = None,
    failed: int = 0,
    new: int = 0,
) -> Facts:
    return Facts(name, m, down, slow, failed, new)


def test_an_engine_is_up_slow_after_a_second_without_an_answer_and_down_when_refused() -> None:
    assert engine_state(facts("a", model()), NOW) == "up"
    assert engine_state(facts("a", model(), slow=NOW - 0.5), NOW) == "up"
    assert engine_state(facts("a", model(), slow=NOW - 2), NOW) == "slow"
    assert engine_state(facts("a", model(False), down=NOW - 5), NOW) == "down"
    cells = row(facts("a", model(False), down=NOW - 5), NOW)
    assert str(cells[1]) == "○ down 5 s: nothing listens there"
    assert str(row(facts("a", model(), slow=NOW - 2), NOW)[1]) == "◌ no answer 2 s"
    assert str(row(facts("a", model(False)), NOW)[1]) == "… connecting"


def test_a_row_says_what_waits_and_what_came_since_the_operator_looked() -> None:
    m = model(
        p=change("p", "pending", held=True),
        u=change("u", "unreviewed", at=NOW - 30),
        o=change("o", "approved", at=NOW - 90),
    )
    cells = row(facts("notes", m, failed=3, new=1), NOW)
    assert str(cells[0]) == "notes"
    assert str(cells[5]) == "3"
    assert str(cells[6]) == "1 pending · 1 unreviewed (+1 new)"
    assert str(cells[8]) == "30 s ago · edit u"


def test_the_totals_add_every_row_up() -> None:
    rows = [
        counts(facts("a", model(p=change("p", "pending", held=True)), failed=2), NOW),
        counts(facts("b", model(u=change("u", "unreviewed")), slow=NOW - 3, failed=1), NOW),
        counts(facts("c", model(False), down=NOW - 1), NOW),
    ]
    assert sum(rows, Counts()) == Counts(up=1, down=1, slow=1, failed=3, pending=1, unreviewed=1)
    said = str(totals(rows))
    assert said.startswith(" 3 agents: 1 up · 1 not answering · 1 down · 0 opencode · 0 busy · 3 failed runs")
    assert "1 pending · 1 unreviewed" in said


def test_the_badge_beside_the_fleet_entry_names_the_other_agents_that_wait() -> None:
    others = [
        facts("b", model(), failed=2),
        facts("c", model(p=change("p", "pending", held=True))),
        facts("d", model()),
        facts("e", model(False), down=NOW - 1),
    ]
    assert elsewhere(others) == "b 2 failed · c 1 pending · e 1 down"
    assert (
        elsewhere([facts(n, model(), failed=1) for n in "vwxyz"])
        == "v 1 failed · w 1 failed · x 1 failed · +2 more"
    )
