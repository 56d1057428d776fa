"""The console's model on plain data: no engine process, no Textual.

Events are fed as the event stream delivers them (numbered, replayed after a reconnect, with numbers
skipped, from an engine restarted under the console) and answers of the API as the engine gives them;
the assertions are on the state the console would draw. Payloads have the shapes of
`engine.protocol.events.PAYLOADS`.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.protocol import (
    BRIEF_RUN_FIELDS,
    Change,
    ConnectionInfo,
    EngineStatus,
    Event,
    EventKind,
    HeartbeatStatus,
    HookRun,
    PendingChange,
    StageResult,
    TickResult,
    calls,
)
from engine.protocol.records import (
    ChangeList,
    Failure,
    Health,
    HeartbeatChanged,
    JSONDict,
    OpencodeChanged,
    ReviewRecorded,
    RunList,
    SessionChanged,
    SessionInfo,
    SessionList,
    Suspect,
    ToolCallList,
)
from evolve_console.model import HISTORY_LIMIT, MAX_ROWS, ConsoleModel, Part, RunFilter

REPO = Path(__file__).resolve().parents[3]


# ---- building events and answers ---------------------------------------------------------------------


def listed_run(n: int) -> HookRun:
    """A hook run as the runs listing sends it: whole."""
    return HookRun(
        id=f"run_{n:05d}",
        stage="idle",
        hook="notes.py",
        started_at=1000.0 + n,
        input={"session": {"id": "s"}},
        duration_ms=4.0,
        stdout_lines=['{"system": []}'],
    )


def run_data(n: int, **fields: Any) -> JSONDict:
    """A hook run as `?brief=1` sends it."""
    data = {k: v for k, v in listed_run(n).to_dict().items() if k in BRIEF_RUN_FIELDS}
    return {**data, **fields}


def event(seq: int, kind: EventKind | str, data: JSONDict) -> Event:
    return Event(str(kind), data, seq, at=2000.0 + seq)


def hook_run(seq: int, n: int | None = None, **fields: Any) -> Event:
    return event(seq, EventKind.HOOK_RUN, run_data(seq if n is None else n, **fields))


def heartbeat_status(**fields: Any) -> HeartbeatStatus:
    status = HeartbeatStatus(
        enabled=True,
        interval_ms=900_000,
        connected=True,
        paused=False,
        running=False,
        next_at=5000.0,
        next_in_s=60.0,
        count=0,
        count_threshold=10,
        tokens=None,
        tokens_threshold=None,
        cleanup="compact",
        session=None,
        time=None,
        model=None,
    )
    return replace(status, **fields)


def engine_status(**fields: Any) -> EngineStatus:
    status = EngineStatus(
        workspace="/ws",
        pid=10,
        config={},
        config_errors=[],
        config_warnings=[],
        hooks=[],
        skipped=[],
        opencode=[],
        sessions=0,
        journal=None,
        model=None,
        busy=False,
        heartbeat=heartbeat_status(),
    )
    return replace(status, **fields)


def connection(conn_id: str, mode: str = "server") -> ConnectionInfo:
    return ConnectionInfo(id=conn_id, url="http://127.0.0.1:4096", directory="/p", mode=mode)


def pending(pending_id: str, status: str = "pending") -> PendingChange:
    change = PendingChange(
        id=pending_id,
        file="prompts/chat.md",
        base_sha256="0" * 64,
        message="edit prompt chat.md",
        tool="evolve_prompt_edit",
        session="ses_a",
        call_id="call_1",
        hook=None,
        created_at=3000.0,
        content="the new prompt",
        status=status,
    )
    return change.summary()  # as events and listings carry it: without its content


def commit(sha: str, at: int, origin: str = "operator", review: str | None = None) -> JSONDict:
    """A commit as the engine lists it: an agent's change to a prompt needs a review."""
    state = "approved" if review else ("unreviewed" if origin == "agent" else "none")
    return Change(
        sha=sha,
        time=at,
        message=f"change {sha}",
        subject=f"change {sha}",
        trailers={"origin": origin},
        files=["prompts/chat.md"],
        origin=origin,
        review=review,
        state=state,
    ).to_dict()


