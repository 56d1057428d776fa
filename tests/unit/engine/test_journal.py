"""Tests for engine.journal: the SQLite journal of hook runs, dispatches, tool calls, sessions."""

from __future__ import annotations

import json
import sqlite3
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine.core import strictjson
from engine.journal import rows
from engine.journal.store import SCHEMA_VERSION, Journal, JournalFailing
from engine.protocol.records import HookRun, StageResult, ToolCall
from tests.support.waiting import wait_for


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain autocommit connection to the journal file, closed afterwards."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ws" / "state" / "journal.sqlite3"


@pytest.fixture
def journal(path: Path) -> Iterator[Journal]:
    j = Journal(path)
    yield j
    j.close()


def make_run(i: int, **kw: object) -> HookRun:
    fields: dict[str, object] = {
        "id": f"run_{i:06d}",
        "stage": "chat.system",
        "hook": "notes.py",
        "started_at": 1000.0 + i,
        "input": {"i": i},
    }
    fields.update(kw)
    return HookRun(**fields)  # type: ignore[arg-type]


def make_dispatch(i: int, **kw: object) -> StageResult:
    fields: dict[str, object] = {
        "id": f"stage_{i:06d}",
        "stage": "chat.system",
        "started_at": 1000.0 + i,
        "context": {"i": i},
    }
    fields.update(kw)
    return StageResult(**fields)  # type: ignore[arg-type]


def make_tool(i: int, **kw: object) -> ToolCall:
    fields: dict[str, object] = {
        "id": f"tool_{i:06d}",
        "tool": "bash",
        "args": {"i": i},
        "started_at": 1000.0 + i,
    }
    fields.update(kw)
    return ToolCall(**fields)  # type: ignore[arg-type]


def full_run() -> HookRun:
    return HookRun(
        id="run_full",
        stage="tool.before",
        hook="sub/guard.py",
        started_at=1234.5,
        input={"stage": "tool.before", "args": {"cmd": "ls"}, "n": [1, 2.5, None, True]},
        session="ses_1",
        dispatch_id="stage_1",
        stdout_lines=['{"a": 1}', "not json"],
        logs=["hello", {"level": "warn", "msg": "x"}],
        stderr="Traceback...\n",
        stderr_truncated=True,
        result={"a": 1, "nested": {"b": [1, 2]}},
        exit_code=3,
        signal="SIGKILL",
        duration_ms=12.75,
        error="exited with code 3",
    )


def full_dispatch() -> StageResult:
    return StageResult(
        id="stage_full",
        stage="chat.system",
        started_at=2345.25,
        context={"session": "ses_1", "system": ["a", "b"]},
        session="ses_1",
        hooks=["a.py", "b.py"],
        runs=["run_1", "run_2", "run_3"],
        merged={"system": ["x"], "deep": {"k": "v"}},
        failed=["b.py"],
        recovered=True,
        duration_ms=99.5,
    )


def full_tool() -> ToolCall:
    return ToolCall(
        id="tool_full",
        tool="edit_hook",
        args={"path": "hooks/x.py", "content": "print(1)\n"},
        started_at=3456.125,
        session="ses_1",
        call_id="call_abc",
        output="done",
        error="refused: outside hooks/",
        commit="0123456789abcdef",
        duration_ms=5.5,
    )


# --- round trips -----------------------------------------------------------------------------


def test_round_trip_all_fields(journal: Journal) -> None:
    run, disp, tool = full_run(), full_dispatch(), full_tool()
    journal.record_run(run)
    journal.record_dispatch(disp)
    journal.record_tool_call(tool)
    journal.flush()
    assert journal.run(run.id) == run
    assert journal.dispatch(disp.id) == disp
    assert journal.tool_call(tool.id) == tool
    assert journal.runs() == [run]
    assert journal.dispatches() == [disp]
    assert journal.tool_calls() == [tool]
    assert journal.run("missing") is None
    assert journal.dispatch("missing") is None
    assert journal.tool_call("missing") is None
    assert journal.last_error is None


def test_round_trip_defaults(journal: Journal) -> None:
    run, disp, tool = make_run(1), make_dispatch(1), make_tool(1)
    journal.record_run(run)
    journal.record_dispatch(disp)
    journal.record_tool_call(tool)
    journal.flush()
    assert journal.run(run.id) == run
    assert journal.dispatch(disp.id) == disp
    assert journal.tool_call(tool.id) == tool


