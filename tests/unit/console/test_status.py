"""The console's one-line status texts on plain data: no engine process, no Textual app.

The connection bar while the engine answers and while it does not (how long it has been down, how to
start it, what only the engine knew shown as last known, dimmed, with its time), the configuration
errors, the runs' count line, and the view bar's badges."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from engine.protocol import Change, ConnectionInfo, EngineStatus, HeartbeatStatus, PendingChange
from evolve_console.model import ChangeEntry, ConsoleModel
from evolve_console.status import badges, connection_items, has_problems, problems_text, runs_line

NOW = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def connection_line(
    model: ConsoleModel, workspace: str | None, now: float, down_since: float | None, heard_at: float | None
) -> Text:
    """The top bar's pieces (`connection_items`) in one line, as the bar shows them when they fit."""
    text = Text(no_wrap=True, overflow="ellipsis")
    pieces, address = connection_items(model, workspace, now, down_since, heard_at)
    for item in [*pieces, *([address] if address else [])]:
        text.append_text(item)
    return text


def status(**fields: object) -> EngineStatus:
    heartbeat = HeartbeatStatus(
        enabled=True,
        interval_ms=900_000,
        connected=True,
        paused=False,
        running=False,
        next_at=None,
        next_in_s=None,
        count=0,
        count_threshold=10,
        tokens=None,
        tokens_threshold=None,
        cleanup="compact",
        session=None,
        time=None,
        model=None,
    )
    found = EngineStatus(
        workspace="/srv/ws",
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
        heartbeat=heartbeat,
    )
    return replace(found, **fields)  # type: ignore[arg-type]


def opencode(conn_id: str, mode: str) -> ConnectionInfo:
    return ConnectionInfo(id=conn_id, url="http://127.0.0.1:4096", directory="/p", mode=mode)


def model(connected: bool, detail: str = "http://127.0.0.1:8765 · pid 42", **fields: object) -> ConsoleModel:
    found = ConsoleModel()
    found.set_connection(connected, detail)
    if fields:
        found.status = status(**fields)
    return found


def styles(text: Text, part: str) -> set[str]:
    """The styles of the spans that cover `part` of `text`."""
    start = text.plain.index(part)
    return {str(s.style) for s in text.spans if s.start <= start < s.end}


# ---- the connection bar ----------------------------------------------------------------------------


def test_connected_names_the_engine_workspace_and_each_opencode_mode() -> None:
    line = connection_line(
        model(True, opencode=[opencode("a", "server"), opencode("b", "in-process"), opencode("c", "server")]),
        "/home/op/ws",
        NOW,
        None,
        NOW,
    )
    assert line.plain == (
        " engine ● connected  /srv/ws  opencode ● 3 connected (in-process, server)   "
        "http://127.0.0.1:8765 · pid 42"
    ), "the engine's own workspace, not the one the console was started for"
    assert "bold reverse green" in styles(line, "engine ● connected")
    assert "as of" not in line.plain and "start it" not in line.plain
    assert line.no_wrap and line.overflow == "ellipsis"


def test_connected_without_opencode_says_so_in_yellow() -> None:
    line = connection_line(model(True, opencode=[]), None, NOW, None, NOW)
    assert "opencode ○ not connected" in line.plain
    assert "bold reverse yellow" in styles(line, "opencode ○ not connected")


def test_a_journal_that_cannot_write_is_shown_in_red_until_it_writes_again() -> None:
    failing = connection_line(
        model(True, opencode=[], journal_failing="database or disk is full"), None, NOW, None, NOW
    )
    assert "journal failing: database or disk is full; the engine refuses new work" in failing.plain
    assert "bold red" in styles(failing, "journal failing")
    writes = connection_line(model(True, opencode=[], journal_failing=None), None, NOW, None, NOW)
    assert "journal" not in writes.plain


def test_engine_down_says_for_how_long_how_to_start_it_and_dims_what_was_last_known() -> None:
    line = connection_line(
        model(False, "the engine does not answer", opencode=[opencode("a", "server")]),
        "/home/op/ws",
        NOW,
        NOW - 125,
        NOW - 130,
    )
    assert line.plain == (
        " engine ○ down for 2 min 5 s  /srv/ws "
        " start it: evolve serve --workspace /home/op/ws (or E) "
        " opencode ● 1 connected (server)  (as of 22:11:10 UTC)"
    )
    assert "bold reverse red" in styles(line, "engine ○ down")
    assert "yellow" in styles(line, "start it")
    assert "dim reverse" in styles(line, "opencode ● 1 connected"), "last known opencode, dimmed"
    assert "dim" in styles(line, "(as of 22:11:10 UTC)")
    assert "does not answer" not in line.plain, "the way to start it, not the error"