def health(pid: int, seq: int) -> Health:
    """The engine's answer to its health check."""
    return Health(ok=True, version="1.0", api=1, workspace="/ws", pid=pid, seq=seq)


def connected_model(pid: int = 10, seq: int = 0) -> ConsoleModel:
    """A model whose engine answered its health check, with nothing loaded yet."""
    model = ConsoleModel()
    assert model.apply_health(health(pid, seq)) == seq
    model.set_connection(True, f"http://127.0.0.1:1 · pid {pid}")
    return model


def feed(model: ConsoleModel, *events: Event) -> None:
    for e in events:
        model.receive(e)


# ---- the order of events ----------------------------------------------------------------------------


def test_runs_are_applied_in_order_and_counted_by_kind() -> None:
    model = connected_model()
    feed(model, hook_run(1), hook_run(2), event(3, EventKind.HOOK_RUN_STARTED, {}), hook_run(4))
    assert model.waiting == 4 and model.last_seq == 4
    assert model.runs == {} and model.applied_seq == 0, "received is not applied"
    update = model.apply_waiting()
    assert [r.id for r in update.runs] == ["run_00001", "run_00002", "run_00004"]
    assert list(model.runs) == ["run_00001", "run_00002", "run_00004"]
    assert model.runs["run_00004"].input == {} and model.runs["run_00004"].duration_ms == 4.0
    assert model.events_seen == {"hook_run": 3, "hook_run_started": 1}
    assert model.applied_seq == 4 and model.waiting == 0
    assert update.redraw == {Part.RUNS} and update.reload == set()


def test_a_replayed_event_is_dropped_and_does_not_move_the_seq_back() -> None:
    model = connected_model()
    feed(model, hook_run(1), hook_run(2), hook_run(3))
    assert model.receive(hook_run(2)) is False, "seq 2 was received already"
    assert model.last_seq == 3, "an older number must not make the next event look like a gap"
    assert model.receive(hook_run(4)) is True
    assert model.stale == set()
    model.apply_waiting()
    assert model.events_seen["hook_run"] == 4 and len(model.runs) == 4


def test_a_skipped_seq_reloads_the_runs_once_connected() -> None:
    model = connected_model()
    model.set_connection(False, "the engine does not answer; retrying")
    feed(model, hook_run(1), hook_run(2), hook_run(5))  # 3 and 4 were lost on the way
    assert model.stale == {Part.RUNS}
    assert model.take_reloads() == set(), "nothing is fetched while the engine does not answer"
    model.set_connection(True, "back")
    assert model.take_reloads() == {Part.RUNS}
    assert model.take_reloads() == set(), "asked once"
    assert model.last_seq == 5


def test_engine_restart_numbers_from_one_again() -> None:
    model = connected_model(pid=10)
    feed(model, *(hook_run(seq) for seq in range(1, 41)))
    model.apply_waiting()
    feed(model, *(hook_run(seq) for seq in range(41, 51)))  # received, not yet applied: then a crash
    assert model.applied_seq == 40 and model.last_seq == 50

    since = model.apply_health(health(11, 3))
    assert since == 3, "follow the new engine from its own numbers"
    assert model.engine_pid == 11 and model.last_seq == 3 and model.applied_seq == 0
    feed(model, hook_run(4, n=9004), hook_run(5, n=9005))
    assert model.stale == set(), "4 follows 3: nothing was dropped"
    update = model.apply_waiting()
    assert model.applied_seq == 5, "the old engine's events still waiting no longer count"
    assert len(update.runs) == 12, "they are still shown"
    # A reload answered without any run: only the new engine's live runs are newer than it.
    model.apply_reload(Part.RUNS, RunList.from_dict({"runs": [], "counts": {"runs": 0}}), since=0)
    assert list(model.runs) == ["run_09004", "run_09005"]

    assert model.apply_health(health(11, 99)) == 5, "the same engine: go on from 5"


