"""The hook registry: which hook scripts are in `hooks/`, what each registered through `discover`
(name, test, tools, the stages it handles), and which hooks a stage goes to."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from .bus import EventBus
from .discovery import HookFile, HookTool, Registration, Skipped, registration_from, scan_hooks
from .dispatch import RunHook
from .protocol.records import HookInfo, HooksDiscovered, SkippedHook


def _fingerprint(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def hook_info(reg: Registration) -> HookInfo:
    return HookInfo(
        file=reg.file.name,
        name=reg.name,
        test=reg.test,
        tools=[t.name for t in reg.tools],
        problems=list(reg.problems),
        stages=sorted(reg.stages) if reg.stages is not None else None,
    )


class HookRegistry:
    def __init__(
        self, hooks_dir: Path, run_hook: RunHook, bus: EventBus, warn: Callable[[str, str], None]
    ) -> None:
        self.hooks_dir = hooks_dir
        self._run_hook = run_hook
        self._bus = bus
        self._warn = warn
        self.hooks: list[HookFile] = []
        self.skipped: list[Skipped] = []
        self.registrations: dict[str, Registration] = {}  # by hook file name, in discovery order
        # What each hook file was when it was last discovered (inode, size, mtime): the review gate
        # runs no hook whose file changed since.
        self._fingerprints: dict[str, tuple[int, int, int] | None] = {}

    async def discover(self) -> HooksDiscovered:
        """Scan hooks/ and run `discover` on every hook in parallel (registration order stays the
        discovery order)."""
        hooks, skipped = scan_hooks(self.hooks_dir)
        fingerprints = {h.name: _fingerprint(h.path) for h in hooks}
        regs = await asyncio.gather(*(self._discover_one(h) for h in hooks))
        self._fingerprints = fingerprints
        self.hooks, self.skipped = hooks, skipped
        self.registrations = {r.file.name: r for r in regs}
        for s in skipped:
            self._warn("hooks", f"hooks/{s.name} skipped: {s.reason}")
        for r in regs:
            for problem in r.problems:
                self._warn("hooks", f"hooks/{r.file.name}: {problem}")
        found = HooksDiscovered(self.infos(), self.skipped_infos())
        self._bus.publish(found)
        return found

    async def _discover_one(self, hook: HookFile) -> Registration:
        run = await self._run_hook(hook, "discover", {"hook": "discover"}, None, None)
        try:
            reg = registration_from(hook, run.result, run.error)
        except Exception as exc:  # whatever a hook answers, the engine starts
            reg = registration_from(hook, None, f"its answer cannot be used ({type(exc).__name__}: {exc})")
        reg.run_id = run.id
        return reg

    def changed_since_discovery(self, hook: HookFile) -> bool:
        """Whether the hook's file is not what it was when hooks were last discovered."""
        return _fingerprint(hook.path) != self._fingerprints.get(hook.name)

    def infos(self) -> list[HookInfo]:
        return [hook_info(r) for r in self.registrations.values()]

    def skipped_infos(self) -> list[SkippedHook]:
        return [SkippedHook(s.name, s.reason) for s in self.skipped]

    def hooks_for(self, stage: str) -> list[HookFile]:
        """The hooks to run for `stage`, in discovery order: all, except those whose discover
        declared the stages they handle and left this one out (no process start for nothing)."""
        out = []
        for hook in self.hooks:
            reg = self.registrations.get(hook.name)
            if reg is None or reg.handles(stage):
                out.append(hook)
        return out

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
