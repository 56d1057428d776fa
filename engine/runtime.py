"""The engine: one workspace's hooks, tools, sessions, git history and journal, put together.

Everything the command line (and later the HTTP API) does goes through an `Engine`:
`start()`, `dispatch()`, `request_system()`, `tool_specs()`, `call_tool()`, `close()`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import validation
from .builtins import BUILTINS, EditFailed, dumps_result
from .config import Config, ConfigIssue, load_config
from .discovery import HookFile, HookTool, Registration, Skipped, registration_from, scan_hooks
from .dispatch import Dispatcher
from .events import EventBus
from .gitstore import Commit, GitError, GitStore
from .journal import Journal
from .locks import WorkspaceLock
from .records import HookRun, StageResult, ToolCall, new_id
from .runner import execute
from .schema import permission_patterns, validate_args
from .sessions import SessionStore
from .workspace import StateFile, Workspace, write_atomic

log = logging.getLogger("evolve")

# How tool outputs that report a failure begin (the texts follow the original host, §117-§133).
FAILURE_PREFIXES = ("error:", "tool error:", "unknown tool:", "validation failed", "failed:")


@dataclass
class CallContext:
    """Who is calling a tool: the opencode session and tool call id, or an operator."""

    session: str | None = None
    call_id: str | None = None
    origin: str = "tool"  # tool | operator
    tool: str | None = None
    commits: list[str] = field(default_factory=list)
    notify: list[str] = field(default_factory=list)

    def trailers(self) -> dict[str, str | None]:
        return {"Origin": self.origin, "Tool": self.tool, "Session": self.session, "Call": self.call_id}


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the agent sees it, with the permission it asks opencode for."""

    name: str
    description: str
    schema: dict[str, Any]
    origin: str  # "builtin" or the hook file name
    permission: dict[str, Any] | None = None  # {"arg": ...} spec, for display

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.schema,
            "origin": self.origin,
            "permission": self.permission,
            # Whether a call asks opencode's permission system first (every hook tool does, §144).
            "asks": self.origin != "builtin"
            or self.permission is not None
            or self.name == "evolve_tool_invoke",
        }