def test_a_reload_racing_live_runs_keeps_the_newer_ones() -> None:
    model = connected_model()
    feed(model, hook_run(1), hook_run(2), hook_run(3))
    model.apply_waiting()
    since = model.applied_seq  # the reload's request goes out now
    feed(model, hook_run(4), hook_run(5))
    model.apply_waiting()  # two runs applied while the request is out
    # The journal had run 4 when it answered, not run 5; newest first, as the engine sends them.
    answer = RunList([listed_run(n) for n in (4, 3, 2, 1)], {"runs": 4, "failed_runs": 0})
    assert model.apply_reload(Part.RUNS, answer, since=since)
    assert list(model.runs) == [f"run_{n:05d}" for n in (1, 2, 3, 4, 5)]
    assert model.runs["run_00004"].input == {} and model.runs["run_00004"].stdout_lines == [], (
        "a table keeps a run's brief fields only"
    )
    assert model.runs["run_00004"].duration_ms == 4.0
    assert model.counts == {"runs": 4, "failed_runs": 0}
    # An answer as new as everything applied replaces the rows.
    model.apply_reload(Part.RUNS, RunList([listed_run(9)], {}), since=None)
    assert list(model.runs) == ["run_00009"] and model.counts == {}


def test_runs_that_come_after_the_counts_were_read_count_at_once() -> None:
    model = connected_model()
    feed(model, hook_run(1), hook_run(2))
    model.apply_waiting()
    model.apply_reload(Part.COUNTS, RunList(counts={"runs": 2, "failed_runs": 0}), since=None)
    feed(model, hook_run(3), hook_run(4, error="exit 1"))
    model.apply_waiting()
    assert model.counts == {"runs": 4, "failed_runs": 1}, "the line must not lag behind the rows"
    # The next read of the journal is the truth again (it may have trimmed old runs).
    model.apply_reload(Part.COUNTS, RunList(counts={"runs": 3, "failed_runs": 1}), since=None)
    feed(model, hook_run(5))
    model.apply_waiting()
    assert model.counts == {"runs": 4, "failed_runs": 1}


def test_a_flood_keeps_only_the_newest_rows() -> None:
    model = connected_model()
    flood = 5 * MAX_ROWS
    feed(model, *(hook_run(seq) for seq in range(1, flood + 1)))
    update = model.apply_waiting()
    assert len(update.runs) == MAX_ROWS, "the table is given no more rows than it can keep"
    assert update.runs[0].id == f"run_{flood - MAX_ROWS + 1:05d}" and update.runs[-1].id == f"run_{flood:05d}"
    assert list(model.runs) == [r.id for r in update.runs]
    assert model.events_seen["hook_run"] == flood and model.applied_seq == flood
    feed(model, hook_run(flood + 1), hook_run(flood + 2))
    model.apply_waiting()
    assert len(model.runs) == MAX_ROWS
    assert next(iter(model.runs)) == f"run_{flood - MAX_ROWS + 3:05d}", "the oldest rows go first"
    # Stage results are kept to the rows shown in the same way.
    stages = [
        event(flood + 2 + i, EventKind.STAGE, StageResult(f"dsp_{i:05d}", "idle", 1.0, {}).to_dict())
        for i in range(1, MAX_ROWS + 11)
    ]
    update = model.apply_events(stages)
    assert len(update.stages) == MAX_ROWS + 10 and len(model.dispatches) == MAX_ROWS
    assert next(iter(model.dispatches)) == "dsp_00011"


def test_the_filter_applies_to_live_runs_and_to_the_query() -> None:
    model = connected_model()
    model.run_filter = RunFilter(stage="idle", failed=True)
    assert model.query(Part.RUNS) == calls.runs(stage="idle", failed=True, limit=HISTORY_LIMIT)
    feed(
        model,
        hook_run(1),
        hook_run(2, error="exit 1"),
        hook_run(3, stage="heartbeat", error="exit 1"),
    )
    update = model.apply_waiting()
    assert [r.id for r in update.runs] == ["run_00002"]
    assert model.events_seen["hook_run"] == 3, "every run counts as received live"
    assert model.query(Part.COUNTS) == calls.runs(limit=0)


