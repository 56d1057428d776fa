"""Tools as the agent sees and calls them: the builtins and the hooks' tools, their schemas and
permissions, argument validation, running them, and committing what they changed.

A tool's answer is the text the agent reads. A failure is raised as `ToolFailed` with that text (the
texts follow the original host, so agents and tests written for it keep working) and recorded as the
call's `error`; nothing is inferred from how an answer begins.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.changes.commits import CommitFailed, Commits
from engine.changes.provenance import evidence, provenance
from engine.changes.textdiff import unified_diff
from engine.core.activity import Activity
from engine.core.bus import EventBus
from engine.hooks import validation
from engine.hooks.discovery import HookFile, HookTool
from engine.hooks.registry import HookRegistry
from engine.journal.store import Journal, JournalFailing
from engine.protocol.events import EventKind
from engine.protocol.records import (
    Attempt,
    HookRun,
    PendingChange,
    Provenance,
    ToolCall,
    ToolSpecInfo,
    ValidationRun,
    new_id,
)
from engine.protocol.stages import HookProtocol
from engine.tools.builtins import BUILTINS, HEARTBEAT_BUILTINS, dumps_result
from engine.tools.evaltools import EVAL_BUILTINS
from engine.tools.host import CallContext, EditFailed, EvalControl, HeartbeatControl, ToolFailed
from engine.tools.schema import permission_patterns, validate_args
from engine.workspace.config import Config
from engine.workspace.layout import Workspace, write_atomic

log = logging.getLogger("evolve.tools")

CallOne = Callable[..., Awaitable[HookRun]]
Hold = Callable[[str, bytes, str, str, "CallContext", "str | None", "Provenance | None"], PendingChange]
Notify = Callable[[str | None, list[str]], Awaitable[str | None]]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the agent sees it, with the permission it asks opencode for."""

    name: str
    description: str
    schema: dict[str, Any]
    origin: str  # "builtin" or the hook file name
    permission: dict[str, Any] | None = None  # {"arg": ...} spec, for display

    def info(self) -> ToolSpecInfo:
        return ToolSpecInfo(
            self.name,
            self.description,
            self.schema,
            self.origin,
            self.permission,
            # Whether a call asks opencode's permission system first (every hook tool does).
            asks=self.origin != "builtin" or self.permission is not None or self.name == "evolve_tool_invoke",
        )

    def to_dict(self) -> dict[str, Any]:
        return self.info().to_dict()


