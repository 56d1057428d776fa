"""Behaviour checks: the workspace's scenarios; a change's scenarios (or real turns) run before and
after it; the latest checks of a change, one eval, cancelling one (the routes every background job
has: engine/api/jobs.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer, body
from engine.api.jobs import JobRoutes, Resolve, add_job_routes, names
from engine.evals.service import Change, EvalError, Evals
from engine.protocol import routes
from engine.protocol.records import EvalCancelled, ScenarioList

ROUTES = JobRoutes(
    change=routes.CHANGE_EVAL,
    pending=routes.PENDING_EVAL,
    change_latest=routes.CHANGE_EVAL_LATEST,
    pending_latest=routes.PENDING_EVAL_LATEST,
    one=routes.EVAL,
    cancel=routes.EVAL_CANCEL,
)


def _positive(data: dict[str, object], key: str, what: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ApiError(400, f"'{key}' must be a positive integer ({what})")
    return value


def add_eval_routes(router: Router, evals: Evals, resolve: Resolve) -> None:
    async def evaluating(request: Request, change: Callable[[], Awaitable[Change]]) -> Response:
        """Start checking (`{scenarios?, repeat?, turns?, project?, wait?}`); with `wait`, answer when done."""
        data = await body(request)
        asked = names(data, "scenarios", "scenario names")
        repeat = _positive(data, "repeat", "runs of each scenario at each version")
        turns = _positive(data, "turns", "the last user turns to re-ask")
        project = data.get("project")
        if project is not None and not (isinstance(project, str) and project):
            raise ApiError(400, "'project' must be the directory of an opencode project")
        if turns and asked:
            raise ApiError(400, "give 'scenarios' or 'turns', not both: re-asked turns are not scenarios")
        try:
            record = evals.start(
                await change(),
                asked,
                repeat,
                turns,
                Path(project) if isinstance(project, str) else None,
            )
        except EvalError as exc:
            raise ApiError(409, str(exc)) from exc
        if data.get("wait"):
            record = await evals.wait(record.id)
        return answer(record)

    @router.serve(routes.SCENARIOS)
    async def scenarios(request: Request) -> Response:
        found, errors = await asyncio.to_thread(evals.scenarios)
        return answer(ScenarioList([s.info() for s in found], errors))

    add_job_routes(
        router,
        ROUTES,
        evals,
        resolve,
        evaluating,
        noun="eval",
        none_yet="no behaviour checks of {what} yet; start them with POST",
        cancelled=EvalCancelled,
    )