def test_columns_mirror_record(journal: Journal, path: Path) -> None:
    journal.record_run(full_run())
    journal.record_dispatch(full_dispatch())
    journal.record_tool_call(full_tool())
    journal.flush()
    with raw(path) as conn:
        assert conn.execute(
            "SELECT stage, hook, session, dispatch_id, ok, error, exit_code, signal, duration_ms FROM runs"
        ).fetchone() == (
            "tool.before",
            "sub/guard.py",
            "ses_1",
            "stage_1",
            0,
            "exited with code 3",
            3,
            "SIGKILL",
            12.75,
        )
        assert conn.execute(
            "SELECT stage, session, recovered, failed_count, duration_ms FROM dispatches"
        ).fetchone() == ("chat.system", "ses_1", 1, 1, 99.5)
        assert conn.execute("SELECT tool, session, call_id, ok FROM tool_calls").fetchone() == (
            "edit_hook",
            "ses_1",
            "call_abc",
            0,
        )


def test_upsert_replaces(journal: Journal) -> None:
    run = make_run(1)
    journal.record_run(run)  # as it starts
    run.stdout_lines.append('{"x": 1}')
    run.result = {"x": 1}
    run.duration_ms = 4.0
    run.error = "boom"
    journal.record_run(run)  # as it ends
    disp = make_dispatch(1)
    journal.record_dispatch(disp)
    journal.record_dispatch(make_dispatch(1, recovered=True, failed=["a.py"]))
    tool = make_tool(1)
    journal.record_tool_call(tool)
    journal.record_tool_call(make_tool(1, output="out"))
    journal.flush()

    stored = journal.run(run.id)
    assert stored == run
    assert stored is not None and stored.error == "boom"
    assert journal.runs(failed=True) == [run]
    assert journal.runs(failed=False) == []
    assert journal.dispatch(disp.id) == make_dispatch(1, recovered=True, failed=["a.py"])
    assert journal.tool_call(tool.id) == make_tool(1, output="out")
    assert journal.counts() == {"runs": 1, "failed_runs": 1, "dispatches": 1, "tool_calls": 1}


def test_upsert_across_batches(journal: Journal) -> None:
    run = make_run(1)
    journal.record_run(run)
    journal.flush()
    assert journal.run(run.id) == run
    run.error = "late failure"
    journal.record_run(run)
    journal.flush()
    assert journal.run(run.id) == run
    assert journal.counts()["runs"] == 1


