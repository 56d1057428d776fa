"""How the console words what points at a cause, on plain records: a failed run's cause, a degraded
tick and the last ticks, a change's row (failing since, an attempt, a held change's checks), who runs
a change, behaviour checks, and a refusal's three versions; and what the model makes of the events
behind them (attempts, checks that ended)."""

from __future__ import annotations

from engine.protocol import Change, EventKind, PendingChange, TickResult
from engine.protocol.events import Event
from engine.protocol.records import (
    Answer,
    Attempt,
    ChangeList,
    EvalRun,
    FailingSince,
    Failure,
    Reach,
    ScenarioComparison,
    SessionInfo,
    SessionReach,
    Suspect,
)
from evolve_console.evals import eval_line, eval_text
from evolve_console.model import ChangeEntry, ConsoleModel, Part
from evolve_console.reach import reach_text
from evolve_console.threeway import ThreeWay
from evolve_console.views.changes import change_row
from evolve_console.views.heartbeat import history_text, tick_lines
from evolve_console.views.runs import cause_text

SHA = "7a46fd1" + "0" * 33
TYPE_ERROR = 'TypeError: can only concatenate str (not "int") to str'
SUSPECT = Suspect(
    SHA,
    "edit hook notes.py",
    "agent",
    1000.0,
    60.0,
    ["hooks/notes.py"],
    "it changed hooks/notes.py, the hook itself",
    "ses_e",
    "Errands",
)
CAUSE = 'since 7a46fd1, agent, 1 min before the first failure, session "Errands"'


def failure(**fields: object) -> Failure:
    found = Failure(
        "fail_1",
        "notes.py",
        "heartbeat",
        error=TYPE_ERROR,
        exit="exit 1",
        where="hooks/notes.py:329",
        runs=3,
        suspect=SUSPECT,
        cause=CAUSE,
        fallback="the stage fell back to the recover defaults",
        message=f"hooks/notes.py started failing at heartbeat: {TYPE_ERROR} ({CAUSE})",
    )
    for key, value in fields.items():
        setattr(found, key, value)
    return found


def test_a_failed_run_says_its_error_the_change_behind_it_and_the_keys() -> None:
    assert cause_text(failure()).splitlines() == [
        f"{TYPE_ERROR} (at hooks/notes.py:329)",
        "the run: exit 1",
        CAUSE,
        "that change: 7a46fd1000 “edit hook notes.py” (it changed hooks/notes.py, the hook itself)",
        "j: show it in view 5 · R: revert it",
        "the stage fell back to the recover defaults",
        "failing: 3 failed runs at heartbeat",
    ]
    none = cause_text(failure(suspect=None, cause="no change explains it: nothing it depends on changed"))
    assert "no change explains it: nothing it depends on changed" in none and "j:" not in none


def test_a_degraded_tick_says_which_hook_failed_and_the_change_behind_it() -> None:
    tick = TickResult(
        "manual",
        1060.0,
        outcome="degraded",
        reason=f"hooks/notes.py failed at heartbeat: {TYPE_ERROR}; the message came from prompts/recover.md",
        prompt="prompts/recover.md",
        failures=[failure()],
        duration_ms=1200.0,
    )
    lines = tick_lines(tick)
    assert lines[0] == "manual tick at 1970-01-01 00:17:40 UTC: degraded"
    assert f"failed: hooks/notes.py at heartbeat: {TYPE_ERROR}" in lines
    assert f"  the change behind it: {CAUSE}" in lines
    assert "  j: show it in view 5 · R: revert it" in lines
    assert "the message came from: prompts/recover.md" in lines
    ok = TickResult("manual", 1100.0, outcome="ok")
    history = history_text([ok, tick]).plain.splitlines()
    assert " ".join(history[0].split()) == "00:18:20 manual ok"
    assert " ".join(history[1].split()).startswith(
        "00:17:40 manual degraded: hooks/notes.py failed at heartbeat:"
    )
    assert history[1].endswith("the message came from prompts/recover.md")


