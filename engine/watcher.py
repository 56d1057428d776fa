"""Watches the workspace while the engine runs: hand edits are committed as external changes,
hooks are re-discovered when `hooks/` changes, and the config is reloaded when it changes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from watchfiles import Change, DefaultFilter, awatch

if TYPE_CHECKING:
    from .runtime import Engine

log = logging.getLogger("evolve.watcher")


class WorkspaceFilter(DefaultFilter):
    """watchfiles' defaults (editor swap files, __pycache__, ...) plus `.git/` and `state/`."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self._skip = (str(root / ".git"), str(root / "state"))

    def __call__(self, change: Change, path: str) -> bool:
        if any(path == p or path.startswith(p + "/") for p in self._skip):
            return False
        return super().__call__(change, path)


async def watch_workspace(engine: Engine, debounce_ms: int = 200) -> None:
    root = engine.workspace.root
    async for changes in awatch(root, watch_filter=WorkspaceFilter(root), debounce=debounce_ms, step=50):
        paths = {Path(p) for _, p in changes}
        try:
            await handle_changes(engine, paths)
        except Exception:  # the watcher must outlive one bad batch
            log.exception("handling workspace changes failed")


async def handle_changes(engine: Engine, paths: set[Path]) -> None:
    root = engine.workspace.root
    if engine.workspace.config_file in paths:
        engine.reload_config()
    # Engine operations commit their own changes when they finish; wait for them so that what is
    # left uncommitted is really someone else's edit.
    while engine.busy:
        await asyncio.sleep(0.05)
    await engine.commit_external()
    if any(p.parent == engine.workspace.hooks_dir or p == engine.workspace.hooks_dir for p in paths):
        await engine.discover()
    log.debug("workspace changes handled: %s", sorted(str(p.relative_to(root)) for p in paths))
