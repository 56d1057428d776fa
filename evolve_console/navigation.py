"""Where enter leads from a row: the session a hook run, a tool call, a stage result or a change
belongs to."""

from __future__ import annotations

from engine.protocol import HookRun

from .model import ConsoleModel


def session_of(model: ConsoleModel, view: str, key: str | None, run: HookRun | None = None) -> str | None:
    """The session of the row `key` of `view`, as the model knows it (`run`: the selected run in full,
    when it is that row); None when the row has none or is not known."""
    if view == "runs" and run is not None and run.id == key:
        return run.session
    if view == "runs" and key in model.runs:
        return model.runs[key].session
    if view == "tools" and key in model.tool_calls:
        return model.tool_calls[key].session
    if view == "stages" and key in model.dispatches:
        return model.dispatches[key].session
    if view == "changes" and key in model.changes:
        return model.changes[key].session
    return None
