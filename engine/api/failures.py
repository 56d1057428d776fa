"""Hooks failing at a stage: the failures now (and lately cleared), and the failure a failed run is
part of, with the change that most likely caused it."""

from __future__ import annotations

from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer
from engine.api.runs import flushed
from engine.journal.store import Journal
from engine.protocol import routes
from engine.protocol.records import Failure, FailureList, HookRun


class Explaining(Protocol):
    """What the routes read of the failures (engine.failures.tracker.Failures)."""

    def active(self) -> list[Failure]: ...
    def cleared(self) -> list[Failure]: ...
    async def of_run(self, run: HookRun) -> Failure | None: ...


def add_failure_routes(router: Router, failures: Explaining, journal: Journal | None) -> None:
    @router.serve(routes.FAILURES)
    async def listed(request: Request) -> Response:
        return answer(FailureList(failures.active(), failures.cleared()))

    @router.serve(routes.RUN_CAUSE)
    async def cause(request: Request) -> Response:
        run_id = request.path_params["id"]
        if journal is None:
            raise ApiError(503, "this engine keeps no journal, so it has no record of that run")
        await flushed(journal)
        run = journal.run(run_id)
        if run is None:
            raise ApiError(404, f"there is no hook run {run_id} in the journal (it may have been trimmed)")
        found = await failures.of_run(run)
        if found is None:
            raise ApiError(404, f"hook run {run_id} did not fail: there is no cause to look for")
        return answer(found)