class Tools:
    def __init__(
        self,
        *,
        workspace: Workspace,
        config: Callable[[], Config],
        env: Mapping[str, str],
        registry: HookRegistry,
        call_one: CallOne,
        commits: Commits,
        hold: Hold,
        notify: Notify,
        heartbeat_time: Callable[[], str | None],
        session_title: Callable[[str], str | None],
        journal: Journal | None,
        bus: EventBus,
        activity: Activity,
        heartbeat: HeartbeatControl | None = None,
        attempted: Callable[[Attempt], None] | None = None,
        evals: EvalControl | None = None,
    ) -> None:
        """`heartbeat`: what hcp's heartbeat tools control (none: they say it lives in the running
        engine); `attempted`: told of each change the agent tried that its test rejected; `evals`: what
        the eval tools run (offered with `evals_agent_tools`)."""
        self.workspace = workspace
        self._config = config
        self._env = env
        self.registry = registry
        self._call_one = call_one
        self._commits = commits
        self._hold = hold
        self._notify = notify
        self._heartbeat_time = heartbeat_time
        self._session_title = session_title
        self._journal = journal
        self._bus = bus
        self._activity = activity
        # call id -> the result a before_tool hook gave for that call: the tool does not run.
        self._presets: dict[str, str] = {}
        self.heartbeat = heartbeat
        self._attempted = attempted
        self.evals = evals
        # Validations that run at once (each copies the workspace): made at the first one, with the
        # configuration of then (max_validations).
        self._validations: asyncio.Semaphore | None = None

    # ---- what the agent sees ----------------------------------------------------------------

    def builtins(self) -> dict[str, Any]:
        """The builtins the agent gets: the 13, hcp's heartbeat tools when a hook is an hcp hook, the
        eval tools with `evals_agent_tools`."""
        found = dict(BUILTINS)
        if any(r.protocol is HookProtocol.HCP for r in self.registry.registrations.values()):
            found.update(HEARTBEAT_BUILTINS)
        if self._evals_offered():
            found.update(EVAL_BUILTINS)
        return found

    def _evals_offered(self) -> bool:
        return self.evals is not None and self._config().evals_agent_tools

    def specs(self) -> list[ToolSpec]:
        """Hook tools first, then the builtins, which win a name clash."""
        specs: dict[str, ToolSpec] = {}
        for tool in self.registry.hook_tools().values():
            specs[tool.name] = ToolSpec(
                tool.name,
                tool.description,
                tool.schema,
                tool.file,
                tool.permission if isinstance(tool.permission, dict) else None,
            )
        for b in self.builtins().values():
            specs[b.name] = ToolSpec(
                b.name,
                b.description,
                b.schema,
                "builtin",
                {"arg": b.permission_arg} if b.permission_arg else None,
            )
        return list(specs.values())

    def preset(self, call_id: str, result: str) -> None:
        """A before_tool hook answered this call with `result`: the tool will not run."""
        if len(self._presets) >= 1000:
            self._presets.pop(next(iter(self._presets)))
        self._presets[call_id] = result

    def permission_request(
        self, name: str, args: dict[str, Any], call_id: str | None = None
    ) -> dict[str, Any] | None:
        """What to ask opencode's permission system before running this call: `{permission,
        patterns}`, or None when the tool asks nothing (also when a hook already answered the call).
        `evolve_tool_invoke` asks exactly what the invoked tool would ask."""
        if call_id is not None and call_id in self._presets:
            return None
        builtin = BUILTINS.get(name) or (EVAL_BUILTINS.get(name) if self._evals_offered() else None)
        if builtin is not None:
            if builtin.permission_arg:
                value = args.get(builtin.permission_arg)
                return {
                    "permission": name,
                    "patterns": [value] if isinstance(value, str) and value else ["*"],
                }
            if name == "evolve_tool_invoke" and isinstance(args.get("name"), str):
                inner = args.get("args")
                return self.permission_request(args["name"], inner if isinstance(inner, dict) else {})
            return None
        tool = self.registry.hook_tools().get(name)
        if tool is None:
            return None
        return {"permission": name, "patterns": permission_patterns(tool.permission, args)}

    # ---- calls ------------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        args: dict[str, Any] | None,
        *,
        session: str | None = None,
        call_id: str | None = None,
        origin: str = "tool",
        context: dict[str, Any] | None = None,
        permission: str | None = None,
        permission_by: str | None = None,
        refused: str | None = None,
        turn: str | None = None,
    ) -> ToolCall:
        """Run a tool exactly as the agent would: argument validation, the tool, its commit.
        `context`: what the agent said in its turn before the call (kept as the provenance of a
        change it makes); `permission`: how the call was permitted, and `permission_by` who decided;
        `refused`: the call was denied before it could run (recorded, not run)."""
        args = {} if args is None else args
        call = ToolCall(
            id=new_id("call"),
            tool=name,
            args=args,
            started_at=time.time(),
            session=session,
            call_id=call_id,
            permission=permission,
            permission_by=permission_by,
            context=context,
            turn=turn,
        )
        started = time.perf_counter()
        self._bus.publish(call, EventKind.TOOL_CALL)
        ctx = CallContext(
            session=session, call_id=call_id, origin=origin, tool=name, args=args, context=context
        )
        if refused is not None:
            call.output = call.error = f"permission denied: {refused}"
            call.permission = permission or "denied"
            return self._finish(call, ctx, started)
        ctx.intent = lambda message, trailers, files: self._journal_intent(
            call, origin, message, trailers, files
        )
        if self._journal is not None:
            self._journal.tool_call_started(call)  # ended by _finish; a crash leaves it "interrupted"
        preset = self._presets.pop(call_id, None) if call_id else None
        with self._activity.running():
            try:
                if preset is not None:
                    call.output = preset
                    call.changed_by.append("before_tool: result")
                else:
                    call.output = await self._run(name, args, ctx)
            except ToolFailed as exc:
                call.output = str(exc)
                call.error = call.output.partition("\n")[0]
            except Exception as exc:  # a tool must answer the agent, never crash the engine
                log.exception("tool %s failed", name)
                call.output = call.error = f"error: {exc}"
        self._finish(call, ctx, started)
        if ctx.notify:
            await self._notify(session, ctx.notify)
        return call

    def _finish(self, call: ToolCall, ctx: CallContext, started: float) -> ToolCall:
        call.commit = ctx.commits[-1] if ctx.commits else None
        call.pending = ctx.pending
        call.validation = ctx.validation
        call.duration_ms = (time.perf_counter() - started) * 1000
        if self._journal is not None:
            self._journal.record_tool_call(call)
        self._bus.publish(call, EventKind.TOOL_RESULT)
        return call

    async def _journal_intent(
        self,
        call: ToolCall,
        origin: str,
        message: str,
        trailers: dict[str, str | None],
        files: list[str] | None,
    ) -> None:
        """The call is about to change the workspace: journal it (with the commit it will make) and
        wait until that is on disk. A crash from here on leaves a record a restart finds."""
        if self._journal is None:
            return
        intent = {"origin": origin, "message": message, "trailers": trailers, "files": files}
        self._journal.tool_call_started(call, intent)
        try:
            await asyncio.to_thread(self._journal.flush)
        except JournalFailing as exc:  # no record of the change: refused, nothing is changed
            raise ToolFailed(
                f"error: the journal cannot write ({exc}): nothing was changed; the engine takes "
                "changes again once its journal can write"
            ) from exc
        except TimeoutError:  # the journal is slow: the change goes ahead, as it would without one
            log.warning("tool call %s: the journal did not confirm its start in time", call.id)

    def _provenance(self, ctx: CallContext) -> Provenance:
        return provenance(
            tool=ctx.tool,
            args=ctx.args,
            session=ctx.session,
            session_title=self._session_title(ctx.session) if ctx.session else None,
            call_id=ctx.call_id,
            context=ctx.context,
            validation=ctx.validation,
            at=time.time(),
        )

    def _attempt(
        self, shown: str, old: str, new: str, message: str, ctx: CallContext, hook: str, output: str
    ) -> Attempt:
        """The record of an edit its test rejected: what it proposed, why, and what the test said."""
        return Attempt(
            id=new_id("att"),
            file=shown,
            created_at=time.time(),
            message=message,
            tool=ctx.tool,
            session=ctx.session,
            call_id=ctx.call_id,
            hook=hook,
            review=self._config().review,
            provenance=self._provenance(ctx),
            diff=unified_diff(old, new, shown),
            output=output,
        )

    async def _run(self, name: str, args: dict[str, Any], ctx: CallContext) -> str:
        builtin = BUILTINS.get(name) or HEARTBEAT_BUILTINS.get(name)
        if builtin is None and self._evals_offered():
            builtin = EVAL_BUILTINS.get(name)
        if builtin is not None:
            errors = validate_args(builtin.schema, args)
            if errors:
                raise ToolFailed(f"error: invalid arguments for {name}: " + "; ".join(errors))
            return await builtin.run(self, args, ctx)
        if name in self.registry.hook_tools():
            return await self.run_hook_tool(name, args, ctx)
        raise ToolFailed(f"unknown tool: {name}")

    async def run_hook_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> str:
        """execute_tool on the owning hook only, after validating the arguments."""
        tool = self.registry.hook_tools().get(name)
        if tool is None:
            hook, _, short = name.partition("_")
            owners = [r for r in self.registry.registrations.values() if r.name == hook]
            if owners and short:
                raise ToolFailed(f"unknown tool: {name} (hook {hook} has no tool {short})")
            raise ToolFailed(f"unknown tool: {name}")
        errors = validate_args(tool.schema, args)
        if errors:
            raise ToolFailed(f"tool error: invalid arguments for {name}: " + "; ".join(errors))
        reg = self.registry.registrations.get(tool.file)
        if reg is None:
            raise ToolFailed(f"unknown tool: {name}")
        git = self._commits.git
        message, trailers = f"update {tool.short}", {**ctx.trailers(), "Hook": tool.file}
        await ctx.about_to_change(message, trailers, None)
        # What was uncommitted before the tool ran is someone else's (a hand edit): keep it out of the
        # tool's commit unless the tool changed it further.
        before = await asyncio.to_thread(git.snapshot)
        run = await self._call_one(
            reg.file,
            "execute_tool",
            {"tool": tool.short, "args": args, "session": {"id": ctx.session}},
            session=ctx.session,
        )
        async with self._commits.lock:
            changed = await asyncio.to_thread(git.changed_since, before)
            if changed:
                made = await self._commits.commit_hook_changes(
                    message, trailers, changed, f"{name} (execute_tool of hooks/{tool.file})", ctx
                )
                for commit in made:
                    ctx.commits.append(commit.sha)
                    await self._commits.annotate(commit.sha, self._provenance(ctx))
        if not run.ok:
            raise ToolFailed(f"tool error: {run.error}")
        result = run.result or {}
        notify = result.get("notify")
        if isinstance(notify, list):
            ctx.notify.extend(str(n) for n in notify if n)
        return dumps_result(result.get("result"))

    # ---- what builtins need (builtins.ToolHost) ---------------------------------------------

    def hooks(self) -> list[HookFile]:
        return self.registry.hooks

    def hook_tools(self) -> dict[str, HookTool]:
        return self.registry.hook_tools()

    def canonical_hook(self, path: os.PathLike[str] | str) -> str:
        return self.registry.canonical(path)

    def heartbeat_time(self) -> str | None:
        return self._heartbeat_time()

    async def validate_hook(self, hook: str, content: str) -> validation.Validation:
        """`hook` is the canonical name: where the content lives in hooks/."""
        reg = self.registry.registration_for(hook)
        config = self._config()
        if self._validations is None:
            self._validations = asyncio.Semaphore(config.max_validations)
        return await validation.validate(
            self.workspace.root,
            hook,
            content,
            reg.test if reg else None,
            config.hook_timeout,
            self._env,
            self._validations,
        )

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
    ) -> str:
        """Read-modify-write an existing file under the write lock, validate hooks, commit.

        Files are never created, but with `create` (a scenario of evals/). For a hook, the new
        content must pass the hook's test; then the file is installed executable, committed, and the
        hook re-discovered.
        """
        # Write through a symbolic link to its target (which safe_path keeps inside the workspace).
        target = Path(os.path.realpath(path))
        async with self._commits.lock:
            if not target.is_file() and not (create and not target.exists()):
                raise ToolFailed(f"error: not found: {shown}")
            old = target.read_text(encoding="utf-8", errors="surrogateescape") if target.is_file() else ""
            try:
                new = change(old)
            except EditFailed as exc:
                raise ToolFailed(str(exc)) from exc
            try:
                new.encode("utf-8", errors="surrogateescape")  # the bytes it read come back as they were
            except UnicodeEncodeError as exc:
                raise ToolFailed(
                    f"error: the new content of {shown} holds text a file cannot (an unpaired surrogate "
                    f"at character {exc.start}, such as half an emoji); nothing was written"
                ) from exc
            if hook is not None:
                result = await self.validate_hook(hook, new)
                ctx.validation = evidence(result)
                if not result.ok:
                    self._bus.publish(ValidationRun(hook, False, result.output))
                    if self._attempted is not None and ctx.origin == "tool":
                        self._attempted(self._attempt(shown, old, new, message, ctx, hook, result.output))
                    raise ToolFailed("validation failed:\n" + result.output)
            if ctx.origin == "tool" and self._config().review == "gate":
                held = self._hold(
                    shown,
                    old.encode("utf-8", "surrogateescape"),
                    new,
                    message,
                    ctx,
                    hook,
                    self._provenance(ctx),
                )
                ctx.pending = held.id
                return (
                    f"{shown}: the change passed validation and awaits review by the operator "
                    f"(pending change {held.id}); it takes effect only once approved"
                )
            if hook is not None:
                mode = 0o755
            else:
                mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
            trailers = {**ctx.trailers(), "File": shown}
            await ctx.about_to_change(message, trailers, [shown])
            await asyncio.to_thread(write_atomic, target, new.encode("utf-8", errors="surrogateescape"), mode)
            try:
                commit = await self._commits.commit(message, trailers, [shown])
            except CommitFailed as exc:
                self._commits.owe(message, trailers, [shown])
                success += (
                    f" (warning: not committed to git yet: {exc}; it is committed with this call's "
                    "attribution as soon as git lets the engine)"
                )
            else:
                if commit:
                    ctx.commits.append(commit.sha)
                    await self._commits.annotate(commit.sha, self._provenance(ctx))
        if hook is not None:
            await self.registry.discover()
        return success
