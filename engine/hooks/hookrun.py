"""Running one hook for one stage the way the engine records it: announced when it starts, executed
(engine.hooks.runner), journaled, and published when it ends."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.core.bus import EventBus
from engine.hooks.discovery import HookFile
from engine.hooks.groups import run_owner
from engine.hooks.runner import execute
from engine.journal.rows import snapshot
from engine.journal.store import Journal
from engine.protocol.records import HookRun, RunStarted, new_id
from engine.warm.starts import WarmStarts
from engine.workspace.config import Config

log = logging.getLogger("evolve")


def new_run(
    hook: HookFile,
    stage: str,
    payload: dict[str, Any],
    session: str | None,
    dispatch_id: str | None,
    *,
    id_prefix: str = "run",
) -> HookRun:
    """The record of a run of `hook` for `stage` that starts now, before it runs: the one builder
    of the engine's runs and of a replay's (whose ids start `rpl`, so that they are never taken for
    journaled ones)."""
    return HookRun(
        id=new_id(id_prefix),
        stage=stage,
        hook=hook.name,
        started_at=time.time(),
        input=payload,
        session=session,
        dispatch_id=dispatch_id,
    )


class HookRunner:
    def __init__(
        self,
        root: Path,
        config: Callable[[], Config],
        env: Mapping[str, str],
        journal: Journal | None,
        bus: EventBus,
        refuse: Callable[[HookFile, str], str | None] | None = None,
        warm: WarmStarts | None = None,
    ) -> None:
        """`refuse(hook, stage)` may name a reason not to run a hook (the review gate's); `warm`: ready
        interpreters for Python hooks, used while `hook_warm_start` is on."""
        self._root = root
        self._config = config
        self._env = env
        self._journal = journal
        self._bus = bus
        self._refuse = refuse
        self._warm = warm
        self._owner = run_owner(root)  # the tag of its runs says whose they are (engine.hooks.groups)

    async def run(
        self,
        hook: HookFile,
        stage: str,
        payload: dict[str, Any],
        session: str | None,
        dispatch_id: str | None,
    ) -> HookRun:
        run = new_run(hook, stage, payload, session, dispatch_id)
        self._bus.publish(RunStarted(run.id, stage, hook.name, session))
        refused = self._refuse(hook, stage) if self._refuse is not None else None
        if refused is not None:
            run.error = refused
            self._record(run)
            return run
        config = self._config()
        await execute(
            run,
            hook.path,
            cwd=self._root,
            timeout_ms=config.hook_timeout,
            stdout_limit=config.hook_output_limit,
            env=self._env,
            warm=self._warm if config.hook_warm_start else None,
            owner=self._owner,
        )
        if run.stderr:
            log.info("hooks/%s %s stderr: %s", hook.name, stage, run.stderr.rstrip()[-2000:])
        self._record(run)
        return run

    def _record(self, run: HookRun) -> None:
        if self._journal is not None:
            self._journal.record_run(run)
        # The journal's snapshot, not a deep copy: a run's input holds the prompts and the session's
        # history, which nobody changes in place, and copying them for every run cost more than
        # the rest of its record.
        self._bus.publish(run, data=snapshot(run))

    def inject(self, count: int, stdout_bytes: int = 0) -> int:
        """Record `count` synthetic hook runs exactly as real ones are recorded (journal + events);
        the console's load benchmark feeds on them."""
        now = time.time()
        line = '{"result": "' + "x" * max(stdout_bytes - 14, 0) + '"}'
        for i in range(count):
            failed = i % 17 == 0
            self._record(
                HookRun(
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
            )
        return count
