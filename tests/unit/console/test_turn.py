"""The turn behind a change, assembled from its session's records on plain data: which tool call made
the change, and which hook runs belong to that call's turn. (Fetching them from a real engine and
showing the turn is `test_operator_loop.py`'s
test_enter_on_a_change_opens_its_turn_with_its_runs_and_leads_to_a_run_or_the_session.)"""

from __future__ import annotations

from engine.protocol import Change, HookRun, PendingChange, SessionInfo, StageResult, ToolCall
from engine.protocol.records import Provenance
from evolve_console.model import ChangeEntry
from evolve_console.turn import assemble_turn, making_call

SHA = "c" * 40


def change(
    *, sha: str | None = SHA, call: str | None = None, provenance: Provenance | None = None, at: float = 500.0
) -> ChangeEntry:
    if sha is None:  # a change held for review
        return ChangeEntry.pending(
            PendingChange(
                id="p1",
                file="prompts/chat.md",
                base_sha256="0" * 64,
                message="edit prompt chat.md",
                tool="evolve_prompt_edit",
                session="ses_a",
                call_id=call,
                hook=None,
                created_at=at,
                content=None,
                provenance=provenance,
            )
        )
    return ChangeEntry.commit(
        Change(
            sha=sha,
            time=at,
            message="edit prompt chat.md",
            subject="edit prompt chat.md",
            trailers={"session": "ses_a", **({"call": call} if call else {})},
            files=["prompts/chat.md"],
            origin="agent",
            provenance=provenance,
        )
    )


def tool_call(n: int, *, call_id: str, commit: str | None = None, turn: str | None = None) -> ToolCall:
    return ToolCall(
        id=f"tc{n}",
        tool="evolve_prompt_edit",
        args={},
        started_at=100.0 * n,
        session="ses_a",
        call_id=call_id,
        commit=commit,
        turn=turn,
    )


def run(n: int, at: float, stage: str = "observe_message") -> HookRun:
    return HookRun(id=f"run{n}", stage=stage, hook="notes.py", started_at=at, input={}, session="ses_a")


def dispatch(n: int, turn: str, runs: list[str]) -> StageResult:
    return StageResult(id=f"d{n}", stage="idle", started_at=0.0, context={}, turn=turn, runs=runs)


# Two turns of one session, oldest first: the first closes with its idle at 250, the second at 450.
RUNS = [
    run(1, 150.0),
    run(2, 250.0, "idle"),
    run(3, 350.0),
    run(4, 400.0, "mutate_request"),
    run(5, 450.0, "idle"),
    run(6, 550.0),
]
CALLS = [
    tool_call(1, call_id="call_1", turn="msg_1"),
    tool_call(3, call_id="call_3", commit=SHA, turn="msg_2"),
    tool_call(4, call_id="call_4"),
]


def ids(runs: list[HookRun]) -> list[str]:
    return [r.id for r in runs]


def test_the_call_that_recorded_the_commit_made_it() -> None:
    assert making_call(change(), CALLS) is CALLS[1]
    unknown_id = change(call="call_9", provenance=Provenance(tool="x", args={}, call_id="call_9"))
    assert making_call(unknown_id, CALLS) is CALLS[1], "the commit is enough"


def test_else_the_call_its_provenance_names_else_its_call_trailer() -> None:
    by_provenance = change(
        sha=None, call="call_1", provenance=Provenance(tool="x", args={}, call_id="call_4")
    )
    assert making_call(by_provenance, CALLS) is CALLS[2]
    assert making_call(change(sha="d" * 40, call="call_1"), CALLS) is CALLS[0]
    assert making_call(change(sha="d" * 40), CALLS) is None
    assert making_call(change(sha=None, call="call_9"), CALLS) is None


def test_the_runs_of_the_turn_the_engine_marked_come_in_order() -> None:
    dispatches = [dispatch(1, "msg_1", ["run1", "run2"]), dispatch(2, "msg_2", ["run5", "run3", "run4"])]
    session = SessionInfo(id="ses_a", title="the session")
    turn = assemble_turn(change(), CALLS, RUNS, dispatches, session)
    assert turn.call is CALLS[1]
    assert ids(turn.runs) == ["run3", "run4", "run5"], "the turn's runs, oldest first"
    assert turn.session is session
    assert turn.change.key == SHA


def test_an_unmarked_turn_is_the_window_around_the_call() -> None:
    # The call (at 300) was made before dispatches were marked with turns: the runs after the turn
    # that closed before it, up to and with the run that closed its own.
    turn = assemble_turn(change(), CALLS, RUNS, [dispatch(1, "msg_1", ["run1", "run2"])], None)
    assert ids(turn.runs) == ["run3", "run4", "run5"]
    assert turn.session is None


def test_without_a_call_the_window_is_around_the_provenance_time_else_the_change_time() -> None:
    at_provenance = change(sha="d" * 40, provenance=Provenance(tool="x", args={}, at=200.0), at=500.0)
    assert ids(assemble_turn(at_provenance, CALLS, RUNS, [], None).runs) == ["run1", "run2"]
    at_change = change(sha="d" * 40, at=500.0)
    assert assemble_turn(at_change, CALLS, RUNS, [], None).call is None
    assert ids(assemble_turn(at_change, CALLS, RUNS, [], None).runs) == ["run6"]
