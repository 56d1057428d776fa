"""Replays: a change (a commit or a pending change) played on the journal's recorded inputs; the
latest replay of a change, one replay, cancelling one (the routes every background job has:
engine/api/jobs.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer, body
from engine.api.jobs import JobRoutes, Resolve, add_job_routes, names
from engine.protocol import routes
from engine.protocol.records import ReplayCancelled
from engine.replay.inputs import UnknownStage
from engine.replay.replayer import DEFAULT_LIMIT, Change, Replayer, ReplayError

ROUTES = JobRoutes(
    change=routes.CHANGE_REPLAY,
    pending=routes.PENDING_REPLAY,
    change_latest=routes.CHANGE_REPLAY_LATEST,
    pending_latest=routes.PENDING_REPLAY_LATEST,
    one=routes.REPLAY,
    cancel=routes.REPLAY_CANCEL,
)


def add_replay_routes(router: Router, replays: Replayer, resolve: Resolve) -> None:
    async def replaying(request: Request, change: Callable[[], Awaitable[Change]]) -> Response:
        """Start a replay (`{stages?, limit?, wait?}`); with `wait`, answer when it has finished."""
        data = await body(request)
        stages = names(data, "stages", "stage names")
        limit = data.get("limit", DEFAULT_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ApiError(400, "'limit' must be a positive integer (recorded inputs per stage)")
        try:
            record = replays.start(await change(), stages, limit)
        except UnknownStage as exc:
            raise ApiError(400, str(exc)) from exc
        except ReplayError as exc:
            raise ApiError(409, str(exc)) from exc
        if data.get("wait"):
            record = await replays.wait(record.id)
        return answer(record)

    add_job_routes(
        router,
        ROUTES,
        replays,
        resolve,
        replaying,
        noun="replay",
        none_yet="no replay of {what} yet; start one with POST",
        cancelled=ReplayCancelled,
    )