class Engine:
    def __init__(self, root: Path, env: dict[str, str] | None = None, journal: bool = True) -> None:
        self.workspace = Workspace(root)
        self.env = dict(os.environ if env is None else env)
        self.bus = EventBus()
        self.state = StateFile(self.workspace.state_file)
        self.git = GitStore(root)
        loaded = load_config(self.workspace.config_file, self.env)
        self.config: Config = loaded.config
        self.config_errors: list[ConfigIssue] = loaded.errors
        self.config_warnings: list[ConfigIssue] = loaded.warnings
        self.journal = Journal(self.workspace.journal_file, self.config.journal_max_runs) if journal else None
        self.sessions = SessionStore(self.journal)
        self.hooks: list[HookFile] = []
        self.skipped: list[Skipped] = []
        self.registrations: dict[str, Registration] = {}  # by hook file name, in discovery order
        self.dispatcher = Dispatcher(self.workspace, self.hooks_for, self._run_hook)
        self.write_lock = WorkspaceLock(self.workspace.state_dir / "write.lock")
        self._inflight = 0
        self._settle_task: asyncio.Task[None] | None = None
        self._settle_stages: set[str] = set()
        self._settle_sessions: set[str] = set()
        self._settle_since: float | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._last_model: dict[str, str] | None = None
        self.commit_error: str | None = None  # why the last commit failed, if it did
        self.shutdown_requested = asyncio.Event()
        from .bridge import Bridge  # the bridge needs the engine's type only for checking

        self.bridge = Bridge(self)
        from .changes import Changes

        self.changes = Changes(self)
        from .bridge import HeartbeatOpencode
        from .heartbeat import Heartbeat

        self.heartbeat = Heartbeat(self, HeartbeatOpencode(self.bridge))
        # Delivers a formatted notification to one session (through opencode, when connected).
        self.deliver: Callable[[str, str], Any] | None = self.bridge.deliver

    # ---- life cycle -------------------------------------------------------------------------

    async def start(self, watch: bool = False, heartbeat: bool = False) -> None:
        """Repository first (opencode resolves the project from .git, §165), then discovery."""
        self.workspace.state_dir.mkdir(parents=True, exist_ok=True)
        for issue in self.config_errors:
            self._warn("config", str(issue))
        try:
            async with self.write_lock:
                initial = await asyncio.to_thread(self.git.ensure)
            if initial:
                self._published_commit(initial)
            await self.commit_external()
        except GitError as exc:
            self._warn("git", str(exc))
        await self.discover()
        if watch:
            from .watcher import watch_workspace

            self._watcher = asyncio.create_task(watch_workspace(self))
        if heartbeat:
            self.heartbeat.start()

    async def close(self) -> None:
        await self.heartbeat.stop()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
        if self._settle_task is not None:  # the last commit of what hooks changed
            await asyncio.gather(self._settle_task, return_exceptions=True)
        await self.bridge.close()
        if self.journal is not None:
            self.journal.close()

    def reload_config(self) -> None:
        loaded = load_config(self.workspace.config_file, self.env, base=self.config)
        self.config, self.config_errors, self.config_warnings = loaded.config, loaded.errors, loaded.warnings
        for issue in loaded.errors:
            self._warn("config", f"{issue} (keeping the last good value)")
        self.bus.publish(
            "config", {"config": self.config.to_dict(), "errors": [str(e) for e in loaded.errors]}
        )
        self.heartbeat.reschedule()  # heartbeat_ms may have changed

    def _warn(self, source: str, message: str) -> None:
        log.warning("%s: %s", source, message)
        self.bus.publish("warning", {"source": source, "message": message})

    def note_model(self, model: dict[str, str]) -> None:
        """Remember the last chat model (the heartbeat's fallback); persisted when it changes (§87)."""
        model = {"providerID": model["providerID"], "modelID": model["modelID"]}
        self._last_model = model
        if self.state.read().get("model") != model:
            self.state.update({"model": model})

    def last_model(self) -> dict[str, str] | None:
        """config.model, else the state file's model, else the last model seen in chat (§178)."""
        if self.config.model is not None:
            return self.config.model.to_dict()
        stored = self.state.read().get("model")
        if isinstance(stored, dict) and stored.get("providerID") and stored.get("modelID"):
            return {"providerID": str(stored["providerID"]), "modelID": str(stored["modelID"])}
        return self._last_model

    def on_opencode_connected(self) -> None:
        """Called when a shim announces an opencode process (the heartbeat starts from here)."""
        self.heartbeat.connected()

    def request_shutdown(self) -> None:
        self.shutdown_requested.set()

    def status(self) -> dict[str, Any]:
        return {
            "workspace": str(self.workspace.root),
            "pid": os.getpid(),
            "config": self.config.to_dict(),
            "config_errors": [str(e) for e in self.config_errors],
            "config_warnings": [str(e) for e in self.config_warnings],
            "hooks": [
                {
                    "file": r.file.name,
                    "name": r.name,
                    "test": r.test,
                    "tools": [t.name for t in r.tools],
                    "problems": r.problems,
                }
                for r in self.registrations.values()
            ],
            "skipped": [{"file": s.name, "reason": s.reason} for s in self.skipped],
            "opencode": [c.conn.to_dict() for c in self.bridge.connections.values()],
            "sessions": len(self.sessions.known()),
            "journal": self.journal.counts() if self.journal is not None else None,
            "model": self.last_model(),
            "busy": self.busy,
            "heartbeat": self.heartbeat.status(),
        }

    def session_view(self, session_id: str, history: bool) -> dict[str, Any]:
        s = self.sessions.get(session_id)
        view: dict[str, Any] = {
            "id": s.id,
            "title": self.bridge.titles.get(s.id),
            "system": s.system,
            "frozen_at": s.frozen_at,
            "agent": s.agent,
            "model": s.model,
            "notifications": s.notifications,
            "busy": self.bridge.busy.get(s.id, False),
            "history_length": len(s.history),
        }
        if history:
            view["history"] = s.history
        return view

    # ---- hooks ------------------------------------------------------------------------------

    async def discover(self) -> None:
        """Scan hooks/ and run `discover` on every hook in parallel (registration order stays the
        discovery order)."""
        hooks, skipped = scan_hooks(self.workspace.hooks_dir)
        regs = await asyncio.gather(*(self._discover_one(h) for h in hooks))
        self.hooks, self.skipped = hooks, skipped
        self.registrations = {r.file.name: r for r in regs}
        for s in skipped:
            self._warn("hooks", f"hooks/{s.name} skipped: {s.reason}")
        for r in regs:
            for problem in r.problems:
                self._warn("hooks", f"hooks/{r.file.name}: {problem}")
        self.bus.publish(
            "hooks_discovered",
            {
                "hooks": [
                    {
                        "file": r.file.name,
                        "name": r.name,
                        "test": r.test,
                        "tools": [t.name for t in r.tools],
                        "problems": r.problems,
                    }
                    for r in regs
                ],
                "skipped": [{"file": s.name, "reason": s.reason} for s in skipped],
            },
        )

    async def _discover_one(self, hook: HookFile) -> Registration:
        run = await self._run_hook(hook, "discover", {"hook": "discover"}, None, None)
        reg = registration_from(hook, run.result, run.error)
        reg.run_id = run.id
        return reg

    async def _run_hook(
        self,
        hook: HookFile,
        stage: str,
        payload: dict[str, Any],
        session: str | None,
        dispatch_id: str | None,
    ) -> HookRun:
        run = HookRun(
            id=new_id("run"),
            stage=stage,
            hook=hook.name,
            started_at=time.time(),
            input=payload,
            session=session,
            dispatch_id=dispatch_id,
        )
        self.bus.publish(
            "hook_run_started", {"id": run.id, "stage": stage, "hook": hook.name, "session": session}
        )
        await execute(
            run,
            hook.path,
            cwd=self.workspace.root,
            timeout_ms=self.config.hook_timeout,
            stdout_limit=self.config.hook_output_limit,
            env=self.env,
        )
        if run.stderr:
            log.info("hooks/%s %s stderr: %s", hook.name, stage, run.stderr.rstrip()[-2000:])
        if self.journal is not None:
            self.journal.record_run(run)
        self.bus.publish("hook_run", run.to_dict())
        return run

    def inject_runs(self, count: int, stdout_bytes: int = 0) -> int:
        """Record `count` synthetic hook runs exactly as real ones are recorded (journal + events);
        the console's load benchmark feeds on them."""
        now = time.time()
        line = '{"result": "' + "x" * max(stdout_bytes - 14, 0) + '"}'
        for i in range(count):
            failed = i % 17 == 0
            run = HookRun(
                id=new_id("run"),
                stage="load",
                hook="load.sh",
                started_at=now,
                input={"hook": "load", "n": i},
                session="load",
                stdout_lines=[line],
                result=None if failed else {"result": "ok"},
                exit_code=1 if failed else 0,
                duration_ms=1.0,
                error="exit 1" if failed else None,
            )
            if self.journal is not None:
                self.journal.record_run(run)
            self.bus.publish("hook_run", run.to_dict())
        return count

    def hook_tools(self) -> dict[str, HookTool]:
        """Every hook tool by full name; a later registration with the same name wins (§33)."""
        tools: dict[str, HookTool] = {}
        for reg in self.registrations.values():
            for tool in reg.tools:
                tools[tool.name] = tool
        return tools

    def _canonical_hook(self, hook: str) -> str:
        from .builtins import hook_name
        from .paths import PathRefused, safe_path

        try:
            return hook_name(self, safe_path(self.workspace.hooks_dir, hook, "hooks"))
        except PathRefused:
            return hook  # refused later by the tool itself; the pattern is what was asked

    def hooks_for(self, stage: str) -> list[HookFile]:
        """The hooks to run for `stage`, in discovery order: all, except those whose discover
        declared the stages they handle and left this one out (no process start for nothing)."""
        out = []
        for hook in self.hooks:
            reg = self.registrations.get(hook.name)
            if reg is None or reg.handles(stage):
                out.append(hook)
        return out

    def registration_for(self, hook: str) -> Registration | None:
        """The registration of the hook whose content is hooks/<hook> (also through a symbolic link)."""
        reg = self.registrations.get(hook)
        if reg is not None:
            return reg
        real = os.path.realpath(self.workspace.hooks_dir / hook)
        return next((r for r in self.registrations.values() if os.path.realpath(r.file.path) == real), None)

    # ---- stages -----------------------------------------------------------------------------

    async def dispatch(
        self,
        stage: str,
        context: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        settle: bool = True,
    ) -> StageResult:
        """Run `stage` on every hook, merge, recover; journal it; commit what the hooks changed
        (unless the caller commits itself: `settle=False`)."""
        history = self.sessions.history(session) if session is not None else None
        self._inflight += 1
        try:
            result = await self.dispatcher.dispatch(stage, context, session=session, history=history)
        finally:
            self._inflight -= 1
        if self.journal is not None:
            self.journal.record_dispatch(result)
        self.bus.publish("stage", result.to_dict())
        if settle:
            self._settle(stage, session, result.started_at)
        return result

    async def request_system(self, session: str, system: list[str]) -> list[str] | None:
        """The system prompt for a chat LLM request (§75-§85, SPEC A.6): the session's frozen prompt,
        or mutate_request's answer, frozen if non-empty. None means: keep opencode's own."""
        frozen = self.sessions.frozen(session)
        if frozen is not None:
            return frozen
        result = await self.dispatch(
            "mutate_request", {"session": {"id": session}, "system": system}, session=session
        )
        proposed = result.merged.get("system")
        if isinstance(proposed, list) and proposed and all(isinstance(s, str) for s in proposed):
            self.sessions.freeze(session, proposed)
            self.bus.publish("session_frozen", {"session": session, "system": proposed})
            return proposed
        return None

    def compaction_prompt(self, result: StageResult) -> str | None:
        """`prompt` from the hooks, else prompts/compaction.md (§96)."""
        prompt = result.merged.get("prompt")
        if isinstance(prompt, str) and prompt:
            return prompt
        return self.workspace.read_prompt("compaction") or None

    def heartbeat_user(self, result: StageResult) -> str | None:
        """`user` from the hooks, else the trimmed prompts/heartbeat.md (§187)."""
        user = result.merged.get("user")
        if isinstance(user, str) and user:
            return user
        return self.workspace.read_prompt("heartbeat").strip() or None

    async def notify(self, source: str | None, notifications: list[str]) -> str | None:
        """Format notifications with format_notification and deliver them to every other known
        session (§166-§171, SPEC A.14). Returns the formatted message, if any."""
        if not notifications:
            return None
        result = await self.dispatch("format_notification", {"notifications": notifications})
        message = result.merged.get("message")
        if not isinstance(message, str) or not message:
            return None
        text = f"<system-reminder>\n<assistant-notification>{message}</assistant-notification>\n</system-reminder>"
        recipients = [s.id for s in self.sessions.known() if s.id != source]
        for sid in recipients:
            self.sessions.get(sid).notifications.append(message)
        self.bus.publish("notification", {"source": source, "message": message, "recipients": recipients})
        if self.deliver is not None:
            for sid in recipients:
                try:
                    outcome = self.deliver(sid, text)
                    if asyncio.iscoroutine(outcome):
                        await outcome
                except Exception as exc:  # one failed session must not stop the others (§171)
                    self._warn("notify", f"delivery to {sid} failed: {exc}")
        return message

    # ---- git --------------------------------------------------------------------------------

    def _published_commit(self, commit: Commit) -> None:
        self.bus.publish(
            "commit", {"sha": commit.sha, "message": commit.message, "files": list(commit.files)}
        )

    async def commit(
        self, message: str, trailers: dict[str, str | None], paths: list[str] | None = None
    ) -> Commit | None:
        """Commit `paths` (everything uncommitted when None) with evolve's trailers."""
        self.commit_error = None
        try:
            commit = await asyncio.to_thread(self.git.commit, message, trailers, paths)
        except GitError as exc:
            self.commit_error = str(exc)
            self._warn("git", str(exc))
            return None
        if commit:
            self._published_commit(commit)
        return commit

    def _settle(self, stage: str, session: str | None, started_at: float) -> None:
        """Commit what hooks changed during stages, coalesced, off the caller's path."""
        if stage == "discover":
            return
        self._settle_since = min(self._settle_since or started_at, started_at)
        self._settle_stages.add(stage)
        if session:
            self._settle_sessions.add(session)
        if self._settle_task is None or self._settle_task.done():
            self._settle_task = asyncio.create_task(self._settle_now())

    async def _settle_now(self) -> None:
        await asyncio.sleep(0)  # let stages finishing in the same tick join this commit
        stages, sessions = sorted(self._settle_stages), sorted(self._settle_sessions)
        since, self._settle_since = self._settle_since, None
        self._settle_stages, self._settle_sessions = set(), set()
        async with self.write_lock:
            # Only what changed since the stages began: an older hand edit stays for its own
            # external-change commit.
            files = await asyncio.to_thread(self.git.changed_after, (since or time.time()) - 0.05)
            if files:
                await self.commit(
                    f"hooks changed files during {', '.join(stages)}",
                    {"Origin": "hook", "Stage": " ".join(stages), "Session": " ".join(sessions)},
                    files,
                )

    async def commit_external(self) -> Commit | None:
        """Commit changes nobody in the engine made (a person editing a hook), separately."""
        async with self.write_lock:
            files = await asyncio.to_thread(self.git.dirty_files)
            if not files:
                return None
            shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
            return await self.commit(f"external change: {shown}", {"Origin": "external"})

    @property
    def busy(self) -> bool:
        return (
            self._inflight > 0
            or self.write_lock.locked()
            or bool(self._settle_task and not self._settle_task.done())
        )

    # ---- tools ------------------------------------------------------------------------------

    def tool_specs(self) -> list[ToolSpec]:
        """Hook tools first, then the builtins, which win a name clash (§116)."""
        specs: dict[str, ToolSpec] = {}
        for tool in self.hook_tools().values():
            specs[tool.name] = ToolSpec(
                tool.name,
                tool.description,
                tool.schema,
                tool.file,
                tool.permission if isinstance(tool.permission, dict) else None,
            )
        for b in BUILTINS.values():
            specs[b.name] = ToolSpec(
                b.name,
                b.description,
                b.schema,
                "builtin",
                {"arg": b.permission_arg} if b.permission_arg else None,
            )
        return list(specs.values())

    def permission_request(self, name: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """What to ask opencode's permission system before running this call: `{permission,
        patterns}`, or None when the tool asks nothing. `evolve_tool_invoke` asks exactly what the
        invoked tool would ask (SPEC A.3)."""
        builtin = BUILTINS.get(name)
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
        tool = self.hook_tools().get(name)
        if tool is None:
            return None
        return {"permission": name, "patterns": permission_patterns(tool.permission, args)}

    async def call_tool(
        self,
        name: str,
        args: dict[str, Any] | None,
        *,
        session: str | None = None,
        call_id: str | None = None,
        origin: str = "tool",
    ) -> ToolCall:
        """Run a tool exactly as the agent would: argument validation, the tool, its commit."""
        args = {} if args is None else args
        call = ToolCall(
            id=new_id("call"), tool=name, args=args, started_at=time.time(), session=session, call_id=call_id
        )
        started = time.perf_counter()
        self.bus.publish("tool_call", call.to_dict())
        ctx = CallContext(session=session, call_id=call_id, origin=origin, tool=name)
        self._inflight += 1
        try:
            builtin = BUILTINS.get(name)
            if builtin is not None:
                errors = validate_args(builtin.schema, args)
                if errors:
                    call.output = f"error: invalid arguments for {name}: " + "; ".join(errors)
                    call.error = call.output
                else:
                    call.output = await builtin.run(self, args, ctx)
            elif name in self.hook_tools():
                call.output = await self.run_hook_tool(name, args, ctx)
            else:
                call.output = f"unknown tool: {name}"
                call.error = call.output
        except Exception as exc:  # a tool must answer the agent, never crash the engine
            log.exception("tool %s failed", name)
            call.output = f"error: {exc}"
            call.error = call.output
        finally:
            self._inflight -= 1
        if call.error is None and call.output.startswith(FAILURE_PREFIXES):
            call.error = call.output.partition("\n")[0]
        call.commit = ctx.commits[-1] if ctx.commits else None
        call.duration_ms = (time.perf_counter() - started) * 1000
        if self.journal is not None:
            self.journal.record_tool_call(call)
        self.bus.publish("tool_result", call.to_dict())
        if ctx.notify:
            await self.notify(session, ctx.notify)
        return call

    async def run_hook_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> str:
        """execute_tool on the owning hook only (§101-§105), after validating the arguments."""
        tool = self.hook_tools().get(name)
        if tool is None:
            hook, _, short = name.partition("_")
            owners = [r for r in self.registrations.values() if r.name == hook]
            if owners and short:
                return f"unknown tool: {name} (hook {hook} has no tool {short})"
            return f"unknown tool: {name}"
        errors = validate_args(tool.schema, args)
        if errors:
            return f"tool error: invalid arguments for {name}: " + "; ".join(errors)
        reg = self.registrations.get(tool.file)
        if reg is None:
            return f"unknown tool: {name}"
        # What was uncommitted before the tool ran is someone else's (a hand edit): keep it out of the
        # tool's commit unless the tool changed it further.
        before = await asyncio.to_thread(self.git.snapshot)
        run = await self.dispatcher.call_one(
            reg.file,
            "execute_tool",
            {"tool": tool.short, "args": args, "session": {"id": ctx.session}},
            session=ctx.session,
            history=self.sessions.history(ctx.session) if ctx.session else None,
        )
        async with self.write_lock:
            changed = await asyncio.to_thread(self.git.changed_since, before)
            commit = (
                await self.commit(f"update {tool.short}", {**ctx.trailers(), "Hook": tool.file}, changed)
                if changed
                else None
            )
        if commit:
            ctx.commits.append(commit.sha)
        if not run.ok:
            return f"tool error: {run.error}"
        result = run.result or {}
        notify = result.get("notify")
        if isinstance(notify, list):
            ctx.notify.extend(str(n) for n in notify if n)
        return dumps_result(result.get("result"))

    async def validate_hook(self, hook: str, content: str) -> validation.Validation:
        """`hook` is the canonical name (builtins.hook_name): where the content lives in hooks/."""
        reg = self.registration_for(hook)
        return await validation.validate(
            self.workspace.root, hook, content, reg.test if reg else None, self.config.hook_timeout, self.env
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
    ) -> str:
        """Read-modify-write an existing file under the write lock, validate hooks, commit.

        Files are never created (§130). For a hook, the new content must pass the hook's test;
        then the file is installed executable, committed, and the hook re-discovered.
        """
        # Write through a symbolic link to its target (which safe_path keeps inside the workspace).
        target = Path(os.path.realpath(path))
        async with self.write_lock:
            if not target.is_file():
                return f"error: not found: {shown}"
            old = target.read_text(encoding="utf-8", errors="surrogateescape")
            try:
                new = change(old)
            except EditFailed as exc:
                return str(exc)
            if hook is not None:
                result = await self.validate_hook(hook, new)
                if not result.ok:
                    self.bus.publish("validation", {"hook": hook, "ok": False, "output": result.output})
                    return "validation failed:\n" + result.output
            if ctx.origin == "tool" and self.config.review == "gate":
                held = self.changes.hold(
                    shown, old.encode("utf-8", "surrogateescape"), new, message, ctx, hook
                )
                return (
                    f"{shown}: the change passed validation and awaits review by the operator "
                    f"(pending change {held.id}); it takes effect only once approved"
                )
            mode = 0o755 if hook is not None else stat.S_IMODE(target.stat().st_mode)
            await asyncio.to_thread(write_atomic, target, new.encode("utf-8", errors="surrogateescape"), mode)
            commit = await self.commit(message, {**ctx.trailers(), "File": shown}, [shown])
            if commit:
                ctx.commits.append(commit.sha)
            elif self.commit_error:
                success += (
                    f" (warning: not committed to git: {self.commit_error}; it will be in the next commit)"
                )
        if hook is not None:
            await self.discover()
        return success

    async def after_files_changed(self, files: list[str]) -> None:
        """Hooks, prompts or config changed by an operator action: re-discover and reload at once."""
        if any(f.startswith("hooks/") for f in files):
            await self.discover()
        if "config/evolve.jsonc" in files:
            self.reload_config()
