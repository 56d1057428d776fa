"""One version of the workspace for a replay: a throwaway copy (as validation copies it) with some files
laid over it, its hooks discovered, and its stages dispatched as the engine dispatches them, through
the engine's hook runner, with nothing journaled or published."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.bus import EventBus
from engine.hooks.discovery import HookFile, Registration
from engine.hooks.dispatch import Dispatcher, recover_defaults
from engine.hooks.hookrun import new_run
from engine.hooks.registry import HookRegistry
from engine.hooks.runner import execute
from engine.protocol.records import HookRun
from engine.protocol.stages import Stage
from engine.replay.compare import Outcome, agent_view
from engine.replay.inputs import Recorded
from engine.workspace.config import load_config
from engine.workspace.copies import Copied, copy_workspace
from engine.workspace.layout import Workspace

log = logging.getLogger("evolve.replay")


class ReplayError(RuntimeError):
    """A change that cannot be replayed; the message says why and what to do."""


@dataclass(frozen=True)
class FileVersion:
    mode: int  # git's mode: 0o100644, 0o100755, 0o120000 (a link, `data` is its target)
    data: bytes


Overlay = dict[str, FileVersion | None]  # workspace path -> its content in a version (None: absent)


def materialize(root: Path, target: Path, overlay: Overlay) -> Copied:
    """A copy of the workspace at `root` in `target` (as validation copies it: nothing in it leads
    out of it), with `overlay`'s files in place; returns what the copy holds and left out. A path
    reached through a link that leaves the copy is refused: nothing is ever written outside it."""
    copied = copy_workspace(root, target)
    real = os.path.realpath(target)
    for rel, version in overlay.items():
        if os.path.isabs(rel) or ".." in Path(rel).parts:
            raise ReplayError(f"{rel}: not a path inside the workspace")
        path = target / rel
        if os.path.commonpath([real, os.path.realpath(path.parent)]) != real:
            raise ReplayError(f"{rel}: its folder is a link that leads out of the workspace; cannot replay")
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if version is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if stat.S_ISLNK(version.mode):
            link = os.fsdecode(version.data)
            leads_to = os.path.realpath(os.path.join(path.parent, link))
            if os.path.commonpath([real, leads_to]) != real:
                copied.left_out.append(f"{rel}: a link that leads out of the workspace ({link}), left out")
                continue
            os.symlink(link, path)
        else:
            path.write_bytes(version.data)
            os.chmod(path, 0o755 if version.mode & 0o111 else 0o644)
    return copied


class Version:
    """One version of the workspace in its throwaway copy: its hooks discovered and its stages
    dispatched as the engine does, with nothing journaled or published."""

    def __init__(
        self, root: Path, env: Mapping[str, str], slots: asyncio.Semaphore, owner: str | None = None
    ) -> None:
        """`owner`: the tag prefix of the engine's runs (engine.hooks.groups.run_owner of the live
        workspace), so that what a replay's hooks leave running is found as the engine's."""
        self.root = root
        self._owner = owner
        self.workspace = Workspace(root)
        # The environment of validation: the engine's, with the copy as the workspace.
        self.env = {**env, "OPENCODE_EVOLVE_WORKSPACE": str(root)}
        loaded = load_config(self.workspace.config_file, env)
        self.config = loaded.config
        self.config_errors = [str(e) for e in loaded.errors]
        self._slots = slots
        self._runs: dict[str, list[HookRun]] = {}
        self.registry = HookRegistry(self.workspace.hooks_dir, self.run_hook, EventBus(), lambda s, m: None)
        self.dispatcher = Dispatcher(self.workspace, self.registry.hooks_for, self.run_hook)

    async def run_hook(
        self,
        hook: HookFile,
        stage: str,
        payload: dict[str, Any],
        session: str | None,
        dispatch_id: str | None,
    ) -> HookRun:
        run = new_run(hook, stage, payload, session, dispatch_id, id_prefix="rpl")
        async with self._slots:  # at most one hook process per core, across every replay
            await execute(
                run,
                hook.path,
                cwd=self.root,
                timeout_ms=self.config.hook_timeout,
                stdout_limit=self.config.hook_output_limit,
                env=self.env,
                owner=self._owner,
            )
        self._runs.setdefault(dispatch_id or run.id, []).append(run)
        return run

    @property
    def registrations(self) -> dict[str, Registration]:
        return self.registry.registrations

    def discovered(self, hook: str) -> Outcome:
        """What discover registered for `hooks/<hook>` (nothing when the version has no such hook)."""
        reg = self.registrations.get(hook)
        if reg is None:
            return Outcome()
        runs = self._runs.get(reg.run_id or "") or []
        if runs and runs[0].error:
            return Outcome(errors=[_failure(runs[0])])
        view: dict[str, Any] = {
            "tools": "\n".join(t.name for t in reg.tools),
            "registration": "\n".join(
                [
                    f"name: {reg.name}",
                    f"test: {reg.test or '(none)'}",
                    "stages: "
                    + (", ".join(sorted(reg.stages)) if reg.stages is not None else "(every stage)"),
                    *[f"problem: {p}" for p in reg.problems],
                ]
            ),
        }
        for tool in reg.tools:
            spec = {"description": tool.description, "parameters": tool.schema, "permission": tool.permission}
            view[f"tool {tool.name}"] = json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False)
        return Outcome(view)

    async def play(self, stage: str, recorded: Recorded) -> Outcome:
        """`recorded` dispatched in this version; what the agent would get, or what failed."""
        try:
            return await self._play(stage, recorded)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a replay reports, it never stops at one input
            log.exception("replay of %s %s failed", stage, recorded.source)
            return Outcome(errors=[f"replay error: {type(exc).__name__}: {exc}"])

    async def _play(self, stage: str, recorded: Recorded) -> Outcome:
        if stage == Stage.EXECUTE_TOOL:
            hook = next((h for h in self.registry.hooks if h.name == recorded.hook), None)
            if hook is None:
                return Outcome(errors=[f"hooks/{recorded.hook} is not in this version"])
            run = await self.dispatcher.call_one(
                hook, stage, recorded.context, session=recorded.session, history=recorded.history
            )
            self._runs.pop(run.id, None)
            return Outcome(errors=[_failure(run)]) if run.error else Outcome(dict(run.result or {}))
        result = await self.dispatcher.dispatch(
            stage, recorded.context, session=recorded.session, history=recorded.history
        )
        runs = self._runs.pop(result.id, [])
        prompts = self.workspace.read_prompts()
        merged = result.merged
        if stage == Stage.RECOVER:
            recover_defaults(merged, prompts)  # as when recover steps in for a failed stage
        errors = [_failure(r) for r in runs if r.error]
        return Outcome(agent_view(stage, merged, recorded.context, prompts), errors)


def _failure(run: HookRun) -> str:
    """A failed run in one line: the hook, the stage, the reason, and the last line of its stderr."""
    text = f"hooks/{run.hook} {run.stage}: {run.error}"
    last = next((line.strip() for line in reversed(run.stderr.splitlines()) if line.strip()), "")
    if last:
        text += f" ({last[:300]})"
    return text
