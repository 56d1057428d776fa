"""The tool calls opencode makes with its own tools (its built-ins and other plugins' tools), recorded
from what the plugin sees of them: journaled and published as `tool_call` when they start (and again
when their permission is asked or decided) and as `tool_result` when they end. evolve's own tools are
recorded by engine.tools when they run."""

from __future__ import annotations

import time
from typing import Any

from engine.core.bus import EventBus
from engine.journal.store import Journal
from engine.protocol.events import EventKind
from engine.protocol.opencode import RULE_DENIED_PREFIX
from engine.protocol.records import ToolCall, new_id

MAX_OPEN = 500  # calls kept while they run; a call that never ends (opencode exited) is dropped beyond


def first_line(text: str) -> str:
    return text.partition("\n")[0]


class OpencodeCalls:
    def __init__(self, journal: Journal | None, bus: EventBus) -> None:
        self._journal = journal
        self._bus = bus
        self._open: dict[str, ToolCall] = {}  # by opencode's call id
        self._clock: dict[str, float] = {}  # call id -> perf_counter at its start

    def _record(self, call: ToolCall, kind: EventKind) -> None:
        if self._journal is not None:
            self._journal.record_tool_call(call)
        self._bus.publish(call, kind)

    def started(
        self, session: str | None, tool: str, call_id: str, args: Any, origin: str = "opencode"
    ) -> ToolCall:
        call = self._open.get(call_id)
        if call is not None:
            return call
        if len(self._open) >= MAX_OPEN:
            oldest = next(iter(self._open))
            self._open.pop(oldest)
            self._clock.pop(oldest, None)
        call = ToolCall(
            id=new_id("call"),
            tool=tool,
            args=args if isinstance(args, dict) else {"args": args},
            started_at=time.time(),
            session=session,
            call_id=call_id,
            origin=origin,
        )
        self._open[call_id] = call
        self._clock[call_id] = time.perf_counter()
        self._record(call, EventKind.TOOL_CALL)
        return call

    def get(self, call_id: str | None) -> ToolCall | None:
        return self._open.get(call_id) if call_id else None

    def rewritten(self, call_id: str, args: dict[str, Any], by: str) -> None:
        call = self._open.get(call_id)
        if call is not None:
            if call.model_args is None:
                call.model_args = call.args
            call.args = args
            call.changed_by.append(by)

    def changed(self, call_id: str, by: str) -> None:
        call = self._open.get(call_id)
        if call is not None:
            call.changed_by.append(by)

    def permission(self, call_id: str | None, decision: str, by: str | None) -> None:
        """The call's permission was asked (`by` None) or decided."""
        call = self.get(call_id)
        if call is not None:
            call.permission, call.permission_by = decision, by
            self._record(call, EventKind.TOOL_CALL)

    def finished(
        self, call_id: str, output: str, *, title: str | None = None, tool_output: str | None = None
    ) -> ToolCall | None:
        """The tool returned; `output` is what the model receives, `tool_output` what the tool
        returned when a hook replaced it."""
        call = self._end(call_id)
        if call is None:
            return None
        call.output, call.title, call.tool_output = output, title, tool_output
        if call.permission in (None, "asked"):
            # It ran, so opencode's permission rules let it (an `ask` answered leaves its own decision).
            call.permission, call.permission_by = "allowed", call.permission_by or "rule"
        self._record(call, EventKind.TOOL_RESULT)
        return call

    def failed(self, call_id: str, error: str) -> ToolCall | None:
        """The tool failed or was refused (by a permission rule, a user, a hook's deny)."""
        call = self._end(call_id)
        if call is None:
            return None
        call.output = error
        call.error = first_line(error) or "failed"
        if error.startswith(RULE_DENIED_PREFIX):
            call.permission, call.permission_by = "denied", "rule"
        self._record(call, EventKind.TOOL_RESULT)
        return call

    def _end(self, call_id: str) -> ToolCall | None:
        call = self._open.pop(call_id, None)
        started = self._clock.pop(call_id, None)
        if call is not None and started is not None:
            call.duration_ms = (time.perf_counter() - started) * 1000
        return call
