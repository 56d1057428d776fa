"""What happens around each tool call the agent makes in opencode: the record of the call, the stages
of both protocols (opencode-evolve's observational tool_before/tool_after in the background, hcp's
before_tool/after_tool awaited when a hook handles them), a tool error (on_error), and opencode's
permission requests (on_permission, answered through opencode's reply route).

The shim awaits a tool stage only when the engine said a hook handles it (the connect answer and the
`x-evolve-handled` header of every answer), so a workspace whose hooks do not pays nothing per call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from engine.core.background import Background
from engine.hooks.protocols import DECISIONS
from engine.opencode.loops import Loops
from engine.opencode.toolcalls import OpencodeCalls
from engine.protocol.records import StageResult
from engine.protocol.stages import Stage
from engine.tools.builtins import dumps_result

Dispatch = Callable[..., Coroutine[Any, Any, StageResult]]
ReplyPermission = Callable[[str, str, "str | None", "str | None"], Awaitable[None]]
MAX_SEEN = 1000


@dataclass
class Seen:
    """A call as the before-hook saw it: the hcp stages after it and on_permission need it."""

    session: str | None
    tool: str
    args: Any
    own: bool
    started: float


class ToolStages:
    def __init__(
        self,
        *,
        dispatch: Dispatch,
        handled: Callable[[str], bool],
        calls: OpencodeCalls,
        loops: Loops,
        background: Background,
        preset: Callable[[str, str], None],
        reply_permission: ReplyPermission,
        connection_of: Callable[[str | None], str | None],
        command_of: Callable[[str | None], str | None],
    ) -> None:
        self._dispatch = dispatch
        self._handled = handled
        self.calls = calls
        self._loops = loops
        self._background = background
        self._preset = preset
        self._reply_permission = reply_permission
        self._connection_of = connection_of
        self._command_of = command_of
        self._seen: dict[str, Seen] = {}  # by opencode's call id
        self._asked: dict[str, str | None] = {}  # permission request id -> call id
        self._decided: set[str] = set()  # permission requests an on_permission hook answered
        self._deciders: dict[str, str] = {}  # call id -> who answered its permission request

    def _remember(self, call_id: str, seen: Seen) -> None:
        if len(self._seen) >= MAX_SEEN:
            self._seen.pop(next(iter(self._seen)))
        self._seen[call_id] = seen

    # ---- before the tool runs -----------------------------------------------------------------

    def accept_before(
        self, session: str | None, tool: str, call_id: str | None, args: Any, own: bool
    ) -> None:
        """A call begins: recorded, and opencode-evolve's tool_before dispatched in the background."""
        if call_id:
            self._remember(call_id, Seen(session, tool, args, own, time.perf_counter()))
            if not own:
                self.calls.started(session, tool, call_id, args)
        if self._handled(Stage.TOOL_BEFORE):
            context = {"session": {"id": session}, "tool": tool, "callID": call_id, "args": args}
            self._background.spawn(
                self._dispatch("tool_before", context, session=session), "tool_before", busy=True
            )

    async def before_tool(
        self, session: str | None, tool: str, call_id: str | None, args: Any, own: bool
    ) -> dict[str, Any]:
        """hcp's before_tool, awaited: what the shim must do, `{"deny": reason}` (it refuses the call)
        or `{"args": {...}}` (it rewrites them), or `{}`."""
        self.accept_before(session, tool, call_id, args, own)
        if not self._handled(Stage.BEFORE_TOOL):
            return {}
        context = {
            "session": {"id": session},
            "tool": tool,
            "call_id": call_id,
            "args": args,
            "turn": self._loops.turn(session),
            # opencode checks permissions inside the tool, after this hook: no rule has matched yet.
            "pattern_matched": None,
        }
        merged = (await self._dispatch("before_tool", None, session=session, hcp_context=context)).merged
        deny = merged.get("deny")
        if isinstance(deny, str) and deny:
            if call_id:
                self.calls.changed(call_id, "before_tool: deny")
            return {"deny": deny}
        answer: dict[str, Any] = {}
        new_args = merged.get("args")
        if isinstance(new_args, dict) and new_args != args:
            answer["args"] = new_args
            if call_id:
                self.calls.rewritten(call_id, new_args, "before_tool: args")
                seen = self._seen.get(call_id)
                if seen is not None:
                    seen.args = new_args
        if "result" in merged and merged["result"] is not None:
            text = dumps_result(merged["result"])
            if own and call_id:
                # evolve runs its own tools: the tool does not run, the hook's result is its answer.
                self._preset(call_id, text)
            else:
                # opencode 1.18 cannot skip one of its tools' execution from a plugin: the call is
                # refused instead, with the hook's result as the text the model receives.
                if call_id:
                    self.calls.changed(call_id, "before_tool: result (refused: opencode runs its own tools)")
                return {"deny": text}
        return answer

    # ---- after it ran ---------------------------------------------------------------------------

    def _duration_ms(self, call_id: str | None) -> float | None:
        seen = self._seen.get(call_id) if call_id else None
        return (time.perf_counter() - seen.started) * 1000 if seen else None

    async def after_tool(
        self,
        session: str | None,
        tool: str,
        call_id: str | None,
        args: Any,
        title: Any,
        output: Any,
        wait: bool,
    ) -> dict[str, Any]:
        """The tool returned: opencode-evolve's tool_after in the background, hcp's after_tool awaited
        when asked (`wait`); `{"result": text}` replaces what the model receives."""
        if self._handled(Stage.TOOL_AFTER):
            context = {
                "session": {"id": session},
                "tool": tool,
                "callID": call_id,
                "title": title,
                "output": output,
            }
            self._background.spawn(
                self._dispatch("tool_after", context, session=session), "tool_after", busy=True
            )
        text = output if isinstance(output, str) else dumps_result(output)
        seen = self._seen.pop(call_id, None) if call_id else None
        replaced: str | None = None
        if wait and self._handled(Stage.AFTER_TOOL):
            duration = (time.perf_counter() - seen.started) * 1000 if seen else None
            context = {
                "session": {"id": session},
                "tool": tool,
                "call_id": call_id,
                "callID": call_id,
                "args": args if args is not None else (seen.args if seen else None),
                "result": text,
                "duration_ms": round(duration, 3) if duration is not None else None,
                "turn": self._loops.turn(session),
            }
            merged = (await self._dispatch("after_tool", None, session=session, hcp_context=context)).merged
            if merged.get("result") is not None:
                replaced = (
                    dumps_result(merged["result"])
                    if not isinstance(merged["result"], str)
                    else merged["result"]
                )
                if call_id:
                    self.calls.changed(call_id, "after_tool: result")
        if call_id:
            self.calls.finished(
                call_id,
                replaced if replaced is not None else text,
                title=title if isinstance(title, str) else None,
                tool_output=text if replaced is not None else None,
            )
        return {"result": replaced} if replaced is not None else {}

    def tool_failed(self, session: str | None, call_id: str | None, tool: str | None, error: str) -> None:
        """opencode reported the call as failed (it never reaches after: opencode fires no
        tool.execute.after for a failed tool): recorded, and hcp's on_error in the background."""
        if call_id:
            self._seen.pop(call_id, None)
            # evolve's own tools are recorded by engine.tools when they run (one refused before it
            # ran, by a permission or a hook, is in opencode's session only).
            self.calls.failed(call_id, error)
        if self._handled(Stage.ON_ERROR):
            context = {
                "session": {"id": session},
                "phase": "tool",
                "error": error,
                "recoverable": True,
                "tool": tool,
                "call_id": call_id,
            }
            self._background.spawn(
                self._dispatch("on_error", None, session=session, hcp_context=context), "on_error", busy=True
            )

    # ---- permissions ------------------------------------------------------------------------------

    def permission_asked(self, props: dict[str, Any]) -> None:
        """opencode asks the user (`permission.asked`): recorded, and on_permission decides in the
        background when a hook handles it (except under `opencode run`, which refuses at once)."""
        request = props.get("id")
        if not isinstance(request, str):
            return
        tool_ref = props.get("tool")
        found = tool_ref.get("callID") if isinstance(tool_ref, dict) else None
        call_id = found if isinstance(found, str) else None
        if len(self._asked) >= MAX_SEEN:
            self._asked.pop(next(iter(self._asked)))
        self._asked[request] = call_id
        self.calls.permission(call_id, "asked", None)
        session = props.get("sessionID") if isinstance(props.get("sessionID"), str) else None
        if self._handled(Stage.ON_PERMISSION) and self._command_of(session) != "run":
            self._background.spawn(self._decide(request, call_id, session, props), "on_permission", busy=True)

    async def _decide(
        self, request: str, call_id: str | None, session: str | None, props: dict[str, Any]
    ) -> None:
        seen = self._seen.get(call_id) if call_id else None
        patterns = [p for p in props.get("patterns") or [] if isinstance(p, str)]
        context = {
            "session": {"id": session},
            "tool": seen.tool if seen else props.get("permission"),
            "args": seen.args if seen else {},
            "pattern_matched": patterns[0] if patterns else None,
            "permission": props.get("permission"),
            "patterns": patterns,
            "call_id": call_id,
        }
        merged = (await self._dispatch("on_permission", None, session=session, hcp_context=context)).merged
        decisions = [d for d in merged.get(DECISIONS) or [] if isinstance(d, dict)]
        chosen = next((d for d in decisions if d.get("decision") == "deny"), None) or next(
            (d for d in decisions if d.get("decision") == "allow"), None
        )
        if chosen is None:
            return  # ask, or no answer: opencode's own prompt decides
        allow = chosen["decision"] == "allow"
        by = f"hook {chosen['hook']}"
        # Noted before the reply: opencode goes on with the call as soon as it has it.
        self._decided.add(request)
        self._decider(call_id, by)
        self.calls.permission(call_id, "allowed" if allow else "denied", by)
        try:
            await self._reply_permission(
                request,
                "once" if allow else "reject",
                None if allow else chosen.get("reason"),
                self._connection_of(session),
            )
        except Exception:
            # opencode did not get the hook's answer: the request waits for someone else's.
            self._decided.discard(request)
            if call_id:
                self._deciders.pop(call_id, None)
            raise

    def permission_replied(self, props: dict[str, Any]) -> None:
        request = props.get("requestID")
        if not isinstance(request, str):
            return
        call_id = self._asked.pop(request, None)
        if request in self._decided:
            self._decided.discard(request)
            return
        session = props.get("sessionID") if isinstance(props.get("sessionID"), str) else None
        # `opencode run` has nobody to ask: it refuses every ask itself.
        by = "opencode" if self._command_of(session) == "run" else "user"
        self._decider(call_id, by)
        self.calls.permission(call_id, "denied" if props.get("reply") == "reject" else "allowed", by)

    def _decider(self, call_id: str | None, by: str) -> None:
        if not call_id:
            return
        if len(self._deciders) >= MAX_SEEN:
            self._deciders.pop(next(iter(self._deciders)))
        self._deciders[call_id] = by

    def own_permission(
        self, call_id: str | None, session: str | None, sent: str | None
    ) -> tuple[str | None, str | None]:
        """How the permission of a call of evolve's own tool was decided, and by whom: the shim
        reports what its ask to opencode came to (`allowed by opencode`, `denied by opencode`), and
        opencode's permission events, which the engine saw, tell who answered. A hook (`hook <file>`,
        on_permission) or the user (`user`; `opencode` under `opencode run`, which refuses every ask
        itself) when the ask was published; otherwise opencode's permission config (`rule`), and the
        shim's words stand."""
        if sent is None or not sent.startswith(("allowed", "denied")):
            return sent, None
        decision = "allowed" if sent.startswith("allowed") else "denied"
        by = self._deciders.pop(call_id, None) if call_id else None
        if by is None and call_id and call_id in self._asked.values():
            # Asked, and its answer (always a person's or opencode's: a hook's is noted before it is
            # given) is on its way to the engine.
            by = "opencode" if self._command_of(session) == "run" else "user"
        if by is None:
            return sent, "rule"
        return f"{decision} by {by}", by
