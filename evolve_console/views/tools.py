"""View 6, tool calls: every call the agent (or an operator) made, with its arguments, its result or
error, how long it took, how it was permitted, and the change it produced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from engine.protocol import ToolCall
from engine.protocol.records import Evidence

from ..detail import DetailPane, Part
from ..format import as_json, clock_time, date_time, duration, short
from ..table import KeyedTable

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


def evidence_text(evidence: Evidence) -> str:
    """The validation run behind a hook change, as a reviewer reads it."""
    counts = ", ".join(
        f"{n} {what}"
        for n, what in ((evidence.passed, "passed"), (evidence.failed, "failed"), (evidence.total, "in all"))
        if n is not None
    )
    exit_text = "did not finish" if evidence.exit_code is None else f"exit {evidence.exit_code}"
    head = f"{evidence.command}: {'passed' if evidence.ok else 'FAILED'} ({exit_text}, {duration(evidence.duration_ms)})"
    return head + (f"\ncounts: {counts}" if counts else "") + f"\n\n{evidence.output_tail}"


class ToolCallsView(Vertical):
    """Every tool call, newest last, and the selected one in full."""

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


def tool_summary(call: ToolCall) -> str:
    """One line for lists elsewhere (a turn, a session): the tool, its result, its change."""
    result = call_status(call).plain
    change = f" -> {call.commit[:10]}" if call.commit else ""
    return f"{clock_time(call.started_at)}  {call.tool}  {result}{change}  {short(as_json(call.args), 80)}"