# ---- payloads applied directly, or announcing a reload ----------------------------------------------


def test_a_heartbeat_event_carries_the_status_after_it() -> None:
    model = connected_model()
    model.apply_reload(Part.HEARTBEAT, heartbeat_status())
    tick = TickResult(trigger="manual", started_at=4000.0, outcome="skipped", reason="opencode unreachable")
    changed = HeartbeatChanged("tick", heartbeat_status(count=1, last=tick), tick=tick, trigger="manual")
    update = model.apply_events([event(1, EventKind.HEARTBEAT, changed.to_dict())])
    assert update.redraw == {Part.HEARTBEAT} and update.reload == set(), "no request to the engine"
    assert model.heartbeat is not None and model.heartbeat.count == 1
    assert model.heartbeat.last is not None and model.heartbeat.last.reason == "opencode unreachable"


def test_a_heartbeat_event_without_the_status_asks_for_a_reload() -> None:
    model = connected_model()
    model.apply_reload(Part.HEARTBEAT, heartbeat_status())
    old_shape = {"event": "paused", **heartbeat_status(paused=True).to_dict()}
    update = model.apply_events([event(1, EventKind.HEARTBEAT, old_shape)])
    assert update.reload == {Part.HEARTBEAT} and update.redraw == set()
    assert model.heartbeat is not None and not model.heartbeat.paused, "nothing guessed from it"
    assert model.take_reloads() == {Part.HEARTBEAT}


def test_a_heartbeat_answer_older_than_an_applied_event_is_ignored() -> None:
    model = connected_model()
    feed(model, hook_run(1))
    model.apply_waiting()
    since = model.applied_seq  # GET /v1/heartbeat goes out
    paused = HeartbeatChanged("paused", heartbeat_status(paused=True)).to_dict()
    model.apply_events([event(2, EventKind.HEARTBEAT, paused)])  # the pause arrives first
    assert not model.apply_reload(Part.HEARTBEAT, heartbeat_status(), since=since)
    assert model.heartbeat is not None and model.heartbeat.paused
    assert model.apply_reload(Part.HEARTBEAT, heartbeat_status(), since=2), "a newer answer wins"
    assert not model.heartbeat.paused


