"""Tool calls, as the agent or an operator made them, and what validating a hook edit found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import JSONDict, Record, known_fields
from .changes import Evidence


@dataclass
class ToolCall(Record):
    """One call of a tool, as the agent or an operator made it: one of evolve's own (a builtin or a
    hook tool, `origin` "evolve") or one of opencode's (its built-in tools and other plugins' tools,
    `origin` "opencode", recorded from what the plugin sees of it)."""

    id: str
    tool: str
    args: JSONDict  # what the tool received (after a before_tool hook's rewrite)
    started_at: float
    session: str | None = None
    call_id: str | None = None
    output: str | None = None  # what the model received (after an after_tool hook's replacement)
    error: str | None = None  # set when the call was refused or failed; the first line of the output
    commit: str | None = None  # sha of the commit the call produced, if any
    duration_ms: float = 0.0
    pending: str | None = None  # the pending change it produced, under the review gate
    origin: str = "evolve"  # evolve: evolve's own tool; opencode: a tool of opencode
    title: str | None = None  # opencode's title of the call, when it gives one
    # The permission decision when known: not asked, asked (not decided yet), allowed or denied; and
    # by whom: rule (opencode's permission config), user, opencode, or hook <file> (on_permission).
    permission: str | None = None
    permission_by: str | None = None
    model_args: JSONDict | None = None  # what the model asked for, when a before_tool hook rewrote it
    tool_output: str | None = None  # what the tool returned, when an after_tool hook replaced it
    changed_by: list[str] = field(default_factory=list)  # e.g. "before_tool: args", "after_tool: result"
    context: JSONDict | None = None  # what the agent said in the turn before the call: {text, reasoning}
    turn: str | None = None  # the user message whose turn made the call, when known
    validation: Evidence | None = None  # the test run behind a hook change

    @classmethod
    def from_dict(cls, data: JSONDict) -> ToolCall:
        known = known_fields(cls, data)
        evidence = known.get("validation")
        known["validation"] = Evidence.from_dict(evidence) if isinstance(evidence, dict) else None
        return cls(**known)


@dataclass
class ValidationRun(Record):
    hook: str
    ok: bool
    output: str


# ---- what the API takes and answers about them ---------------------------------------------------


@dataclass
class ToolCallList(Record):
    """`GET /v1/tool-calls`: tool calls, newest first."""

    tool_calls: list[ToolCall] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> ToolCallList:
        return cls([ToolCall.from_dict(c) for c in data.get("tool_calls") or []])


@dataclass
class ToolSpecInfo(Record):
    """A tool as the agent sees it (`GET /v1/tools`, `evolve tools --json`)."""

    name: str
    description: str
    parameters: JSONDict  # its JSON Schema
    origin: str  # "builtin" or the hook file name
    permission: JSONDict | None = None  # {"arg": ...}
    asks: bool = False  # whether a call asks opencode's permission system first


@dataclass
class ToolList(Record):
    """`GET /v1/tools`: every tool the agent gets."""

    tools: list[ToolSpecInfo] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> ToolList:
        return cls([ToolSpecInfo.from_dict(t) for t in data.get("tools") or []])


@dataclass
class PermissionRequest(Record):
    """`POST /v1/tools/{name}/permission`: what a call would ask opencode's permission system."""

    args: JSONDict = field(default_factory=dict)
    call_id: str | None = None


@dataclass
class PermissionAnswer(Record):
    ask: JSONDict | None = None  # {permission, patterns}, or None: no ask


@dataclass
class ToolCallRequest(Record):
    """`POST /v1/tools/{name}/call`: a call of one of evolve's tools."""

    args: JSONDict = field(default_factory=dict)
    session: str | None = None
    call_id: str | None = None
    origin: str | None = None  # tool (the agent, the default) or operator
    history: list[Any] | None = None  # the session's messages, as opencode has them
    context: JSONDict | None = None  # what the agent said before the call: {text, reasoning}
    permission: str | None = None  # how opencode permitted it
    refused: str | None = None  # opencode's reason when it refused (recorded, not run)
    turn: str | None = None  # the user message whose turn makes the call