def test_engine_down_before_it_ever_answered_shows_the_reason_and_no_last_known_time() -> None:
    # No workspace known (only an address): nothing to start, so why it does not answer, cut short.
    reason = "the engine at http://10.0.0.5:8765 does not answer (ConnectError) " + "x" * 100
    line = connection_line(model(False, reason), None, NOW, None, None)
    assert line.plain.startswith(" engine ○ down  the engine at http://10.0.0.5:8765 does not answer")
    assert "x" * 100 not in line.plain and "…" in line.plain, "the reason is cut at 80 characters"
    assert "opencode ○ not connected" in line.plain
    assert "dim reverse" in styles(line, "opencode ○ not connected")
    assert "as of" not in line.plain, "no status ever came: there is nothing last known"
    assert "start it" not in line.plain


def test_engine_down_before_its_status_came_names_the_workspace_to_start() -> None:
    line = connection_line(model(False, "connecting…"), "/home/op/ws", NOW, NOW - 3, NOW - 3)
    assert line.plain.startswith(" engine ○ down for 3 s  /home/op/ws  start it: evolve serve")
    assert "as of" not in line.plain


def test_config_errors_are_counted_in_bold_red_with_the_key_to_read_them() -> None:
    one = connection_line(model(True, config_errors=["bad"]), None, NOW, None, NOW)
    # Before the engine's address: the address is what the bar cuts when the line is short.
    assert one.plain.endswith(
        "  config: 1 error, last good config in use (c: read)  http://127.0.0.1:8765 · pid 42"
    )
    assert "bold red" in styles(one, "config: 1 error")
    two = connection_line(model(False, "down", config_errors=["a", "b"]), "/ws", NOW, NOW, NOW)
    assert two.plain.endswith("  config: 2 errors, last good config in use (c: read)")
    warned = connection_line(model(True, config_warnings=["w"]), None, NOW, None, NOW)
    assert "config:" not in warned.plain, "warnings alone are not shown in the bar"


def test_problems_are_the_errors_then_the_warnings_in_full() -> None:
    assert not has_problems(None)
    assert not has_problems(status())
    assert has_problems(status(config_warnings=["w"]))
    assert has_problems(status(config_errors=["e"]))
    assert problems_text(status(config_errors=["e1", "e2"], config_warnings=["w"])) == (
        "error: e1\n\nerror: e2\n\nwarning: w"
    )
    assert problems_text(status()) == "(none)"


# ---- the runs' count line ----------------------------------------------------------------------------


def test_runs_line_counts_the_journal_the_live_runs_and_the_rows_shown() -> None:
    found = model(True)
    found.counts = {"runs": 12345, "failed_runs": 1002}
    found.events_seen["hook_run"] = 1500
    assert runs_line(found, 1000, True, 0) == (
        "12,345 runs in the journal · 1,002 failed · 1,500 received live · showing 1,000"
    )
    assert runs_line(found, 1000, True, 7) == runs_line(found, 1000, True, 0), "following: nothing unseen"
    # The operator moved the cursor: the line says that new runs no longer move it, even before one came.
    # First, so that a line cut at a narrow terminal's width keeps it and its key.
    assert runs_line(found, 1000, False, 0) == "following paused (g to follow) · " + runs_line(
        found, 1000, True, 0
    )
    assert runs_line(found, 1000, False, 1234) == (
        "following paused · +1,234 new (g to follow) · "
        "12,345 runs in the journal · 1,002 failed · 1,500 received live · showing 1,000"
    )
    assert runs_line(model(False), 0, True, 0) == (
        "0 runs in the journal · 0 failed · 0 received live · showing 0"
    )
    one = model(True)
    one.counts = {"runs": 1, "failed_runs": 0}
    assert runs_line(one, 1, True, 0) == "1 run in the journal · 0 failed · 0 received live · showing 1"


# ---- the view bar's badges ---------------------------------------------------------------------------


def held(pending_id: str, state: str = "pending") -> ChangeEntry:
    return ChangeEntry.pending(
        PendingChange(
            id=pending_id,
            file="prompts/chat.md",
            base_sha256="0" * 64,
            message="edit prompt chat.md",
            tool="evolve_prompt_edit",
            session="ses_a",
            call_id="call_1",
            hook=None,
            created_at=3000.0,
            content=None,
            status=state,
        )
    )


def committed(sha: str, state: str) -> ChangeEntry:
    return ChangeEntry.commit(
        Change(
            sha=sha,
            time=1.0,
            message=sha,
            subject=sha,
            trailers={},
            files=["prompts/chat.md"],
            origin="agent",
            state=state,
        )
    )


def test_badges_name_failed_runs_unseen_and_changes_pending_or_unreviewed() -> None:
    found = model(True)
    assert badges(found) == {}
    found.failed_unseen = 3
    assert badges(found) == {"runs": "3 failed"}
    entries = [
        held("p1"),
        held("p2"),
        held("p3", "rejected"),
        committed("a", "unreviewed"),
        committed("b", "approved"),
    ]
    found.changes = {c.key: c for c in entries}
    assert badges(found) == {"runs": "3 failed", "changes": "2 pending · 1 unreviewed"}
    found.failed_unseen = 0
    found.changes = {c.key: c for c in entries[2:]}
    assert badges(found) == {"changes": "1 unreviewed"}
    found.changes = {c.key: c for c in entries[:1]}
    assert badges(found) == {"changes": "1 pending"}
