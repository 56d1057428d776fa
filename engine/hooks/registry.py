"""The hook registry: which hook scripts are in `hooks/`, what each registered through `discover`
(name, test, tools, the stages it handles), and which hooks a stage goes to."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from engine.core.bus import EventBus
from engine.hooks.discovery import (
    HookFile,
    HookTool,
    Registration,
    Skipped,
    Target,
    registration_from,
    scan_hooks,
)
from engine.hooks.dispatch import RunHook
from engine.hooks.protocols import classify, protocol_notice, receives
from engine.protocol.records import HookInfo, HookRun, HooksDiscovered, SkippedHook
from engine.protocol.stages import STAGES, HookProtocol

log = logging.getLogger("evolve.hooks")

LEGACY_DISCOVER = {"hook": "discover"}  # exactly what opencode-evolve sends (docs/hooks.md, "discover")


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class Fingerprints:
    """What each hook file was when hooks were last discovered (inode, size, mtime): the review gate
    runs no hook whose file changed since. Apart from the registry, so that the hook runner (through
    which the registry runs `discover`) can be given it before the registry exists."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, int, int] | None] = {}

    @staticmethod
    def of(hooks: list[HookFile]) -> dict[str, tuple[int, int, int] | None]:
        return {h.name: _fingerprint(h.path) for h in hooks}

    def remember(self, found: dict[str, tuple[int, int, int] | None]) -> None:
        self._known = found

    def changed(self, hook: HookFile) -> bool:
        """Whether the hook's file is not what it was when hooks were last discovered."""
        return _fingerprint(hook.path) != self._known.get(hook.name)


def held_back_when_changed(
    fingerprints: Fingerprints, review: Callable[[], str]
) -> Callable[[HookFile, str], str | None]:
    """The hook runner's `refuse`: with the review gate, a hook whose file changed since it was
    discovered does not run (a hook may have rewritten it, unvalidated: engine.changes.gate takes such
    a change back)."""

    def refuse(hook: HookFile, stage: str) -> str | None:
        if stage == "discover" or review() != "gate" or not fingerprints.changed(hook):
            return None
        return (
            f"hooks/{hook.name} changed since hooks were discovered; with the review gate it runs "
            "again once hooks are re-discovered (a change a hook made is held for review first)"
        )

    return refuse


def hook_info(reg: Registration) -> HookInfo:
    return HookInfo(
        file=reg.file.name,
        name=reg.name,
        test=reg.test,
        tools=[t.name for t in reg.tools],
        problems=list(reg.problems),
        stages=sorted(reg.stages) if reg.stages is not None else None,
        protocol=reg.protocol.value,
        protocol_reason=reg.protocol_reason,
        protocol_settle=reg.protocol_settle,
        stage_warnings=list(reg.stage_warnings),
    )


def registration(
    hook: HookFile, result: dict[str, Any] | None, error: str | None, configured: Mapping[str, str]
) -> Registration:
    """A hook's registration from its discover answer, with the protocol it is treated as."""
    try:
        return classify(registration_from(hook, result, error), configured)
    except Exception as exc:  # whatever a hook answers, the engine starts
        failed = f"its answer cannot be used ({type(exc).__name__}: {exc})"
        return classify(registration_from(hook, None, failed), configured)


async def discover_hook(
    hook: HookFile,
    configured: Mapping[str, str],
    known: HookProtocol | None,
    run: Callable[[dict[str, Any]], Awaitable[HookRun]],
    hcp_payload: Callable[[], dict[str, Any]],
) -> tuple[Registration, HookRun]:
    """Run `discover` on one hook as its protocol asks. An opencode-evolve hook gets exactly
    `{"hook": "discover"}`, an hcp hook hcp's base payload (whose `host.stages` tells it what evolve
    fires). Which one a hook is shows only in its answer, its file or the config: a hook not known
    as hcp (`known`: its protocol at the last discovery) is asked as opencode-evolve asks, and once
    more, as hcp, when its answer makes it an hcp hook."""
    setting = configured.get(hook.name)
    as_hcp = setting == HookProtocol.HCP or (setting is None and known is HookProtocol.HCP)
    done = await run(hcp_payload() if as_hcp else dict(LEGACY_DISCOVER))
    reg = registration(hook, done.result, done.error, configured)
    if reg.protocol is HookProtocol.HCP and not as_hcp and done.ok:
        again = await run(hcp_payload())
        second = registration(hook, again.result, again.error, configured)
        if again.ok and second.protocol is HookProtocol.HCP:
            return second, again
    return reg, done


