"""The engine: one workspace's services, built and wired together, and their life cycle.

Each service gets what it needs and nothing more (the parts below, or callables), by keyword, and
only once what it is given exists; none of them sees the engine. docs/architecture.md draws the
parts and how a call flows through them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from engine.changes.attempts import Attempts
from engine.changes.commits import Commits, HeadMemory
from engine.changes.gate import Gate
from engine.changes.gitstore import GitError, GitStore
from engine.changes.history import Changes
from engine.changes.pending import PendingChanges, when_decided, when_held
from engine.changes.reach import answered
from engine.changes.recovery import Recovery
from engine.core.activity import Activity
from engine.core.background import Background
from engine.core.bus import EventBus
from engine.evals.gate import Gatekeeper
from engine.evals.service import Evals
from engine.failures.tracker import Failures
from engine.heartbeat.service import Clock, Heartbeat, Opencode
from engine.hooks.hookrun import HookRunner
from engine.hooks.protocols import fired_stages, hcp_input
from engine.hooks.registry import Fingerprints, HookRegistry, held_back_when_changed
from engine.hooks.stages import Stages
from engine.journal.store import Journal
from engine.opencode.bridge import Bridge
from engine.opencode.connections import Connections, OpencodeSessions
from engine.opencode.followups import Followups
from engine.opencode.loops import Loops
from engine.opencode.models import ModelMemory
from engine.opencode.notifier import Notifier
from engine.opencode.sessions import SessionStore
from engine.opencode.toolcalls import OpencodeCalls
from engine.opencode.toolstages import ToolStages
from engine.protocol.events import Event, EventKind
from engine.protocol.records import CommitInfo, ConfigChanged, EngineStatus, JSONDict, Notice
from engine.replay.replayer import Replayer
from engine.tools.toolbox import Tools
from engine.warm.starts import WarmStarts
from engine.workspace.config import Config, ConfigIssue, load_config
from engine.workspace.layout import StateFile, Workspace
from engine.workspace.locks import WorkspaceLock
from engine.workspace.watcher import Watcher

log = logging.getLogger("evolve")


class Engine:
    def __init__(
        self,
        root: Path,
        env: Mapping[str, str] | None = None,
        journal: bool = True,
        *,
        opencode: Opencode | None = None,
        clock: Clock | None = None,
        warm_start: bool = True,
    ) -> None:
        """`opencode` and `clock` replace the heartbeat's view of opencode and its time (tests);
        `warm_start=False` never keeps interpreters ready (a one-off command runs few hooks).

        Each service is built after everything it is given, so no callable handed out reaches a
        service not yet built. Where two services need each other, one of them learns of the other's
        work from the bus instead (`_listen`): a change held for review is replayed, the heartbeat's
        timer follows opencode's connections and the configuration."""
        self.workspace = ws = Workspace(root)
        self.env = dict(os.environ if env is None else env)
        self.bus = bus = EventBus()
        self.state = StateFile(ws.state_file)
        loaded = load_config(ws.config_file, self.env)
        self.config: Config = loaded.config
        self.config_errors: list[ConfigIssue] = loaded.errors
        self.config_warnings: list[ConfigIssue] = loaded.warnings
        ws.ensure_state_dir()
        # The loop the engine runs on (set at start): the journal's writer thread reports to it.
        self._loop: asyncio.AbstractEventLoop | None = None
        self.journal = (
            Journal(
                ws.journal_file,
                self.config.journal_max_runs,
                self.config.journal_max_bytes,
                on_failing=self._journal_state,
            )
            if journal
            else None
        )
        self.activity = Activity()
        self.background = Background(bus, self.activity)
        self.warm = WarmStarts(ws.state_dir / "warm") if warm_start else None
        # What each hook file was when discovered: the registry keeps it, the runner's gate reads it.
        fingerprints = Fingerprints()
        self.runner = HookRunner(
            root=root,
            config=self.current_config,
            env=self.env,
            journal=self.journal,
            bus=bus,
            refuse=held_back_when_changed(fingerprints, lambda: self.config.review),
            warm=self.warm,
        )
        self.connections = Connections(bus)
        self.sessions = SessionStore(self.journal, bus.publish)
        self.registry = HookRegistry(
            ws.hooks_dir,
            self.runner.run,
            bus,
            self.warn,
            lambda: self.config.hook_protocols,
            self._hcp_discover,
            fingerprints=fingerprints,
        )
        self.pending = PendingChanges(ws.state_dir / "pending", bus)
        git = GitStore(root)
        self.commits = Commits(
            git=git,
            lock=WorkspaceLock(ws.state_dir / "write.lock"),
            bus=bus,
            activity=self.activity,
            warn=self.warn,
            gate=Gate(
                git=git,
                review=lambda: self.config.review,
                hold=self.pending.hold,
                warn=self.warn,
                restored=self.files_changed,
            ),
            head=HeadMemory(
                lambda: self.state.read().get("git_head"), lambda sha: self.state.update({"git_head": sha})
            ),
            record=self.record_event,
        )
        self.git = self.commits.git
        # Hooks failing at a stage and the change behind it, from the runs and dispatches on the bus.
        self.failures = Failures(
            root=root,
            git=self.git,
            journal=self.journal,
            bus=bus,
            session_title=lambda session: found.title if (found := self.sessions.find(session)) else None,
        )
        self.stages = Stages(
            workspace=ws,
            hooks_for=self.registry.hooks_for,
            run_hook=self.runner.run,
            history=self.sessions.history,
            settle=self.commits.settle,
            journal=self.journal,
            bus=bus,
            activity=self.activity,
            host_stages=self.host_stages,
            protocol_of=self.registry.protocol_of,
        )
        self.models = ModelMemory(self.current_config, self.state)
        self.notifier = Notifier(
            dispatch=self.stages.dispatch,
            sessions=self.sessions,
            deliver=lambda session, text: self.connections.deliver(
                session, text, self.config.heartbeat_agent
            ),
            bus=bus,
            warn=self.warn,
        )
        self.followups = Followups(
            notify=self.notifier.notify,
            connections=self.connections,
            config=self.current_config,
            background=self.background,
            bus=bus,
        )
        self.replays = Replayer(
            root=root,
            git=self.git,
            journal=self.journal,
            env=self.env,
            publish=bus.publish,
            pending=self.pending.get,
            store=ws.state_dir / "replays",
            limit=self.config.max_replays,
        )
        self.changes = Changes(
            workspace=ws,
            commits=self.commits,
            pending=self.pending,
            bus=bus,
            activity=self.activity,
            files_changed=self.files_changed,
            tell=lambda session, message, change: self.notifier.notify(None, [message], [session], change),
            sessions=lambda: [s.info() for s in self.sessions.known()],
            refresh=self.sessions.unfreeze,
            failing=self.failures.failing_since,
            spawn=self.background.spawn,
            answers=lambda since, until: answered(self.journal, since, until),
        )
        self.evals = Evals(
            root=root,
            git=self.git,
            config=self.current_config,
            env=self.env,
            publish=bus.publish,
            store=ws.state_dir / "evals",
            pending=self.pending.get,
            project=lambda: Path(d) if (d := self.connections.project()) else None,
            model=self.models.chat,
            sessions=lambda: [s.info() for s in self.sessions.known()],
            conversation=lambda info: self.connections.conversation(info.id, info.connection),
            recorded=self.sessions.history,
        )
        self.gatekeeper = Gatekeeper(
            evals=self.evals,
            config=self.current_config,
            pending=self.pending.get,
            save=self.pending.save,
            approve=lambda pending_id, who: self.changes.approve_pending(pending_id, who),
            tell=lambda session, message, change: self.notifier.notify(None, [message], [session], change),
            publish=bus.publish,
        )
        self.heartbeat = Heartbeat(
            config=self.current_config,
            state=self.state,
            journal=self.journal,
            bus=bus,
            dispatch=self.stages.dispatch,
            sessions=self.sessions,
            after_result=self.followups.after_result,
            commits=self.commits,
            model=self.models.current,
            prompt=lambda: ws.read_prompt("heartbeat"),
            activity=self.activity,
            opencode=opencode or OpencodeSessions(self.connections),
            clock=clock,
            explain=self.failures.of_dispatch,
        )
        self.attempts = Attempts(self.journal, bus)  # what the agent tried that its test rejected
        self.tools = Tools(
            workspace=ws,
            config=self.current_config,
            env=self.env,
            registry=self.registry,
            call_one=self.stages.call_one,
            commits=self.commits,
            hold=self.pending.hold,
            notify=self.notifier.notify,
            heartbeat_time=lambda: self.state.read().get("heartbeat_time"),
            session_title=lambda session: found.title if (found := self.sessions.find(session)) else None,
            journal=self.journal,
            bus=bus,
            activity=self.activity,
            heartbeat=self.heartbeat,
            attempted=self.attempts.record,
            evals=self.evals,
        )
        self.loops = Loops()
        self.tool_calls = OpencodeCalls(self.journal, bus)
        self.tool_stages = ToolStages(
            dispatch=self.stages.dispatch,
            handled=self.stages.handled,
            calls=self.tool_calls,
            loops=self.loops,
            background=self.background,
            preset=self.tools.preset,
            reply_permission=self.connections.reply_permission,
            connection_of=self._connection_of,
            command_of=lambda session: self.connections.command(self._connection_of(session)),
        )
        self.bridge = Bridge(
            dispatch=self.stages.dispatch,
            handled=self.stages.handled,
            sessions=self.sessions,
            models=self.models,
            config=self.current_config,
            followups=self.followups,
            background=self.background,
            compaction_prompt=lambda: ws.read_prompt("compaction"),
            heartbeat_session=lambda: self.state.read().get("heartbeat_session"),
            loops=self.loops,
            tools=self.tool_stages,
            send_continue=self.connections.continue_session,
            abort=self.connections.abort,
            command_of=self.connections.command,
            warn=self.warn,
        )
        self.recovery = Recovery(
            workspace=ws,
            journal=self.journal,
            commits=self.commits,
            changes=self.changes,
            warn=self.warn,
            publish=lambda c: bus.publish(c, EventKind.TOOL_RESULT),
        )
        self.watcher = Watcher(
            workspace=ws,
            activity=self.activity,
            reload_config=self.reload_config,
            commit_external=self.commits.commit_external,
            rediscover=self.registry.discover,
        )
        self._listen(bus)
        self._watching: asyncio.Task[None] | None = None
        self.shutdown_requested = asyncio.Event()

    def _listen(self, bus: EventBus) -> None:
        """What services learn of each other's work from the bus, once all of them exist."""
        bus.listen(when_held(self.replays.held))  # replayed at once, so the reviewer sees its effect
        bus.listen(self.failures.observe)  # hook runs start and clear failures; a dispatch explains them
        # A held change whose file a commit changed goes stale at once; a decided or stale one's
        # replay stops.
        bus.listen(
            lambda e: (
                self.changes.committed(CommitInfo.from_dict(e.data)) if e.kind == EventKind.COMMIT else None
            )
        )
        bus.listen(when_decided(self.replays.stop))
        bus.listen(when_held(self.gatekeeper.held))  # checked at once, with evals_on_review

        def follow(event: Event) -> None:
            if event.kind == EventKind.OPENCODE:
                # The heartbeat's timer runs while some opencode is connected, from when the first came.
                if self.connections.clients:
                    self.heartbeat.connected()
                else:
                    self.heartbeat.disconnected()
            elif event.kind == EventKind.CONFIG:
                self.heartbeat.reschedule()  # heartbeat_ms may have changed
                if self.warm is not None and not self.config.hook_warm_start:
                    self.warm.suspend()  # no interpreter kept ready while warm starts are off

        bus.listen(follow)

    def current_config(self) -> Config:
        return self.config

    def _connection_of(self, session: str | None) -> str | None:
        found = self.sessions.find(session) if session else None
        return found.connection if found else None

    def host_stages(self, session: str | None) -> list[str]:
        """hcp's `host.stages` for a session: what evolve fires in the opencode it lives in."""
        command = self.connections.command(self._connection_of(session))
        return fired_stages(command, heartbeat=self.config.heartbeat_ms >= 0)

    def _hcp_discover(self) -> dict[str, object]:
        return hcp_input(
            "discover",
            self.workspace.read_prompts(),
            {},
            None,
            session=None,
            host_stages=self.host_stages(None),
            cwd=str(self.workspace.root),
        )

    # ---- life cycle -------------------------------------------------------------------------

    async def start(self, watch: bool = False, heartbeat: bool = False) -> None:
        """The repository first (opencode resolves its project from .git), then discovery."""
        self._loop = asyncio.get_running_loop()
        self.workspace.ensure_state_dir()
        for issue in self.config_errors:
            self.warn("config", str(issue))
        try:
            await self.recovery.before_git()
            async with self.commits.lock:
                initial = await asyncio.to_thread(self.git.ensure)
            if initial:
                self.commits.announce(initial)
            # What an engine that died left half done is the agent's (or an operator's) work: it is
            # committed as such before anything left uncommitted counts as someone else's edit.
            await self.recovery.interrupted_work()
            await self.commits.commit_external()
            await self.changes.check_stale()  # files changed while no engine watched
        except GitError as exc:
            self.warn("git", str(exc))
        await self.failures.start()  # the hooks the journal shows failing still
        if watch:  # a serving engine's log shows an ambiguous protocol choice as a warning
            self.registry.notice_level = logging.WARNING
        await self.registry.discover()
        if watch:
            self._watching = asyncio.create_task(self.watcher.run())
            # One turn of the loop: the watcher sets its watches up before its first wait, so that an
            # edit made as soon as the engine answers is seen.
            await asyncio.sleep(0)
        if heartbeat:
            self.heartbeat.start()
        if watch:
            self.connections.start()

    async def close(self) -> None:
        await self.gatekeeper.close()
        await self.evals.close()
        await self.replays.close()
        await self.heartbeat.stop()
        await self.failures.close()
        if self._watching is not None:
            self._watching.cancel()
            await asyncio.gather(self._watching, return_exceptions=True)
        await self.background.close()  # what was accepted from opencode is finished first
        await self.commits.close()  # the last commit of what hooks changed
        if self.warm is not None:
            await self.warm.close()  # after the runs: each server ends what it still runs
        await self.connections.close()
        await self.sessions.close()
        if self.journal is not None:
            self.journal.close()

    def request_shutdown(self) -> None:
        self.shutdown_requested.set()

    def reload_config(self) -> None:
        loaded = load_config(self.workspace.config_file, self.env, base=self.config)
        protocols_changed = loaded.config.hook_protocols != self.config.hook_protocols
        self.config, self.config_errors, self.config_warnings = loaded.config, loaded.errors, loaded.warnings
        if protocols_changed:  # hook_protocols decides first: the hooks are treated anew at once
            self.background.spawn(self.registry.discover(), "discover", busy=True)
        for issue in loaded.errors:
            self.warn("config", f"{issue} (keeping the last good value)")
        # The heartbeat reschedules and warm starts suspend on this event (`_listen`).
        self.bus.publish(ConfigChanged(self.config.to_dict(), [str(e) for e in loaded.errors]))

    async def files_changed(self, files: list[str]) -> None:
        """Hooks, prompts or config changed by an operator action: re-discover and reload at once."""
        if any(f.startswith("hooks/") for f in files):
            await self.registry.discover()
        if "config/evolve.jsonc" in files:
            self.reload_config()

    def warn(self, source: str, message: str) -> None:
        """A warning for the operator: the engine log, the journal (events of kind `warning`) and
        the event stream."""
        log.warning("%s: %s", source, message)
        notice = Notice(source, message)
        self.record_event("warning", notice.to_dict())
        self.bus.publish(notice, EventKind.WARNING)

    def record_event(self, kind: str, data: JSONDict) -> None:
        """Keep an engine event in the journal (when there is one)."""
        if self.journal is not None:
            self.journal.record_event(kind, data)

    def status(self) -> EngineStatus:
        return EngineStatus(
            workspace=str(self.workspace.root),
            pid=os.getpid(),
            config=self.config.to_dict(),
            config_errors=[str(e) for e in self.config_errors],
            # and each ambiguous protocol choice, with the config line that settles it
            config_warnings=[str(e) for e in self.config_warnings] + self.registry.protocol_notices(),
            hooks=self.registry.infos(),
            skipped=self.registry.skipped_infos(),
            opencode=self.connections.infos(),
            sessions=len(self.sessions.known()),
            journal=self.journal.counts() if self.journal is not None else None,
            model=self.models.current(),
            busy=self.activity.busy,
            heartbeat=self.heartbeat.status(),
            journal_failing=self.journal.failing if self.journal is not None else None,
        )

    def _journal_state(self, reason: str | None) -> None:
        """The journal stopped taking writes (why), or takes them again (None): called on its
        writer's thread; the operator is told on the event loop (a warning, and in the status)."""
        if reason is not None:
            text = (
                f"the journal cannot write ({reason}): the engine refuses the work it would journal "
                "(503) and keeps what it was given until it can; it tries again by itself"
            )
        else:
            text = "the journal writes again: the engine takes work again"
        loop = self._loop
        if loop is None or loop.is_closed():
            log.warning("journal: %s", text)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.warn, "journal", text)
