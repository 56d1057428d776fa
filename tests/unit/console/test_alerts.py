"""The console's alerts on plain data: how long a toast stays, what it says and which keys it names,
which change a notice names, and which alert the keys act on (the newest on screen naming one)."""

from __future__ import annotations

from evolve_console.alerts import HELD_S, LONG, TOAST_MAX_S, Alert, Alerts, named_change

SHA = "7a46fd1" + "0" * 33


def test_a_toast_stays_at_most_a_minute_unless_it_waits_for_a_decision() -> None:
    assert Alert("x", timeout=3600).lasts == TOAST_MAX_S == 60.0
    assert Alert("x", timeout=8).lasts == 8
    assert Alert("x", timeout=8, decision="chg_1").lasts == HELD_S > TOAST_MAX_S


def test_a_toast_names_its_keys_and_a_long_one_points_to_the_whole() -> None:
    alert = Alert("hooks/a.py started failing", title="a hook started failing", change=SHA, revert=SHA)
    assert alert.toast_title() == "a hook started failing · j: show 7a46fd1 · R: revert it"
    assert alert.toast_text() == "hooks/a.py started failing"
    held = Alert("a change awaits your review", change="chg_1a2b", decision="chg_1a2b")
    assert held.toast_title() == "j: show chg_1a2b"
    long = Alert("word " * 100)
    assert long.long and len(long.toast_text()) <= LONG + len(" (N: read it whole)")
    assert long.toast_text().endswith("… (N: read it whole)")
    assert not Alert("short").long and Alert("short").toast_title() == ""


def test_a_notice_names_a_change_by_its_id_or_the_start_of_its_sha() -> None:
    keys = [SHA, "7b00000" + "1" * 33, "chg_1a2b3c"]
    assert named_change("pending change chg_1a2b3c “edit”: evals 5/5 → 4/5", keys) == "chg_1a2b3c"
    assert named_change("reverting 7a46fd1 conflicts with later changes", keys) == SHA
    assert named_change("pending change chg_999 was decided", keys) is None, "not one the console shows"
    assert named_change("nothing here: 7a4 is too short, 12345 too", keys) is None
    assert named_change("7a46fd1 or 7b00000?", keys) == SHA, "the first one it names"


def test_the_keys_act_on_the_newest_alert_on_screen_that_names_a_change() -> None:
    alerts = Alerts()
    failing = alerts.add(Alert("failing", timeout=30, change=SHA, revert=SHA), now=100.0)
    alerts.add(Alert("fired", timeout=8), now=101.0)
    assert alerts.current(102.0) == failing, "the newest naming a change"
    held = alerts.add(Alert("held", change="chg_1", decision="chg_1"), now=103.0)
    assert alerts.current(104.0) == held
    assert [a.number for a in alerts.recent] == [1, 2, 3]
    assert alerts.decided("chg_1", 104.0), "its toast was waiting for it"
    assert alerts.current(104.0) == failing
    assert alerts.current(131.0) is None, "its toast went after 30 s"
    assert alerts.on_screen(131.0) == []
    again = alerts.add(Alert("again", change=SHA), now=200.0)
    assert alerts.current(200.0) == again
    alerts.close()
    assert alerts.on_screen(200.0) == [] and alerts.current(200.0) is None, "closed with a key"
    assert [a.text for a in alerts.newest_first()] == ["again", "held", "fired", "failing"], "kept to read"
    assert not alerts.decided("chg_1", 201.0), "no toast waits for it any more"
