"""What hooks change of the files that steer the agent: `hooks/`, `prompts/`, `tests/` (the tests
that validate hooks), `evals/` (the behaviour checks that judge changes) and `config/` (which could
turn the review gate off).

The agent's tools change those files only after validation (and, with `"review": "gate"`, an
operator's approval). A hook is a program: while it runs it can write any file, around the tools.
What it changed there is never mixed into an ordinary commit:

- with `"review": "log"`, it is committed on its own, with origin `hook` and an `Evolve-Unvalidated`
  trailer naming the files, and announced as a warning;
- with `"review": "gate"`, it is taken back (the file as the last commit has it) and held as a
  pending change, which an operator approves or rejects like the agent's own; until then the changed
  version is not used.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from engine.changes.gitstore import GitStore
from engine.protocol.records import PendingChange
from engine.tools.host import CallContext
from engine.workspace.layout import write_atomic

GATED_DIRS: Final = ("hooks", "prompts", "tests", "config", "evals")

Hold = Callable[[str, bytes, str, str, CallContext, "str | None"], PendingChange]
Warn = Callable[[str, str], None]


def gated(files: list[str]) -> list[str]:
    """The files of `files` (workspace-relative) the gate is about."""
    return [f for f in files if f.split("/", 1)[0] in GATED_DIRS and "/" in f]


@dataclass
class Screened:
    """Files that changed during hook work, sorted: to commit as usual, to commit apart as not
    validated, or held for review (and taken back)."""

    ordinary: list[str] = field(default_factory=list)
    unvalidated: list[str] = field(default_factory=list)
    held: list[PendingChange] = field(default_factory=list)


class Gate:
    def __init__(
        self,
        git: GitStore,
        review: Callable[[], str],
        hold: Hold,
        warn: Warn,
        restored: Callable[[list[str]], Awaitable[object]] | None = None,
    ) -> None:
        """`restored(files)` is told of the files the gate put back (hooks to re-discover)."""
        self._git = git
        self._review = review
        self._hold = hold
        self._warn = warn
        self._restored = restored

    def on(self) -> bool:
        return self._review() == "gate"

    async def screen(self, files: list[str], during: str, ctx: CallContext) -> Screened:
        """Sort `files` (changed by hooks `during` some work, e.g. "tool_after"). The caller holds
        the write lock."""
        steering = gated(files)
        out = Screened(ordinary=[f for f in files if f not in steering])
        if not steering:
            return out
        if not self.on():
            out.unvalidated = steering
            self._warn(
                "gate",
                f"{', '.join(steering)} changed by hooks during {during}, without validation "
                "(committed apart, origin hook)",
            )
            return out
        for rel in steering:
            held = await self._take_back(rel, during, ctx)
            if held is not None:
                out.held.append(held)
        if self._restored is not None:
            await self._restored(steering)
        return out

    async def _take_back(self, rel: str, during: str, ctx: CallContext) -> PendingChange | None:
        root = self._git.root
        path = root / rel
        committed = await asyncio.to_thread(self._git.committed_file, rel)
        try:
            current: bytes | None = path.read_bytes() if not path.is_symlink() else None
        except (FileNotFoundError, IsADirectoryError):
            current = None
        if path.is_symlink():
            # A link is not content to review: put the committed file back in its place.
            await asyncio.to_thread(_restore, path, committed)
            self._warn("gate", f"{rel}: a hook replaced it by a symbolic link during {during}; restored")
            return None
        if current is None:
            if committed is not None:
                await asyncio.to_thread(_restore, path, committed)
                self._warn(
                    "gate",
                    f"{rel}: deleted by a hook during {during}; restored (the review gate does not "
                    "hold deletions: delete it by hand if it should go)",
                )
            return None
        if committed is not None and committed[1] == current:
            return None
        hook = os.path.relpath(path, root / "hooks") if rel.startswith("hooks/") else None
        held = self._hold(
            rel,
            committed[1] if committed else b"",
            current.decode("utf-8", "surrogateescape"),
            f"hooks changed {rel} during {during}",
            ctx,
            hook,
        )
        await asyncio.to_thread(_restore, path, committed)
        self._warn(
            "gate",
            f"{rel} changed by a hook during {during}, without validation: taken back and held for "
            f"review as pending change {held.id}",
        )
        return held


def _restore(path: Path, committed: tuple[int, bytes] | None) -> None:
    """Put back the committed version of `path` (its mode, its content), or remove a file git
    does not have."""
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            return
        path.unlink()
    if committed is not None:
        mode, content = committed
        write_atomic(path, content, mode)