def commit(**fields: object) -> ChangeEntry:
    change = Change(
        SHA,
        1000,
        "edit hook notes.py",
        "edit hook notes.py",
        {},
        ["hooks/notes.py"],
        "agent",
        state="unreviewed",
    )
    for key, value in fields.items():
        setattr(change, key, value)
    return ChangeEntry.commit(change)


def test_a_changes_row_says_it_is_failing_since_an_attempt_and_a_held_changes_checks() -> None:
    failing = commit(failing=[FailingSince("fail_1", "notes.py", "heartbeat", 3, 1060.0, TYPE_ERROR)])
    assert failing.failing_runs == 3
    assert str(change_row(failing)[1][4]) == "failing since: 3 runs"
    assert str(change_row(commit())[1][4]) == "not reviewed"
    attempt = ChangeEntry.attempt(Attempt("att_1", "hooks/notes.py", 1070.0, message="edit hook notes.py"))
    key, cells = change_row(attempt)
    assert key == "att_1" and str(cells[4]) == "rejected by its test" and str(cells[1]) == "agent"
    assert not attempt.revertible and not attempt.is_commit and not attempt.awaits_decision
    held = ChangeEntry.pending(
        PendingChange(
            "chg_1",
            "prompts/chat.md",
            "0" * 64,
            "edit prompt chat.md",
            "evolve_prompt_edit",
            "ses_e",
            "c1",
            None,
            1080.0,
            evals='evals 5/5 → 4/5: "forget a note" fails after',
        )
    )
    assert str(change_row(held)[1][2]) == 'edit prompt chat.md  evals 5/5 → 4/5: "forget a note" fails after'
    stale = ChangeEntry.pending(
        PendingChange("chg_2", "prompts/chat.md", "0" * 64, "m", None, None, None, None, 1.0, status="stale")
    )
    assert stale.stale and not stale.awaits_decision and str(change_row(stale)[1][4]) == "stale"


def test_who_runs_a_change_lists_each_session_and_its_latest_answers() -> None:
    session = SessionInfo("ses_e", title="Errands")
    answers = [
        Answer(f"dsp_{n}", 1100.0 + n, f"answer {n}", ["notes_forget"] if n == 3 else [])
        for n in (3, 2, 1, 0)
    ]
    reach = Reach(
        SHA,
        ["prompts/chat.md"],
        1000.0,
        sessions=[SessionReach(session, "frozen under it", 1010.0, answers, more=2)],
    )
    lines = reach_text(reach).plain.splitlines()
    assert (
        lines[0]
        == "who runs it: 1 session since 1970-01-01 00:16:40 UTC (u: open one, or one of its answers)"
    )
    assert lines[1] == "  Errands (frozen under it; 6 answers since)"
    assert lines[2] == "    00:18:23 answer 3  [tools: notes_forget]"
    assert lines[3:5] == ["    00:18:22 answer 2", "    00:18:21 answer 1"]
    assert lines[5] == "    … 3 more"
    nobody = reach_text(Reach(SHA, since=1000.0, later="b" * 40)).plain
    assert (
        nobody
        == "who runs it: no session since it took effect (1970-01-01 00:16:40 UTC, until bbbbbbbbbb changed the same files)"
    )


def regressed() -> EvalRun:
    forget = ScenarioComparison(
        "forget a note",
        repeat=1,
        passed_before=1,
        passed_after=0,
        status="regressed",
        failed_after=["calls notes_forget: no call of notes_forget"],
        answer_before="Well done: I dropped it.",
        answer_after="Well done! I keep notes permanently.",
        answer_diff=[["=", "Well done"], ["-", ": I dropped it."], ["+", "! I keep notes permanently."]],
        tools_before=['notes_forget {"id": 1}'],
    )
    count = ScenarioComparison("count the notes", repeat=1, passed_before=1, passed_after=1, status="passing")
    return EvalRun(
        "ev_1",
        SHA,
        "commit",
        "edit prompt chat.md",
        state="done",
        finished_at=1200.0,
        summary='evals 2/2 → 1/2: "forget a note" fails after',
        regressed=["forget a note"],
        scenarios=[count, forget],
    )


