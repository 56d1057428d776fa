"""What the operator is told of a heartbeat fired or a stage run by hand, on plain data. (Both, made
against a real engine through the console, are in `test_actions.py`.)"""

from __future__ import annotations

from typing import Any

from engine.protocol import StageResult, TickResult
from evolve_console.controls import stage_summary, tick_said


def tick(outcome: str, reason: str | None) -> TickResult:
    return TickResult(trigger="manual", started_at=1.0, outcome=outcome, reason=reason)


def dispatched(stage: str, **fields: Any) -> StageResult:
    return StageResult.from_dict({"id": "dsp_1", "stage": stage, "started_at": 1.0, "context": {}, **fields})


def test_a_tick_reads_its_outcome_and_reason_and_warns_unless_ok() -> None:
    assert tick_said(tick("ok", None)) == ("heartbeat ok", "information")
    assert tick_said(tick("skipped", "no opencode is connected")) == (
        "heartbeat skipped: no opencode is connected",
        "warning",
    )
    assert tick_said(tick("failed", "")) == ("heartbeat failed", "warning")


def test_a_stage_run_by_hand_counts_its_hooks_and_names_failures_and_recover() -> None:
    assert stage_summary("idle", dispatched("idle", hooks=["a.py", "b.py"], merged={})) == "idle: 2 hooks"
    assert stage_summary("idle", dispatched("idle")) == "idle: 0 hooks"
    assert (
        stage_summary(
            "mutate_request",
            dispatched(
                "mutate_request", hooks=["a.py", "b.py", "c.py"], failed=["a.py", "c.py"], recovered=True
            ),
        )
        == "mutate_request: 3 hooks, failed: a.py, c.py, recover stepped in"
    )
