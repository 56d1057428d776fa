"""What the watcher does with a batch of changed paths (engine.workspace.watcher)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.core.activity import Activity
from engine.workspace.layout import Workspace
from engine.workspace.watcher import Watcher


def handled(root: Path, paths: set[Path]) -> list[str]:
    done: list[str] = []

    async def commit_external() -> None:
        done.append("commit")

    async def rediscover() -> None:
        done.append("discover")

    ws = Workspace(root)
    watcher = Watcher(ws, Activity(), lambda: done.append("config"), commit_external, rediscover)
    asyncio.run(watcher.handle(paths))
    return done


def test_the_config_is_read_again_when_it_changes(tmp_path: Path) -> None:
    assert handled(tmp_path, {tmp_path / "config" / "evolve.jsonc"}) == ["config", "commit"]


def test_a_config_directory_made_with_its_file_reloads_the_config(tmp_path: Path) -> None:
    """The file written at once into a directory just made may be reported as the directory only."""
    assert handled(tmp_path, {tmp_path / "config"}) == ["config", "commit"]


def test_a_prompt_edit_is_committed_without_a_reload(tmp_path: Path) -> None:
    assert handled(tmp_path, {tmp_path / "prompts" / "chat.md"}) == ["commit"]


def test_a_hook_edit_is_discovered_again(tmp_path: Path) -> None:
    assert handled(tmp_path, {tmp_path / "hooks" / "notes.py"}) == ["commit", "discover"]