def test_failures_are_counted_until_looked_at_and_a_hook_that_starts_failing_alerts() -> None:
    """Failed runs count until the operator looks at view 1. A hook that starts failing at a stage
    alerts once the engine has its cause (its `failure` event, `started`), with the error's own last
    line and the change most likely behind it: once, not at every later failure (`failing`), nor when
    it fails now and then between successes (`recurs`); again after it ran fine (`cleared`)."""
    model = connected_model()
    model.apply_reload(
        Part.CHANGES, ChangeList.from_dict({"changes": [commit("c1", 100), commit("c2", 200)]})
    )

    def run(n: int, hook: str, stage: str, error: str | None) -> Event:
        data = {"id": f"r{n}", "stage": stage, "hook": hook, "started_at": float(n), "error": error}
        return event(n, EventKind.HOOK_RUN, data)

    suspect = Suspect("c2", "edit hook a.py", "agent", at=150.0, before_s=60.0, session_title="Errands")
    message = 'hooks/a.py started failing at idle: TypeError: boom (since c2, agent, 1 min before the first failure, session "Errands")'

    def failure(n: int, state: str, runs: int, recurs: bool = False) -> Event:
        found = Failure(
            "fail_1",
            "a.py",
            "idle",
            state,
            error="TypeError: boom",
            exit="exit 1",
            runs=runs,
            first_run="r2",
            first_at=2.0,
            suspect=suspect,
            cause="since c2, …",
            message=message,
            recurs=recurs,
        )
        return event(n, EventKind.FAILURE, found.to_dict())

    update = model.apply_events([run(1, "a.py", "idle", None), run(2, "a.py", "idle", "exit 1")])
    assert update.alerts == [], "a failed run alone does not alert: its cause comes with the failure"
    update = model.apply_events([failure(3, "started", 1)])
    (alert,) = update.alerts
    assert (alert.text, alert.severity, alert.bell) == (message, "warning", True)
    assert (alert.change, alert.revert) == ("c2", "c2"), "the keys show and revert the suspect"
    assert model.changes["c2"].failing_runs == 1 and model.changes["c1"].failing == ()
    update = model.apply_events(
        [run(4, "a.py", "idle", "exit 1"), failure(5, "failing", 2), run(6, "b.py", "idle", None)]
    )
    assert update.alerts == [], "a hook that keeps failing alerts once"
    assert model.changes["c2"].failing_runs == 2, "the change's row counts its runs"
    assert model.failed_unseen == 2
    model.looked_at_runs()
    assert model.failed_unseen == 0
    update = model.apply_events([failure(7, "cleared", 2)])
    assert model.failures == {} and model.changes["c2"].failing == ()
    # A hook that fails now and then, between successes, does not alert at each failure.
    update = model.apply_events([run(8, "a.py", "idle", "timeout"), failure(9, "started", 1, recurs=True)])
    assert update.alerts == [], "a failure soon after the last one is the same trouble"
    assert model.failed_unseen == 1
    # A failure a while after the last one alerts again.
    update = model.apply_events([failure(10, "cleared", 1), failure(11, "started", 1)])
    assert [a.text for a in update.alerts] == [message], "failing again after a quiet while"


def test_tool_calls_come_from_their_start_and_end_events() -> None:
    model = connected_model()
    started = {"id": "t1", "tool": "notes_add", "args": {"text": "x"}, "started_at": 5.0, "session": "s"}
    ended = {**started, "output": "noted", "duration_ms": 3.0, "commit": "abc"}
    update = model.apply_events([event(1, EventKind.TOOL_CALL, started)])
    assert update.redraw == {Part.TOOLS} and model.tool_calls["t1"].output is None
    model.apply_events([event(2, EventKind.TOOL_RESULT, ended)])
    assert model.tool_calls["t1"].output == "noted" and model.tool_calls["t1"].commit == "abc"
    # A listing sent before the end was known: the end stays.
    assert model.query(Part.TOOLS) == calls.tool_calls(limit=HISTORY_LIMIT)
    model.apply_reload(Part.TOOLS, ToolCallList.from_dict({"tool_calls": [started]}), since=1)
    assert model.tool_calls["t1"].output == "noted"


def test_opencode_connections_come_and_go_in_the_status() -> None:
    model = connected_model()
    model.apply_reload(Part.STATUS, engine_status())
    came = OpencodeChanged("connected", connection("oc_1")).to_dict()
    update = model.apply_events([event(1, EventKind.OPENCODE, came)])
    assert update.redraw == {Part.STATUS} and update.reload == set()
    assert model.status is not None and [c.id for c in model.status.opencode] == ["oc_1"]

    # A status requested before that event, answered after it: its config errors are news, its
    # connections are not.
    answer = engine_status(config_errors=["config/evolve.jsonc: bad"])
    assert model.apply_reload(Part.STATUS, answer, since=0)
    assert model.status.config_errors == ["config/evolve.jsonc: bad"]
    assert [c.id for c in model.status.opencode] == ["oc_1"]

    went = OpencodeChanged("disconnected", connection("oc_1"), reason="closed").to_dict()
    model.apply_events([event(2, EventKind.OPENCODE, went)])
    assert model.status.opencode == []
    old_shape = {"event": "connected", **connection("oc_2").to_dict()}
    update = model.apply_events([event(3, EventKind.OPENCODE, old_shape)])
    assert update.reload == {Part.STATUS} and model.status.opencode == []


