"""What a builtin tool is given: who calls it (`CallContext`), what it may use of the engine
(`ToolHost`, which engine.tools.Tools provides), and how it reports a failure (`ToolFailed`)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.hooks.discovery import HookFile, HookTool
from engine.protocol.records import Evidence
from engine.workspace.layout import Workspace


@dataclass
class CallContext:
    """Who is calling a tool: the opencode session and tool call id, or an operator."""

    session: str | None = None
    call_id: str | None = None
    origin: str = "tool"  # tool | operator
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] | None = None  # what the agent said in its turn before the call
    commits: list[str] = field(default_factory=list)
    pending: str | None = None  # the change held for review, under the review gate
    validation: Evidence | None = None  # the test run behind a hook change
    notify: list[str] = field(default_factory=list)
    # Told, before the call changes the workspace, of the commit it is about to make (message,
    # trailers, files; None: whatever a hook changes); returns once that is journaled, so that a
    # restart after a crash can still make that commit (engine.recovery).
    intent: Callable[[str, dict[str, str | None], list[str] | None], Awaitable[None]] | None = None

    async def about_to_change(
        self, message: str, trailers: dict[str, str | None], files: list[str] | None
    ) -> None:
        if self.intent is not None:
            await self.intent(message, trailers, files)

    def trailers(self) -> dict[str, str | None]:
        return {"Origin": self.origin, "Tool": self.tool, "Session": self.session, "Call": self.call_id}


class ToolFailed(Exception):
    """A tool's answer that reports a failure: the exception's message is the text the agent sees."""


class EditFailed(ValueError):
    pass


class HeartbeatControl(Protocol):
    """What the heartbeat tools need of the heartbeat (engine.heartbeat.Heartbeat)."""

    def describe(self) -> str: ...
    def choose(
        self, interval_ms: int | None, enabled: bool | None, reset: bool, session: str | None
    ) -> str: ...
    def history_text(self, limit: int) -> str: ...


class EvalControl(Protocol):
    """What the eval tools need of the behaviour checks (engine.evals.service.Evals)."""

    def scenarios(self) -> tuple[list[Any], list[str]]: ...
    async def report(self, file: str, content: str, scenarios: Sequence[str] | None) -> str: ...


class ToolHost(Protocol):
    """What the builtins need from the engine."""

    workspace: Workspace
    heartbeat: HeartbeatControl | None
    evals: EvalControl | None

    def hooks(self) -> list[HookFile]: ...
    def hook_tools(self) -> dict[str, HookTool]: ...
    def canonical_hook(self, path: os.PathLike[str] | str) -> str: ...
    def heartbeat_time(self) -> str | None: ...
    async def validate_hook(self, hook: str, content: str) -> Any: ...
    async def run_hook_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> str: ...
    async def change_file(
        self,
        path: str | os.PathLike[str],
        shown: str,
        change: Callable[[str], str],
        *,
        message: str,
        success: str,
        ctx: CallContext,
        hook: str | None = None,
        create: bool = False,
    ) -> str: ...