def test_of_a_call_started_and_ended_within_a_batch_only_the_last_record_is_written(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[str] = []

    def counting(value: object) -> str:
        if isinstance(value, dict) and str(value.get("id", "")).startswith("tool_"):
            encoded.append(str(value["id"]))
        return strictjson.dumps(value)

    monkeypatch.setattr(rows, "encode_json", counting)
    for i in range(50):
        journal.tool_call_started(make_tool(i), {"files": ["notes.md"]})
        journal.record_tool_call(make_tool(i, output=f"done {i}"))  # handed over at once after
    journal.flush()
    # Each pair shares a batch unless the writer's 20 ms window closed between the two: the
    # started record, replaced by the ended one, is then neither encoded nor written.
    assert len(encoded) < 100
    assert sorted(set(encoded)) == sorted(f"tool_{i:06d}" for i in range(50))
    assert [journal.tool_call(f"tool_{i:06d}") for i in range(50)] == [
        make_tool(i, output=f"done {i}") for i in range(50)
    ]
    assert journal.interrupted_tool_calls() == []
    assert journal.counts()["tool_calls"] == 50


def test_record_snapshot_is_taken_at_call_time(journal: Journal) -> None:
    run = make_run(1)
    journal.record_run(run)
    run.stdout_lines.append("after")  # mutation after recording must not leak in
    journal.flush()
    stored = journal.run(run.id)
    assert stored is not None and stored.stdout_lines == []


# --- queries ---------------------------------------------------------------------------------


def test_run_filters(journal: Journal) -> None:
    runs = [
        make_run(0, stage="a", hook="x.py", session="s1", dispatch_id="d1"),
        make_run(1, stage="a", hook="y.py", session="s2", dispatch_id="d1", error="e"),
        make_run(2, stage="b", hook="x.py", session="s1", dispatch_id="d2"),
        make_run(3, stage="b", hook="y.py", session=None, error="e"),
        make_run(4, stage="a", hook="x.py", session="s1", dispatch_id="d2", error="e"),
    ]
    for run in runs:
        journal.record_run(run)
    journal.flush()

    def ids(found: list[HookRun]) -> list[int]:
        return [int(r.id.split("_")[1]) for r in found]

    assert ids(journal.runs()) == [4, 3, 2, 1, 0]
    assert ids(journal.runs(stage="a")) == [4, 1, 0]
    assert ids(journal.runs(hook="y.py")) == [3, 1]
    assert ids(journal.runs(session="s1")) == [4, 2, 0]
    assert ids(journal.runs(failed=True)) == [4, 3, 1]
    assert ids(journal.runs(failed=False)) == [2, 0]
    assert ids(journal.runs(dispatch_id="d2")) == [4, 2]
    assert ids(journal.runs(stage="a", hook="x.py", failed=True)) == [4]
    assert ids(journal.runs(stage="a", session="s2", dispatch_id="d1")) == [1]
    assert ids(journal.runs(stage="nope")) == []
    assert ids(journal.runs(limit=2)) == [4, 3]
    assert journal.runs(limit=0) == []
    assert journal.counts() == {"runs": 5, "failed_runs": 3, "dispatches": 0, "tool_calls": 0}


def test_before_pagination_newest_first(journal: Journal) -> None:
    # Recorded out of order: ordering comes from started_at, not insertion order.
    for i in [5, 1, 9, 3, 7, 0, 2, 8, 4, 6]:
        journal.record_run(make_run(i))
        journal.record_dispatch(make_dispatch(i))
        journal.record_tool_call(make_tool(i))
    journal.flush()

    pages: list[list[float]] = []
    before: float | None = None
    while True:
        page = journal.runs(limit=3, before=before)
        if not page:
            break
        pages.append([r.started_at for r in page])
        before = page[-1].started_at
    assert pages == [[1009, 1008, 1007], [1006, 1005, 1004], [1003, 1002, 1001], [1000]]

    assert [d.started_at for d in journal.dispatches(limit=3)] == [1009, 1008, 1007]
    assert [d.started_at for d in journal.dispatches(before=1007, limit=2)] == [1006, 1005]
    assert [t.started_at for t in journal.tool_calls(limit=3)] == [1009, 1008, 1007]
    assert [t.started_at for t in journal.tool_calls(before=1001)] == [1000]


def test_same_started_at_ordered_by_id(journal: Journal) -> None:
    for i in range(3):
        journal.record_run(make_run(i, started_at=5.0))
    journal.flush()
    assert [r.id for r in journal.runs()] == ["run_000002", "run_000001", "run_000000"]


def test_dispatch_and_tool_filters(journal: Journal) -> None:
    journal.record_dispatch(make_dispatch(0, stage="a", session="s1"))
    journal.record_dispatch(make_dispatch(1, stage="b", session="s1"))
    journal.record_dispatch(make_dispatch(2, stage="a", session="s2"))
    journal.record_tool_call(make_tool(0, tool="bash", session="s1"))
    journal.record_tool_call(make_tool(1, tool="edit", session="s2"))
    journal.record_tool_call(make_tool(2, tool="bash", session="s2"))
    journal.flush()
    assert [d.id for d in journal.dispatches(stage="a")] == ["stage_000002", "stage_000000"]
    assert [d.id for d in journal.dispatches(session="s1")] == [
        "stage_000001",
        "stage_000000",
    ]
    assert [d.id for d in journal.dispatches(stage="a", session="s1")] == ["stage_000000"]
    assert [t.id for t in journal.tool_calls(tool="bash")] == ["tool_000002", "tool_000000"]
    assert [t.id for t in journal.tool_calls(session="s2")] == ["tool_000002", "tool_000001"]
    assert [t.id for t in journal.tool_calls(tool="edit", session="s1")] == []


# --- retention -------------------------------------------------------------------------------


def test_retention_keeps_newest(path: Path) -> None:
    with Journal(path, max_runs=50) as journal:
        order = list(range(120))
        order.reverse()  # oldest arrive last: retention is by started_at, not arrival
        for i in order:
            journal.record_run(make_run(i, error="e" if i % 2 else None))
            journal.record_dispatch(make_dispatch(i))
            journal.record_tool_call(make_tool(i))
            if i % 40 == 0:
                journal.flush()  # several batches
        journal.flush()
        newest = list(range(119, 69, -1))
        assert [int(r.id.split("_")[1]) for r in journal.runs(limit=1000)] == newest
        assert [int(d.id.split("_")[1]) for d in journal.dispatches(limit=1000)] == newest
        assert [int(t.id.split("_")[1]) for t in journal.tool_calls(limit=1000)] == newest
        assert journal.counts() == {
            "runs": 50,
            "failed_runs": 25,
            "dispatches": 50,
            "tool_calls": 50,
        }
        assert journal.last_error is None


def test_retention_applies_to_existing_rows_on_reopen(path: Path) -> None:
    with Journal(path) as journal:
        for i in range(30):
            journal.record_run(make_run(i))
    with Journal(path, max_runs=10) as journal:
        journal.record_run(make_run(30))
        journal.flush()
        assert [r.started_at for r in journal.runs()] == [1000.0 + i for i in range(30, 20, -1)]


def test_upserts_do_not_trim_below_max(path: Path) -> None:
    with Journal(path, max_runs=5) as journal:
        for i in range(5):
            journal.record_run(make_run(i))
        for _ in range(10):  # many upserts of the same ids over-count in memory
            for i in range(5):
                journal.record_run(make_run(i, error="x"))
            journal.flush()
        assert journal.counts()["runs"] == 5
        assert journal.counts()["failed_runs"] == 5


# --- durability, concurrency, lifecycle ------------------------------------------------------


def test_flush_makes_data_visible_to_other_journal(path: Path) -> None:
    first = Journal(path)
    second = Journal(path)  # opened before anything was written
    try:
        run = full_run()
        first.record_run(run)
        first.record_dispatch(full_dispatch())
        first.flush()
        assert second.run(run.id) == run
        assert second.dispatch("stage_full") == full_dispatch()
        third = Journal(path)
        try:
            assert third.run(run.id) == run
            assert third.counts()["runs"] == 1
        finally:
            third.close()
    finally:
        first.close()
        second.close()


def test_close_flushes_and_is_idempotent(path: Path) -> None:
    journal = Journal(path)
    for i in range(10):
        journal.record_run(make_run(i))
    journal.close()
    journal.close()
    journal.flush()  # no-op after close
    journal.record_run(make_run(99))  # dropped, but never raises
    with pytest.raises(RuntimeError):
        journal.runs()
    with Journal(path) as reopened:
        assert reopened.counts()["runs"] == 10
        assert reopened.run("run_000099") is None


def test_concurrent_writers(path: Path) -> None:
    per_thread = 2500
    with Journal(path) as journal:
        barrier = threading.Barrier(4)

        def writer(t: int) -> None:
            barrier.wait()
            for k in range(per_thread):
                i = t * per_thread + k
                if i % 3 == 0:
                    journal.record_run(make_run(i, error="e" if i % 2 else None))
                elif i % 3 == 1:
                    journal.record_dispatch(make_dispatch(i))
                else:
                    journal.record_tool_call(make_tool(i))

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        journal.flush()

        total = 4 * per_thread
        run_ids = [i for i in range(total) if i % 3 == 0]
        expected = {
            "runs": len(run_ids),
            "failed_runs": sum(1 for i in run_ids if i % 2),
            "dispatches": sum(1 for i in range(total) if i % 3 == 1),
            "tool_calls": sum(1 for i in range(total) if i % 3 == 2),
        }
        assert sum(v for k, v in expected.items() if k != "failed_runs") == total
        assert journal.counts() == expected
        stored = journal.runs(limit=total)
        assert sorted(int(r.id.split("_")[1]) for r in stored) == run_ids
        assert journal.last_error is None


def test_flush_while_other_threads_write(path: Path) -> None:
    with Journal(path) as journal:
        stop = threading.Event()

        def noise() -> None:
            i = 100_000
            while not stop.is_set():
                for _ in range(20):
                    journal.record_tool_call(make_tool(i))
                    i += 1
                stop.wait(0.001)  # a busy producer, not one faster than the disk

        thread = threading.Thread(target=noise)
        thread.start()
        try:
            for i in range(50):
                journal.record_run(make_run(i))
                journal.flush()
                assert journal.run(make_run(i).id) is not None
        finally:
            stop.set()
            thread.join()


def test_writer_survives_row_errors(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with Journal(path) as journal:
        # Make exactly one id fail to insert, inside a batch with good rows.
        with raw(path) as conn:
            conn.execute(
                "CREATE TRIGGER fail_bad BEFORE INSERT ON runs WHEN NEW.id = 'run_000002'"
                " BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        with caplog.at_level("ERROR", logger="evolve.journal"):
            for i in range(5):
                journal.record_run(make_run(i))
            journal.flush()
        assert journal.last_error is not None and "boom" in journal.last_error
        assert any(r.name == "evolve.journal" for r in caplog.records)
        assert [r.id for r in journal.runs()] == [
            "run_000004",
            "run_000003",
            "run_000001",
            "run_000000",
        ]
        # The writer keeps going.
        journal.record_run(make_run(10))
        journal.flush()
        assert journal.run("run_000010") is not None


def test_writer_keeps_what_a_full_disk_refuses(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk: the writer survives, drops nothing, says it is failing (flush raises at once),
    and writes what it kept once there is room again."""
    from engine.journal import writer

    # The first retry waits 2 s: time for the test to give the disk its room back while the writer
    # does not use its connection.
    monkeypatch.setattr(writer, "RETRY_FIRST_S", 2.0)
    states: list[str | None] = []
    with Journal(path, on_failing=states.append) as journal:
        journal.record_run(make_run(0))
        journal.flush()
        # Simulate a full disk: cap the writer connection's file size at its current size.
        # (The writer is idle between flushes, so poking its connection here is safe.)
        pages = journal._writer.execute("PRAGMA page_count").fetchone()[0]
        journal._writer.execute(f"PRAGMA max_page_count = {pages}")
        journal.record_run(make_run(1, stderr="x" * 1_000_000))
        with pytest.raises(JournalFailing, match="full"):
            journal.flush()
        assert journal.failing is not None and "full" in journal.failing
        assert journal.last_error is not None and "full" in journal.last_error
        assert journal.run("run_000001") is None
        assert journal.pending == 1  # kept, not dropped
        with pytest.raises(JournalFailing):
            journal.flush(timeout=0.1)  # at once while it cannot write
        # The writer waits before it tries again: its connection is free for the test.
        journal._writer.execute("PRAGMA max_page_count = 1073741823")
        journal.record_run(make_run(2))
        deadline = time.monotonic() + 10
        while journal.failing is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        journal.flush()
        assert journal.run("run_000001") is not None  # what the full disk refused is written now
        assert journal.run("run_000002") is not None
        assert journal.counts()["runs"] == 3
        assert journal.dropped == 0
    assert states[0] is not None and "full" in states[0] and states[-1] is None


def test_unencodable_values_fall_back(journal: Journal) -> None:
    run = make_run(1, input={"s": {1}, "b": b"x", "p": Path("/a")})
    journal.record_run(run)
    journal.flush()
    stored = journal.run(run.id)
    assert stored is not None and stored.input == {"s": [1], "b": "x", "p": "/a"}
    assert journal.last_error is None


# --- data safety -----------------------------------------------------------------------------


def test_large_string_round_trips(journal: Journal) -> None:
    big = "é" + "x" * (10 * 1024 * 1024) + "✓"
    run = make_run(1, stderr=big, input={"blob": big})
    tool = make_tool(1, output=big)
    journal.record_run(run)
    journal.record_tool_call(tool)
    journal.flush()
    assert journal.run(run.id) == run
    assert journal.tool_call(tool.id) == tool
    assert journal.last_error is None


def test_lone_surrogate_round_trips(journal: Journal) -> None:
    bad = b"caf\xe9 \xff".decode("utf-8", errors="surrogateescape")
    assert "\udce9" in bad
    run = make_run(
        1,
        stage="s\udc80",
        hook="h\ud800.py",
        session=bad,
        stdout_lines=[bad, "ok ✓"],
        stderr=bad,
        input={bad: bad},
        error=bad,
    )
    journal.record_run(run)
    journal.record_tool_call(make_tool(1, output=bad, tool=bad))
    journal.record_dispatch(make_dispatch(1, merged={"x": "\udfff"}))
    journal.flush()
    assert journal.last_error is None
    assert journal.run(run.id) == run
    assert journal.runs(session=bad) == [run]
    assert journal.runs(stage="s\udc80", hook="h\ud800.py") == [run]
    assert journal.tool_call("tool_000001") == make_tool(1, output=bad, tool=bad)
    assert journal.tool_calls(tool=bad) == [make_tool(1, output=bad, tool=bad)]
    assert journal.dispatch("stage_000001") == make_dispatch(1, merged={"x": "\udfff"})


def test_non_ascii_stored_readably(journal: Journal, path: Path) -> None:
    journal.record_run(make_run(1, stderr="héllo ✓"))
    journal.flush()
    with raw(path) as conn:
        (data,) = conn.execute("SELECT data FROM runs").fetchone()
    assert "héllo ✓" in data


# --- sessions --------------------------------------------------------------------------------


def test_sessions_merge(journal: Journal) -> None:
    assert journal.session("ses_1") is None
    journal.save_session("ses_1", agent="build")
    s = journal.session("ses_1")
    assert s is not None
    assert s["id"] == "ses_1"
    assert s["agent"] == "build"
    assert s["system"] is None and s["model"] is None and s["frozen_at"] is None
    first_update = s["updated_at"]

    journal.save_session(
        "ses_1",
        system=["you are", "helpful"],
        model={"providerID": "p", "modelID": "m"},
        frozen_at=12.5,
        title="hello",
        turns=3,
    )
    s = journal.session("ses_1")
    assert s is not None
    assert s["agent"] == "build"  # untouched
    assert s["system"] == ["you are", "helpful"]
    assert s["model"] == {"providerID": "p", "modelID": "m"}
    assert s["frozen_at"] == 12.5
    assert s["title"] == "hello" and s["turns"] == 3
    assert s["updated_at"] >= first_update

    journal.save_session("ses_1", turns=4)  # extra merged, other extras kept
    s = journal.session("ses_1")
    assert s is not None
    assert s["turns"] == 4 and s["title"] == "hello"
    assert s["system"] == ["you are", "helpful"]

    journal.save_session("ses_1", system=None, agent=None)  # explicit None clears
    s = journal.session("ses_1")
    assert s is not None
    assert s["system"] is None and s["agent"] is None
    assert s["model"] == {"providerID": "p", "modelID": "m"}

    with pytest.raises(ValueError, match="reserved"):
        journal.save_session("ses_1", updated_at=1.0)


def test_sessions_newest_updated_first(journal: Journal, path: Path) -> None:
    for sid in ["a", "b", "c"]:
        journal.save_session(sid, agent=sid)
    # Pin updated_at so the order doesn't depend on clock resolution.
    with raw(path) as conn:
        for sid, at in [("a", 3.0), ("b", 1.0), ("c", 2.0)]:
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (at, sid))
    assert [s["id"] for s in journal.sessions()] == ["a", "c", "b"]
    assert [s["id"] for s in journal.sessions(limit=2)] == ["a", "c"]
    journal.save_session("b", turns=1)  # now the most recently updated
    assert journal.sessions()[0]["id"] == "b"


def test_sessions_visible_to_other_journal(journal: Journal, path: Path) -> None:
    journal.save_session("ses_x", system=["s"], agent="plan")
    with Journal(path) as other:
        s = other.session("ses_x")
        assert s is not None and s["system"] == ["s"] and s["agent"] == "plan"


# --- schema ----------------------------------------------------------------------------------


def test_schema(journal: Journal, path: Path) -> None:
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"runs", "dispatches", "tool_calls", "sessions"} <= tables
        indexes = {
            row[0]: (row[1], [c[2] for c in conn.execute(f"PRAGMA index_info({row[0]})")])
            for row in conn.execute(
                "SELECT name, tbl_name FROM sqlite_master"
                " WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex%'"
            )
        }
        expected = {
            "runs": [
                ["started_at", "id"],
                ["stage", "started_at"],
                ["hook", "started_at"],
                ["session", "started_at"],
                ["dispatch_id", "started_at"],
                ["ok", "started_at"],
            ],
            "dispatches": [
                ["started_at", "id"],
                ["stage", "started_at"],
                ["session", "started_at"],
            ],
            "tool_calls": [
                ["started_at", "id"],
                ["tool", "started_at"],
                ["session", "started_at"],
            ],
            "sessions": [["updated_at", "id"]],
        }
        for table, column_lists in expected.items():
            have = [cols for tbl, cols in indexes.values() if tbl == table]
            for cols in column_lists:
                assert cols in have, (table, cols)
        # The filtered, ordered queries actually use an index.
        plan = " ".join(
            str(row[3])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT data FROM runs WHERE ok = 0"
                " ORDER BY started_at DESC, id DESC LIMIT 10"
            )
        )
        assert "runs_ok" in plan


def test_creates_parent_dir_and_reopens(path: Path) -> None:
    assert not path.parent.exists()
    with Journal(path) as journal:
        journal.record_run(make_run(1))
    assert path.exists()
    with Journal(path) as journal:  # schema already there: no error, data kept
        assert journal.counts()["runs"] == 1


def test_newer_schema_refused(path: Path) -> None:
    Journal(path).close()
    with raw(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer"):
        Journal(path)


# --- bounds: back-pressure, values stored once, retention by bytes ------------------------------


def test_a_full_queue_makes_the_caller_wait_for_the_writer(path: Path) -> None:
    from engine.journal.store import MAX_PENDING_ROWS

    with Journal(path) as journal:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")  # the writer cannot commit until this ends
        total = MAX_PENDING_ROWS + 50
        producer = threading.Thread(target=lambda: [journal.record_run(make_run(i)) for i in range(total)])
        producer.start()
        wait_for("the queue to fill", lambda: journal.pending >= MAX_PENDING_ROWS, timeout=4)
        producer.join(0.2)
        assert producer.is_alive(), "the caller went on although the writer was MAX_PENDING_ROWS behind"
        assert journal.pending <= MAX_PENDING_ROWS
        blocker.execute("ROLLBACK")
        blocker.close()
        producer.join(30)
        journal.flush()
        assert journal.counts()["runs"] == total
        assert journal.waits >= 1 and journal.last_error is None


def test_a_history_shared_by_runs_is_stored_once(journal: Journal, path: Path) -> None:
    history = [
        {"role": "user", "parts": [{"type": "text", "text": f"message {i} " + "x" * 500}]} for i in range(40)
    ]
    prompts = {"preamble": "p" * 5000, "chat": "c"}
    runs = [make_run(i, input={"hook": "idle", "prompts": prompts, "history": history}) for i in range(10)]
    for run in runs:
        journal.record_run(run)
    journal.flush()
    with raw(path) as conn:
        blobs = conn.execute("SELECT COUNT(*), SUM(LENGTH(data)) FROM blobs").fetchone()
        rows = conn.execute("SELECT MAX(LENGTH(data)) FROM runs").fetchone()[0]
    assert blobs[0] == 2  # the history and the prompts, once each
    assert blobs[1] > 20_000 and rows < 1000  # the rows only point at them
    assert journal.runs(limit=20) == list(reversed(runs))
    assert journal.run(runs[3].id) == runs[3]


def test_equal_prompts_read_anew_are_stored_once_and_changed_ones_again(journal: Journal, path: Path) -> None:
    """Every stage reads the prompts into a new dict: the same items are one blob, other items (or
    the same in another order, which encodes differently) another, and each run reads back its own."""
    prompts = {"preamble": "p" * 3000, "chat": "c"}
    inputs = [{"hook": "chat", "prompts": dict(prompts)} for _ in range(5)]
    inputs.append({"hook": "chat", "prompts": {**prompts, "chat": "changed"}})
    inputs.append({"hook": "chat", "prompts": {"chat": "c", "preamble": "p" * 3000}})
    # Small containers stay in the row; one of many small items is over the size and is a blob.
    inputs.append({"hook": "chat", "prompts": dict(prompts), "small": [1, 2, 3], "many": list(range(1000))})
    runs = [make_run(i, input=data) for i, data in enumerate(inputs)]
    for run in runs:
        journal.record_run(run)
    journal.flush()
    with raw(path) as conn:
        stored = conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
        small_inline = (
            "[1, 2, 3]" in conn.execute("SELECT data FROM runs WHERE id = ?", (runs[-1].id,)).fetchone()[0]
        )
    assert stored == 4  # the prompts, changed, reordered; and the long list
    assert small_inline
    assert [journal.run(r.id) for r in runs] == runs


def test_retention_by_bytes_keeps_the_file_under_the_limit(path: Path) -> None:
    limit = 2 * 1024 * 1024
    with Journal(path, max_runs=1_000_000, max_bytes=limit) as journal:
        for i in range(600):  # 600 runs of 20 KB each, every one different: 12 MB in all
            journal.record_run(make_run(i, input={"history": [f"{i}:" + "y" * 20_000]}))
            if i % 100 == 99:
                journal.flush()
                assert path.stat().st_size <= limit
        journal.flush()
        assert path.stat().st_size <= limit
        kept = journal.runs(limit=1000)
        assert kept[0].id == "run_000599" and len(kept) < 600  # the newest, not the oldest
        assert kept[0].input["history"][0].startswith("599:")
        assert journal.trimmed_rows == 600 - len(kept)
    with raw(path) as conn:  # every blob left is one a kept row uses
        referenced = {
            ref[-1]
            for (data,) in conn.execute("SELECT data FROM runs")
            for ref in json.loads(data).get("$blobs", [])
        }
        stored = {h for (h,) in conn.execute("SELECT hash FROM blobs")}
    assert stored == referenced


def test_a_smaller_limit_applies_when_the_journal_opens(path: Path) -> None:
    with Journal(path) as journal:
        for i in range(300):
            journal.record_run(make_run(i, stderr=f"{i}" + "z" * 20_000))
    assert path.stat().st_size > 5_000_000
    with Journal(path, max_bytes=1024 * 1024) as journal:
        journal.flush()
        assert path.stat().st_size <= 1024 * 1024
        assert journal.runs(limit=1)[0].id == "run_000299"


# --- no stored value makes a listing fail -------------------------------------------------------


def test_values_json_cannot_hold_are_stored_as_null(journal: Journal) -> None:
    journal.record_run(make_run(1, result={"x": float("nan"), "y": [float("inf")]}))
    journal.flush()
    stored = journal.run("run_000001")
    assert stored is not None and stored.result == {"x": None, "y": [None]}
    assert journal.last_error is None


def test_a_row_that_cannot_be_read_is_left_out_not_a_failed_listing(journal: Journal, path: Path) -> None:
    journal.record_run(make_run(1))
    journal.record_run(make_run(2))
    journal.flush()
    with raw(path) as conn:  # damaged by hand, or written by a broken engine
        conn.execute("UPDATE runs SET data = 'not json' WHERE id = 'run_000001'")
        conn.execute(
            "INSERT INTO runs (id, started_at, ok, data) VALUES ('run_bad', 5000, 1, ?)",
            ('{"id": "run_bad", "stage": 5}',),
        )
        conn.execute(
            "INSERT INTO runs (id, started_at, ok, data) VALUES ('run_nan', 6000, 1, ?)",
            ('{"id": "run_nan", "stage": "s", "hook": "h", "started_at": 6000, "input": {"x": NaN}}',),
        )
    runs = journal.runs()
    assert [r.id for r in runs] == ["run_nan", "run_000002"]
    assert strictjson.dumps([r.to_dict() for r in runs])  # and the answer encodes
    assert journal.last_error is not None


# --- tool calls recorded when they start ---------------------------------------------------------


def test_a_started_call_is_interrupted_until_it_ends(journal: Journal) -> None:
    call = make_tool(1)
    journal.tool_call_started(call, {"files": ["prompts/chat.md"], "message": "write prompt chat.md"})
    journal.tool_call_started(make_tool(2))
    journal.flush()
    found = journal.interrupted_tool_calls()
    assert [(c.id, i) for c, i in found] == [
        ("tool_000001", {"files": ["prompts/chat.md"], "message": "write prompt chat.md"}),
        ("tool_000002", {}),
    ]
    assert journal.tool_call("tool_000001") == call  # a listing shows it as it is
    journal.record_tool_call(make_tool(1, output="done"))
    journal.flush()
    assert [c.id for c, _ in journal.interrupted_tool_calls()] == ["tool_000002"]


# --- private by default, and older journals ------------------------------------------------------


def test_the_journal_is_readable_by_its_owner_only(path: Path) -> None:
    path.parent.mkdir(parents=True)
    sqlite3.connect(path).close()
    path.chmod(0o644)  # as an older engine created it
    with Journal(path) as journal:
        journal.record_run(make_run(1))
        journal.flush()
        for suffix in ["", "-wal", "-shm"]:
            assert stat.S_IMODE(Path(f"{path}{suffix}").stat().st_mode) == 0o600, suffix


def test_a_journal_of_the_previous_version_is_migrated(path: Path) -> None:
    from engine.journal.store import _SCHEMA_V1, _SCHEMA_V2

    path.parent.mkdir(parents=True)
    with raw(path) as conn:
        conn.executescript(_SCHEMA_V1 + _SCHEMA_V2)
        conn.execute("PRAGMA user_version = 2")
        conn.execute(
            "INSERT INTO tool_calls (id, started_at, tool, ok, data) VALUES ('c1', 1, 't', 1, ?)",
            (json.dumps({"id": "c1", "tool": "t", "args": {}, "started_at": 1}),),
        )
    with Journal(path) as journal:
        assert journal.tool_call("c1") is not None
        assert journal.interrupted_tool_calls() == []
    with raw(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental: it can shrink