def test_changes_list_commits_oldest_first_then_what_awaits_review() -> None:
    model = connected_model()
    answer = ChangeList.from_dict(
        {
            "changes": [commit("c3", 300, "agent"), commit("c2", 200), commit("c1", 100, "initial")],
            "pending": [
                pending("chg_a").to_dict(),
                pending("chg_b", status="rejected").to_dict(),
                pending("chg_c", status="approved").to_dict(),
            ],
        }
    )
    assert model.query(Part.CHANGES) == calls.changes(limit=HISTORY_LIMIT)
    model.apply_reload(Part.CHANGES, answer)
    # A rejected proposal stays in sight; an approved one is its commit now.
    assert list(model.changes) == ["c1", "c2", "c3", "chg_a", "chg_b"]
    assert model.changes["chg_b"].state == "rejected" and not model.changes["chg_b"].awaits_decision
    assert model.changes["c3"].state == "unreviewed" and model.changes["c3"].needs_review
    assert (model.pending_count, model.unreviewed_count) == (1, 1)
    first, waiting = model.changes["c1"], model.changes["chg_a"]
    assert not first.revertible and model.changes["c2"].revertible
    assert waiting.origin == "pending" and waiting.pending_id == "chg_a" and not waiting.revertible
    assert waiting.subject == "edit prompt chat.md" and waiting.awaits_decision
    assert waiting.files == ["prompts/chat.md"] and waiting.time == 3000.0
    assert waiting.trailers == {"tool": "evolve_prompt_edit", "session": "ses_a", "call": "call_1"}


def test_pending_changes_and_reviews_are_applied_without_a_reload() -> None:
    model = connected_model()
    model.apply_reload(Part.CHANGES, ChangeList.from_dict({"changes": [commit("c1", 100)], "pending": []}))
    update = model.apply_events([event(1, EventKind.PENDING, pending("chg_a").to_dict())])
    assert update.redraw == {Part.CHANGES} and update.reload == set()
    assert list(model.changes) == ["c1", "chg_a"]
    assert [a.text for a in update.alerts] == [
        "a change awaits your review: edit prompt chat.md (prompts/chat.md)"
    ]
    (alert,) = update.alerts
    assert (alert.change, alert.decision, alert.bell) == ("chg_a", "chg_a", True), "it waits for a decision"
    update = model.apply_events([event(2, EventKind.PENDING, pending("chg_a", status="rejected").to_dict())])
    assert update.redraw == {Part.CHANGES} and list(model.changes) == ["c1", "chg_a"]
    assert model.changes["chg_a"].state == "rejected" and update.alerts == []
    assert update.decided == {"chg_a"}, "its alert goes"

    review = ReviewRecorded("c1", "approved by operator at 2026-01-01T00:00:00Z").to_dict()
    update = model.apply_events([event(3, EventKind.REVIEW, review)])
    assert update.redraw == {Part.CHANGES} and update.reload == set()
    assert model.changes["c1"].review == "approved by operator at 2026-01-01T00:00:00Z"

    unknown = ReviewRecorded("c9", "approved").to_dict()  # a commit not loaded yet
    assert model.apply_events([event(4, EventKind.REVIEW, unknown)]).reload == {Part.CHANGES}
    assert model.apply_events([event(5, EventKind.COMMIT, {"sha": "c2", "message": "m"})]).reload == {
        Part.CHANGES
    }


def test_rows_of_changes_keep_one_order_live_reloaded_or_after_a_restart() -> None:
    """Commits oldest first, then the held changes by the time they were proposed: whether they
    arrive live (in any order), come in a listing (in the engine's order), or both."""
    proposed = {"chg_b": 3002.0, "chg_a": 3001.0, "chg_c": 3003.0}

    def held(pending_id: str, status: str = "pending") -> PendingChange:
        return replace(pending(pending_id, status), created_at=proposed[pending_id])

    live = connected_model()
    live.apply_reload(Part.CHANGES, ChangeList.from_dict({"changes": [commit("c1", 100)], "pending": []}))
    for pending_id in ("chg_b", "chg_c", "chg_a"):  # as the events came
        live.apply_events([event(1, EventKind.PENDING, held(pending_id).to_dict())])
    expected = ["c1", "chg_a", "chg_b", "chg_c"]
    assert list(live.changes) == expected
    # One is decided: its row keeps its place.
    live.apply_events([event(2, EventKind.PENDING, held("chg_a", "rejected").to_dict())])
    assert list(live.changes) == expected

    listed = {
        "changes": [commit("c1", 100)],
        "pending": [held("chg_c").to_dict(), held("chg_a", "rejected").to_dict(), held("chg_b").to_dict()],
    }
    restarted = connected_model(pid=11)
    restarted.apply_reload(Part.CHANGES, ChangeList.from_dict(listed))
    assert list(restarted.changes) == expected, "the same order from a listing in another order"


