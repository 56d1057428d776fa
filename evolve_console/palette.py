"""The console's commands in the command palette (ctrl+p), with namespaced titles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import App
from textual.command import Hit, Hits, Provider

from .views import VIEWS


def _runner(app: App[Any], action: str) -> Callable[[], Any]:
    async def run() -> None:
        for step in action.split(";"):  # e.g. switch to a view, then act in it
            await app.run_action(step)

    return run


class EvolveCommands(Provider):
    COMMANDS: ClassVar[list[tuple[str, str, str]]] = [
        ("heartbeat: fire now", "fire_heartbeat", "run one heartbeat tick now"),
        ("heartbeat: pause or resume", "toggle_pause", "stop or restart the heartbeat timer"),
        ("change: approve selected", "approve", "record an approval of the selected change in git"),
        ("change: revert selected", "revert", "undo the selected change with a new commit"),
        ("change: reject selected pending change", "reject", "drop a change that awaits review"),
        ("change: replay selected", "replay", "what the change does to the agent's recorded traffic"),
        (
            "change: only what needs review",
            "show_tab('changes');toggle_needs_review",
            "hide what needs no look",
        ),
        (
            "go: the turn that made the selected change",
            "show_tab('changes');open",
            "its agent's words, call, runs",
        ),
        ("go: the session of the selected row", "open_session", "from a run, a tool call or a change"),
        ("go: back", "go_back", "to where the last enter came from"),
        ("stage: run by hand", "run_stage", "dispatch a stage to every hook with an input you edit"),
        ("runs: follow new runs", "show_tab('runs');follow", "jump to the newest run and keep following"),
        ("runs: failures only", "show_tab('runs');toggle_failures", "show only failed hook runs"),
        ("engine: show its problems", "problems", "config errors and warnings in full"),
        ("engine: start it", "start_engine", "start the workspace's engine when it is down"),
        *[(f"view: {label.lower()}", f"show_tab('{view}')", "") for view, _, label in VIEWS],
    ]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, action, help_text in self.COMMANDS:
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), _runner(self.app, action), help=help_text)
