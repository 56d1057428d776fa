"""Where enter leads from a row, on plain data: the session of a run, a tool call, a stage result or a
change, as the model knows it (each view says it for its rows: `View.session_of`)."""

from __future__ import annotations

from engine.protocol import Change, HookRun, StageResult, ToolCall
from evolve_console.model import ChangeEntry, ConsoleModel
from evolve_console.views import VIEWS, RunsView


def session_of(model: ConsoleModel, view: str, key: str | None, run: HookRun | None = None) -> str | None:
    """What the view named `view` says of its row `key` (`run`: the selected run in full)."""
    if run is not None:
        return RunsView.session_of(model, key, run)
    return next(v for v in VIEWS if view == v.NAME).session_of(model, key)


def test_the_session_of_the_selected_row_in_each_view() -> None:
    model = ConsoleModel()
    model.runs = {
        "r1": HookRun(id="r1", stage="idle", hook="a.py", started_at=1.0, input={}, session="ses_r")
    }
    model.tool_calls = {"t1": ToolCall(id="t1", tool="bash", args={}, started_at=1.0, session="ses_t")}
    model.dispatches = {"d1": StageResult(id="d1", stage="idle", started_at=1.0, context={}, session="ses_d")}
    model.changes = {
        "c1": ChangeEntry.commit(
            Change(
                sha="c1",
                time=1.0,
                message="m",
                subject="m",
                trailers={"session": "ses_c"},
                files=[],
                origin="agent",
            )
        )
    }
    assert session_of(model, "runs", "r1") == "ses_r"
    assert session_of(model, "tools", "t1") == "ses_t"
    assert session_of(model, "stages", "d1") == "ses_d"
    assert session_of(model, "changes", "c1") == "ses_c"
    # A key of another view's table, no key, or a view without sessions: none.
    assert session_of(model, "tools", "r1") is None
    assert session_of(model, "runs", None) is None
    assert session_of(model, "heartbeat", "r1") is None
    # The selected run in full (fetched when selected) knows its session before the list does.
    full = HookRun(id="r2", stage="idle", hook="a.py", started_at=2.0, input={}, session="ses_full")
    assert session_of(model, "runs", "r2", full) == "ses_full"
    assert session_of(model, "runs", "r1", full) == "ses_r", "the full run is another row's"
