"""Replays: a change (a commit or a pending change) played on the journal's recorded inputs; the
latest replay of a change, one replay, cancelling one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer, body
from engine.changes.history import ChangeError
from engine.protocol import routes
from engine.protocol.records import ReplayCancelled, ReplayResult
from engine.replay.inputs import UnknownStage
from engine.replay.replayer import DEFAULT_LIMIT, Change, Replayer, ReplayError

Resolve = Callable[[str], str]  # a revision -> its commit's sha; ChangeError when there is none


def add_replay_routes(router: Router, replays: Replayer, resolve: Resolve) -> None:
    async def replaying(request: Request, change: Callable[[], Awaitable[Change]]) -> Response:
        """Start a replay (`{stages?, limit?, wait?}`); with `wait`, answer when it has finished."""
        data = await body(request)
        stages = data.get("stages")
        if stages is not None and not (isinstance(stages, list) and all(isinstance(s, str) for s in stages)):
            raise ApiError(400, "'stages' must be a list of stage names")
        limit = data.get("limit", DEFAULT_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ApiError(400, "'limit' must be a positive integer (recorded inputs per stage)")
        try:
            record = replays.start(await change(), stages or None, limit)
        except UnknownStage as exc:
            raise ApiError(400, str(exc)) from exc
        except ReplayError as exc:
            raise ApiError(409, str(exc)) from exc
        if data.get("wait"):
            record = await replays.wait(record.id)
        return answer(record)

    def latest(found: ReplayResult | None, what: str) -> Response:
        if found is None:
            raise ApiError(404, f"no replay of {what} yet; start one with POST")
        return answer(found)

    @router.serve(routes.CHANGE_REPLAY)
    async def change_replay(request: Request) -> Response:
        return await replaying(request, lambda: replays.commit(request.path_params["rev"]))

    @router.serve(routes.PENDING_REPLAY)
    async def pending_replay(request: Request) -> Response:
        return await replaying(request, lambda: replays.pending_change(request.path_params["id"]))

    @router.serve(routes.CHANGE_REPLAY_LATEST)
    async def change_replay_latest(request: Request) -> Response:
        try:
            sha = await asyncio.to_thread(resolve, request.path_params["rev"])
        except ChangeError as exc:
            raise ApiError(404, str(exc)) from exc
        return latest(replays.latest(sha), f"commit {sha[:10]}")

    @router.serve(routes.PENDING_REPLAY_LATEST)
    async def pending_replay_latest(request: Request) -> Response:
        pending_id = request.path_params["id"]
        return latest(replays.latest(pending_id), f"pending change {pending_id}")

    @router.serve(routes.REPLAY)
    async def replay(request: Request) -> Response:
        replay_id = request.path_params["id"]
        found = replays.get(replay_id)
        if found is None:
            raise ApiError(404, f"no replay {replay_id} (the engine keeps the last 20 by id)")
        return answer(found)

    @router.serve(routes.REPLAY_CANCEL)
    async def cancel(request: Request) -> Response:
        replay_id = request.path_params["id"]
        if replays.cancel(replay_id):
            return answer(ReplayCancelled(replay_id, True))
        found = replays.get(replay_id)
        if found is None:
            raise ApiError(404, f"no replay {replay_id}")
        raise ApiError(409, f"replay {replay_id} is not running (it is {found.state})")
