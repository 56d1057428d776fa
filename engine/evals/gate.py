"""The review gate's use of the behaviour checks: with `"review": "gate"` and `evals_on_review`, a
change held for review is checked at once; with `evals_auto_approve` too, one that regresses no
scenario is installed by itself and one that does stays held, and its author is told which scenario
failed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from engine.changes.errors import ChangeError
from engine.evals import compare
from engine.evals.change import EvalError
from engine.evals.service import Evals
from engine.protocol.events import EventKind
from engine.protocol.records import EvalRun, Notice, PendingChange
from engine.workspace.config import Config

log = logging.getLogger("evolve.evals")

APPROVER: Final = "evals"  # who installs a change that regresses nothing, with evals_auto_approve


class Gatekeeper:
    """The review gate's use of the checks: a change just held is checked at once (`evals_on_review`);
    with `evals_auto_approve`, one that regresses no scenario is installed by itself, and one that does
    stays held, its author told which scenario failed. The alert and the held change's `evals` say
    the result in one line."""

    def __init__(
        self,
        *,
        evals: Evals,
        config: Callable[[], Config],
        pending: Callable[[str], PendingChange],
        save: Callable[[PendingChange], None],
        approve: Callable[[str, str], Awaitable[Any]],
        tell: Callable[[str, str, str], Awaitable[object]],
        publish: Callable[..., Any],
    ) -> None:
        self._evals = evals
        self._config = config
        self._pending = pending
        self._save = save
        self._approve = approve
        self._tell = tell
        self._publish = publish
        self._tasks: set[asyncio.Task[Any]] = set()

    def held(self, pending: PendingChange) -> None:
        if not self._config().evals_on_review:
            return
        task = asyncio.get_running_loop().create_task(self._check(pending.id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _check(self, pending_id: str) -> None:
        try:
            result = await self._evals.check(await self._evals.pending_change(pending_id))
        except EvalError as exc:
            self._alert(f"pending change {pending_id}: evals could not run: {exc}")
            return
        try:
            item = self._pending(pending_id)
        except ChangeError:
            return
        item.evals = result.summary
        self._save(item)
        if item.status != "pending" or result.state == "cancelled":
            return
        if result.state != "done":
            self._alert(f"pending change {pending_id} “{item.message}”: {result.summary}")
            return
        if result.regressed:
            self._alert(f"pending change {pending_id} “{item.message}”: {result.summary}")
            if item.provenance is not None and item.provenance.session:
                await self._tell(item.provenance.session, held_message(item, result), item.id)
            return
        if self._config().evals_auto_approve:
            try:
                await self._approve(pending_id, APPROVER)
            except ChangeError as exc:
                self._alert(
                    f"pending change {pending_id}: no scenario regressed, but it was not installed: {exc}"
                )

    def _alert(self, message: str) -> None:
        log.warning("%s", message)
        self._publish(Notice("evals", message), EventKind.WARNING)


def held_message(item: PendingChange, result: EvalRun) -> str:
    """What the author of a change is told when its checks keep it held."""
    return (
        f'Your proposed change "{item.message}" to {item.file} ({item.id}) stays held for the operator: '
        f"a behaviour check that passes now fails with it.\n{compare.for_the_agent(result)}"
    )