def test_behaviour_checks_read_per_scenario_with_the_failed_expectation_and_the_answers_marked() -> None:
    assert eval_line(None).plain == "behaviour checks: none yet (b runs the scenarios before and after it)"
    running = EvalRun("ev_1", SHA, "commit", "t", done=3, total=10)
    assert eval_line(running).plain == "behaviour checks: running, 3 of 10 (b shows them)"
    text = eval_text(regressed())
    lines = text.plain.splitlines()
    assert lines[0] == 'behaviour checks of 00:20:00 UTC: evals 2/2 → 1/2: "forget a note" fails after'
    assert lines[1:3] == [
        "  count the notes: before 1/1, after 1/1 passes",
        "  forget a note: before 1/1, after 0/1 REGRESSED",
    ]
    assert lines[3] == "forget a note: REGRESSED"
    assert "  failed after: calls notes_forget: no call of notes_forget" in lines
    assert "  answer before: Well done: I dropped it." in lines
    assert "  answer after:  Well done: I dropped it.! I keep notes permanently." in lines
    styled = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert "strike" in styled[": I dropped it."] and "green" in styled["! I keep notes permanently."]
    failed = EvalRun(
        "ev_2",
        SHA,
        "commit",
        "t",
        state="failed",
        error="opencode 1.18.33 is not installed",
        finished_at=1200.0,
    )
    assert (
        eval_text(failed).plain
        == "behaviour checks of 00:20:00 UTC: failed: opencode 1.18.33 is not installed"
    )


def test_the_model_lists_attempts_and_follows_a_held_changes_checks() -> None:
    model = ConsoleModel()
    model.set_connection(True, "")
    held = PendingChange(
        "chg_1", "prompts/chat.md", "0" * 64, "edit prompt chat.md", None, None, None, None, 1080.0
    )
    attempt = Attempt("att_1", "hooks/notes.py", 1070.0, message="edit hook notes.py")
    change = Change(SHA, 1000, "edit hook notes.py", "edit hook notes.py", {}, ["hooks/notes.py"], "agent")
    listing = ChangeList(changes=[change], pending=[held], attempts=[attempt])
    model.apply_reload(Part.CHANGES, listing)
    assert list(model.changes) == [SHA, "att_1", "chg_1"], "commits, then what was never installed, by time"
    late = Attempt("att_2", "hooks/notes.py", 1090.0, message="edit hook notes.py")
    update = model.apply_events([Event(str(EventKind.ATTEMPT), late.to_dict(), 1, 0.0)])
    assert list(model.changes)[-1] == "att_2" and model.attempts_unseen == 1
    assert [a.change for a in update.alerts] == ["att_2"]
    model.looked_at_changes()
    assert model.attempts_unseen == 0
    ended = regressed()
    ended.target = "chg_1"
    update = model.apply_events([Event(str(EventKind.EVAL), ended.brief().to_dict(), 2, 0.0)])
    assert model.changes["chg_1"].evals == ended.summary and Part.CHANGES in update.redraw
    assert [e.id for e in update.evals] == ["ev_1"]


def test_a_refusal_with_the_three_versions_reads_as_one() -> None:
    details = {
        "error": "Not approved: …",
        "stale": True,
        "file": "prompts/chat.md",
        "changed_by": SHA,
        "base": "a\n",
        "current": "b\n",
        "proposed": "c\n",
        "proposed_diff": "-a\n+c\n",
        "changed_diff": "-a\n+b\n",
    }
    three = ThreeWay.of("Not approved: …", details)
    assert three == ThreeWay(
        "Not approved: …", "prompts/chat.md", SHA, "a\n", "b\n", "c\n", "-a\n+c\n", "-a\n+b\n"
    )
    assert ThreeWay.of("conflict", {"later": []}) is None, "another refusal is not this one"