class HookRegistry:
    """`protocols` gives the config's `hook_protocols` (hook file -> protocol); `hcp_discover` the
    discover payload of an hcp hook (hcp's base payload)."""

    def __init__(
        self,
        hooks_dir: Path,
        run_hook: RunHook,
        bus: EventBus,
        warn: Callable[[str, str], None],
        protocols: Callable[[], Mapping[str, str]] = dict,
        hcp_discover: Callable[[], dict[str, Any]] = lambda: dict(LEGACY_DISCOVER),
        *,
        fingerprints: Fingerprints | None = None,
    ) -> None:
        self.hooks_dir = hooks_dir
        self._run_hook = run_hook
        self._bus = bus
        self._warn = warn
        self._protocols = protocols
        self._hcp_discover = hcp_discover
        self._known: dict[str, HookProtocol] = {}  # each hook's protocol at the last discovery
        self.hooks: list[HookFile] = []
        self.skipped: list[Skipped] = []
        self.registrations: dict[str, Registration] = {}  # by hook file name, in discovery order
        self.fingerprints = fingerprints or Fingerprints()
        self._handled: list[str] = []  # handled(), set by discover: the shim asks with every request
        self._notices: set[str] = set()  # the ambiguous protocol choices already logged
        # How an ambiguous choice is logged: a warning in the log of an engine that serves (set by
        # the engine); a one-off command keeps its output to what was asked for.
        self.notice_level = logging.INFO

    async def discover(self) -> HooksDiscovered:
        """Scan hooks/ and run `discover` on every hook in parallel (registration order stays the
        discovery order)."""
        hooks, skipped = scan_hooks(self.hooks_dir)
        fingerprints = Fingerprints.of(hooks)
        configured = dict(self._protocols())
        regs = await asyncio.gather(*(self._discover_one(h, configured) for h in hooks))
        self.fingerprints.remember(fingerprints)
        self.hooks, self.skipped = hooks, skipped
        self.registrations = {r.file.name: r for r in regs}
        self._known = {r.file.name: r.protocol for r in regs}
        notices = self.protocol_notices()
        for notice in notices:
            if notice not in self._notices:  # once, not again at every re-discovery
                log.log(self.notice_level, "%s", notice)
        self._notices = set(notices)
        self._handled = [stage for stage in STAGES if self.hooks_for(stage)]
        for s in skipped:
            self._warn("hooks", f"hooks/{s.name} skipped: {s.reason}")
        for r in regs:
            for problem in [*r.problems, *r.stage_warnings]:
                self._warn("hooks", f"hooks/{r.file.name}: {problem}")
        found = HooksDiscovered(self.infos(), self.skipped_infos())
        self._bus.publish(found)
        return found

    async def _discover_one(self, hook: HookFile, configured: Mapping[str, str]) -> Registration:
        async def run(payload: dict[str, Any]) -> HookRun:
            return await self._run_hook(hook, "discover", payload, None, None)

        reg, done = await discover_hook(hook, configured, self._known.get(hook.name), run, self._hcp_discover)
        reg.run_id = done.id
        return reg

    def protocol_notices(self) -> list[str]:
        """One line per hook whose protocol the evidence left ambiguous: the choice, why, and the
        config line that settles it (shown in the engine log and the status's config_warnings)."""
        return [n for n in (protocol_notice(r) for r in self.registrations.values()) if n is not None]

    def changed_since_discovery(self, hook: HookFile) -> bool:
        """Whether the hook's file is not what it was when hooks were last discovered."""
        return self.fingerprints.changed(hook)

    def infos(self) -> list[HookInfo]:
        return [hook_info(r) for r in self.registrations.values()]

    def skipped_infos(self) -> list[SkippedHook]:
        return [SkippedHook(s.name, s.reason) for s in self.skipped]

    def hooks_for(self, stage: str) -> list[Target]:
        """The hooks to run for `stage`, in discovery order, each with its protocol: those of a
        protocol that has this stage (engine.hcp.receives), except those whose discover declared the
        stages they handle and left this one out (no process start for nothing)."""
        out = []
        for hook in self.hooks:
            reg = self.registrations.get(hook.name)
            protocol = reg.protocol if reg is not None else HookProtocol.OPENCODE_EVOLVE
            if receives(protocol, stage) and (reg is None or reg.handles(stage)):
                out.append(Target(hook, protocol))
        return out

    def handled(self) -> list[str]:
        """The standard stages some hook runs for (what the shim needs to know to await a stage)."""
        return list(self._handled)

    def protocol_of(self, hook: HookFile) -> HookProtocol:
        reg = self.registrations.get(hook.name)
        return reg.protocol if reg is not None else HookProtocol.OPENCODE_EVOLVE

    def hook_tools(self) -> dict[str, HookTool]:
        """Every hook tool by full name; a later registration with the same name wins."""
        tools: dict[str, HookTool] = {}
        for reg in self.registrations.values():
            for tool in reg.tools:
                tools[tool.name] = tool
        return tools

    def canonical(self, path: os.PathLike[str] | str) -> str:
        """A hook's canonical name: where its content lives, relative to hooks/ ("./a/../notes.py"
        and a symbolic link to notes.py both are "notes.py"), so that no spelling escapes its test."""
        return os.path.relpath(os.path.realpath(path), os.path.realpath(self.hooks_dir))

    def registration_for(self, hook: str) -> Registration | None:
        """The registration of the hook whose content is hooks/<hook> (also through a symbolic link)."""
        reg = self.registrations.get(hook)
        if reg is not None:
            return reg
        real = os.path.realpath(self.hooks_dir / hook)
        return next((r for r in self.registrations.values() if os.path.realpath(r.file.path) == real), None)
