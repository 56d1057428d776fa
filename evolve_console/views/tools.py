"""View 6, tool calls: every call the agent (or an operator) made, with its arguments, its result or
error, how long it took, how it was permitted, and the change it produced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal

from engine.protocol import ToolCall

from ..describe import evidence_text
from ..detail import DetailPane, Part
from ..format import as_json, clock_time, date_time, duration
from ..model import ConsoleModel, Update
from ..model import Part as ModelPart
from ..table import KeyedTable
from .base import FOLLOW, MORE, OPEN, TableView

Namer = Callable[[str | None], str]


def call_status(call: ToolCall) -> Text:
    if call.output is None and call.error is None:
        return Text("running", style="yellow")
    if call.error is not None:
        denied = call.error.startswith("permission denied")
        return Text("denied" if denied else "failed", style="bold red")
    if call.pending:
        return Text("held", style="bold yellow")
    return Text("ok", style="green")


class ToolCallsView(TableView):
    """Every tool call, newest last, and the selected one in full."""

    NAME = "tools"
    LABEL = "Tool calls"
    PARTS = frozenset({ModelPart.TOOLS})
    BINDINGS: ClassVar[list[BindingType]] = [OPEN, FOLLOW, MORE]
    EMPTY = (
        "Tool calls appear here as the agent calls the tools its hooks and evolve give it (notes_add, "
        "evolve_hook_edit, …) in a session of a connected opencode, or as an operator runs one "
        "(evolve call)."
    )

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("time", "time"),
                    ("session", "session"),
                    ("tool", "tool"),
                    ("result", "result"),
                    ("duration", "duration"),
                    ("commit", "change"),
                ],
                id="tools-table",
                tells_following=True,
            )
            yield DetailPane("select a tool call", id="tool-detail", classes="detail")

    @staticmethod
    def row(call: ToolCall, name: Namer) -> tuple[str, list[Any]]:
        change = (call.commit or "")[:10] or (call.pending or "")
        return call.id, [
            clock_time(call.started_at),
            name(call.session),
            call.tool,
            call_status(call),
            duration(call.duration_ms) if call.output is not None else "-",
            change,
        ]

    def show_call(self, call: ToolCall, name: Namer) -> None:
        head = Text()
        head.append(call.tool, style="bold")
        head.append(f"  {call_status(call).plain}")
        head.append(f"\nsession {name(call.session)} ({call.session or '-'}) · call {call.call_id or '-'}")
        head.append(f"\nat {date_time(call.started_at)} · took {duration(call.duration_ms)}")
        head.append(f"\npermission: {call.permission or 'not recorded'}")
        if call.commit:
            head.append(f"\nchange: commit {call.commit[:12]} (enter: its session; 5: the changes)")
        elif call.pending:
            head.append(f"\nchange: held for review as {call.pending}")
        context = call.context or {}
        parts = [
            Part(
                "said",
                "what the agent said before the call",
                str(context.get("text") or ""),
                empty="(nothing)",
            ),
        ]
        if context.get("reasoning"):
            parts.append(Part("reasoning", "its reasoning", str(context["reasoning"])))
        parts.append(Part("args", "arguments", as_json(call.args)))
        parts.append(
            Part("output", "error" if call.error else "result", call.output or "", empty="(still running)")
        )
        if call.validation is not None:
            parts.append(Part("validation", "validation", evidence_text(call.validation)))
        self.query_one(DetailPane).show(head, parts)

    def draw(self, part: ModelPart) -> None:
        name = self.agent.name_session
        self.table.replace_all([self.row(c, name) for c in self.model.tool_calls.values()])

    def apply(self, update: Update) -> None:
        if update.tools:
            name = self.agent.name_session
            self.table.upsert([self.row(c, name) for c in update.tools])

    def highlighted(self, key: str) -> None:
        call = self.model.tool_calls.get(key)
        if call is not None:
            self.show_call(call, self.agent.name_session)

    @classmethod
    def session_of(cls, model: ConsoleModel, key: str | None) -> str | None:
        found = model.tool_calls.get(key) if key else None
        return found.session if found else None
