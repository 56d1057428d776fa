"""Watches the workspace while the engine runs: hand edits are committed as external changes,
hooks are re-discovered when `hooks/` changes, and the config is reloaded when it changes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.activity import Activity
from engine.workspace.layout import Workspace

if TYPE_CHECKING:
    from watchfiles import Change

log = logging.getLogger("evolve.watcher")


def workspace_filter(root: Path) -> Callable[[Change, str], bool]:
    """watchfiles' defaults (editor swap files, __pycache__, ...) plus `.git/` and `state/`.

    watchfiles is imported here, when an engine starts watching: ~30 ms of CPU that an `evolve`
    command, whose engine never watches, does not pay."""
    from watchfiles import DefaultFilter

    skip = (str(root / ".git"), str(root / "state"))
    default = DefaultFilter()

    def keep(change: Change, path: str) -> bool:
        if any(path == p or path.startswith(p + "/") for p in skip):
            return False
        return default(change, path)

    return keep


class Watcher:
    def __init__(
        self,
        workspace: Workspace,
        activity: Activity,
        reload_config: Callable[[], None],
        commit_external: Callable[[], Awaitable[object]],
        rediscover: Callable[[], Awaitable[object]],
    ) -> None:
        self._workspace = workspace
        self._activity = activity
        self._reload_config = reload_config
        self._commit_external = commit_external
        self._rediscover = rediscover

    async def run(self, debounce_ms: int = 200) -> None:
        root = self._workspace.root
        from watchfiles import awatch

        async for changes in awatch(root, watch_filter=workspace_filter(root), debounce=debounce_ms, step=50):
            try:
                await self.handle({Path(p) for _, p in changes})
            except Exception:  # the watcher must outlive one bad batch
                log.exception("handling workspace changes failed")

    async def handle(self, paths: set[Path]) -> None:
        ws = self._workspace
        # Engine operations commit their own changes when they finish; wait for them so that what
        # is left uncommitted is really someone else's edit. The config too is read only then: a
        # hook's change to it (which could turn the review gate off) has been taken back by then.
        await self._activity.quiet()
        # A directory made and a file written in it at once (`mkdir config` then the config) may come
        # as the directory alone: its watch is added only once its creation is seen, after the file.
        if ws.config_file in paths or ws.config_file.parent in paths:
            self._reload_config()
        await self._commit_external()
        if any(p.parent == ws.hooks_dir or p == ws.hooks_dir for p in paths):
            await self._rediscover()
        log.debug("workspace changes handled: %s", sorted(str(p.relative_to(ws.root)) for p in paths))
