"""Behaviour checks: the workspace's scenarios; a change's scenarios (or real turns) run before and
after it; the latest checks of a change, one eval, cancelling one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer, body
from engine.changes.history import ChangeError
from engine.evals.service import Change, EvalError, Evals
from engine.protocol import routes
from engine.protocol.records import EvalCancelled, EvalRun, ScenarioList

Resolve = Callable[[str], str]  # a revision -> its commit's sha; ChangeError when there is none


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
        names = data.get("scenarios")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise ApiError(400, "'scenarios' must be a list of scenario names")
        repeat = _positive(data, "repeat", "runs of each scenario at each version")
        turns = _positive(data, "turns", "the last user turns to re-ask")
        project = data.get("project")
        if project is not None and not (isinstance(project, str) and project):
            raise ApiError(400, "'project' must be the directory of an opencode project")
        if turns and names:
            raise ApiError(400, "give 'scenarios' or 'turns', not both: re-asked turns are not scenarios")
        try:
            record = evals.start(
                await change(),
                names or None,
                repeat,
                turns,
                Path(project) if isinstance(project, str) else None,
            )
        except EvalError as exc:
            raise ApiError(409, str(exc)) from exc
        if data.get("wait"):
            record = await evals.wait(record.id)
        return answer(record)

    def latest(found: EvalRun | None, what: str) -> Response:
        if found is None:
            raise ApiError(404, f"no behaviour checks of {what} yet; start them with POST")
        return answer(found)

    @router.serve(routes.SCENARIOS)
    async def scenarios(request: Request) -> Response:
        found, errors = await asyncio.to_thread(evals.scenarios)
        return answer(ScenarioList([s.info() for s in found], errors))

    @router.serve(routes.CHANGE_EVAL)
    async def change_eval(request: Request) -> Response:
        return await evaluating(request, lambda: evals.commit(request.path_params["rev"]))

    @router.serve(routes.PENDING_EVAL)
    async def pending_eval(request: Request) -> Response:
        return await evaluating(request, lambda: evals.pending_change(request.path_params["id"]))

    @router.serve(routes.CHANGE_EVAL_LATEST)
    async def change_eval_latest(request: Request) -> Response:
        try:
            sha = await asyncio.to_thread(resolve, request.path_params["rev"])
        except ChangeError as exc:
            raise ApiError(404, str(exc)) from exc
        return latest(evals.latest(sha), f"commit {sha[:10]}")

    @router.serve(routes.PENDING_EVAL_LATEST)
    async def pending_eval_latest(request: Request) -> Response:
        pending_id = request.path_params["id"]
        return latest(evals.latest(pending_id), f"pending change {pending_id}")

    @router.serve(routes.EVAL)
    async def one(request: Request) -> Response:
        eval_id = request.path_params["id"]
        found = evals.get(eval_id)
        if found is None:
            raise ApiError(404, f"no eval {eval_id} (the engine keeps the last 20 by id)")
        return answer(found)

    @router.serve(routes.EVAL_CANCEL)
    async def cancel(request: Request) -> Response:
        eval_id = request.path_params["id"]
        if evals.cancel(eval_id):
            return answer(EvalCancelled(eval_id, True))
        found = evals.get(eval_id)
        if found is None:
            raise ApiError(404, f"no eval {eval_id}")
        raise ApiError(409, f"eval {eval_id} is not running (it is {found.state})")