def test_session_events_apply_without_a_reload_and_a_late_answer_keeps_them() -> None:
    model = connected_model()
    model.apply_reload(Part.SESSIONS, SessionList([SessionInfo("ses_a", title="old", updated_at=1.0)]))
    since = model.applied_seq  # GET /v1/sessions goes out
    created = SessionChanged("created", SessionInfo("ses_b", created_at=2.0, updated_at=2.0)).to_dict()
    retitled = SessionChanged(
        "updated", SessionInfo("ses_a", title="new", busy=True, updated_at=3.0)
    ).to_dict()
    update = model.apply_events([event(1, EventKind.SESSION, created), event(2, EventKind.SESSION, retitled)])
    assert update.redraw == {Part.SESSIONS} and update.reload == set()
    assert set(model.sessions) == {"ses_a", "ses_b"}
    assert model.sessions["ses_a"].title == "new" and model.sessions["ses_a"].busy

    # An answer sent before those events: it does not know ses_b yet, and its ses_a is older.
    late = SessionList([SessionInfo("ses_a", title="old", updated_at=1.0)])
    assert model.apply_reload(Part.SESSIONS, late, since=since)
    assert model.sessions["ses_a"].title == "new" and "ses_b" in model.sessions

    gone = SessionChanged("forgotten", SessionInfo("ses_a")).to_dict()
    model.apply_events([event(3, EventKind.SESSION, gone)])
    assert "ses_a" not in model.sessions


def test_other_events_announce_reloads_and_notices() -> None:
    model = connected_model()
    update = model.apply_events(
        [
            event(1, EventKind.SESSION, {"change": "frozen", "session": "ses_a"}),  # an older shape
            event(2, EventKind.CONFIG, {"config": {}, "errors": []}),
            event(3, EventKind.WARNING, {"source": "config", "message": "unknown key"}),
            event(4, EventKind.ERROR, {"source": "revert", "message": "conflict"}),
            event(5, "from_a_newer_engine", {"x": 1}),
            event(6, EventKind.HOOK_RUN, {"stage": "idle"}),  # a run without an id does not parse
        ]
    )
    assert update.reload == {Part.SESSIONS, Part.STATUS, Part.RUNS}
    assert [(kind, n.source, n.message) for kind, n in update.notices] == [
        ("warning", "config", "unknown key"),
        ("error", "revert", "conflict"),
    ]
    assert model.events_seen["from_a_newer_engine"] == 1 and model.runs == {}
    assert model.stale == {Part.SESSIONS, Part.STATUS, Part.RUNS}


def test_a_new_health_check_starts_with_nothing_stale() -> None:
    model = connected_model()
    feed(model, hook_run(1), hook_run(3))
    assert model.stale == {Part.RUNS}
    model.apply_health(health(10, 3))  # reconnected: everything is loaded anew
    assert model.take_reloads() == set()


# ---- the console's boundaries -----------------------------------------------------------------------


def test_the_console_imports_nothing_of_the_engine_but_its_protocol() -> None:
    found = []
    for path in sorted((REPO / "evolve_console").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [
                f"{path.relative_to(REPO)}: {name}"
                for name in names
                if name.split(".")[0] == "engine" and name.split(".")[:2] != ["engine", "protocol"]
            ]
    assert found == []
