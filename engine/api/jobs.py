"""The routes of a kind of background job about a change (replays, behaviour checks): start one on a
commit or on a pending change, the latest of a change, one by id, cancelling one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer
from engine.changes.errors import ChangeError
from engine.core.jobs import KEEP_IN_MEMORY
from engine.protocol.records import Record
from engine.protocol.routes import Route

Resolve = Callable[[str], str]  # a revision -> its commit's sha; ChangeError when there is none
C = TypeVar("C")  # what a job is about: the kind's Change
C_co = TypeVar("C_co", covariant=True)


@dataclass(frozen=True)
class JobRoutes:
    """The routes of one kind of job, from the contract."""

    change: Route[Any]  # POST: start on a commit
    pending: Route[Any]  # POST: start on a pending change
    change_latest: Route[Any]
    pending_latest: Route[Any]
    one: Route[Any]
    cancel: Route[Any]


class JobService(Protocol[C_co]):
    """What the routes need of a kind of job (Replayer, Evals)."""

    async def commit(self, rev: str) -> C_co: ...

    async def pending_change(self, pending_id: str) -> C_co: ...

    def latest(self, target: str) -> Record | None: ...

    def get(self, job_id: str) -> Any: ...  # its record (with a `state`), None when unknown

    def cancel(self, job_id: str) -> bool: ...


def names(data: dict[str, Any], key: str, what: str) -> list[str] | None:
    """The list of names a start asks for (`what`: "stage names"), None when it asks for none."""
    found = data.get(key)
    if found is not None and not (isinstance(found, list) and all(isinstance(n, str) for n in found)):
        raise ApiError(400, f"'{key}' must be a list of {what}")
    return found or None


def add_job_routes(
    router: Router,
    routes: JobRoutes,
    jobs: JobService[C],
    resolve: Resolve,
    start: Callable[[Request, Callable[[], Awaitable[C]]], Awaitable[Response]],
    *,
    noun: str,
    none_yet: str,
    cancelled: Callable[[str, bool], Record],
) -> None:
    """`start`: answers a POST that starts a job on the change it is given; `noun`: a job in
    messages ("replay"); `none_yet`: the 404 of a change without one ("no replay of {what} yet; start
    one with POST"); `cancelled`: the answer of a cancel."""

    def latest(found: Record | None, what: str) -> Response:
        if found is None:
            raise ApiError(404, none_yet.format(what=what))
        return answer(found)

    @router.serve(routes.change)
    async def on_commit(request: Request) -> Response:
        return await start(request, lambda: jobs.commit(request.path_params["rev"]))

    @router.serve(routes.pending)
    async def on_pending(request: Request) -> Response:
        return await start(request, lambda: jobs.pending_change(request.path_params["id"]))

    @router.serve(routes.change_latest)
    async def change_latest(request: Request) -> Response:
        try:
            sha = await asyncio.to_thread(resolve, request.path_params["rev"])
        except ChangeError as exc:
            raise ApiError(404, str(exc)) from exc
        return latest(jobs.latest(sha), f"commit {sha[:10]}")

    @router.serve(routes.pending_latest)
    async def pending_latest(request: Request) -> Response:
        pending_id = request.path_params["id"]
        return latest(jobs.latest(pending_id), f"pending change {pending_id}")

    @router.serve(routes.one)
    async def one(request: Request) -> Response:
        job_id = request.path_params["id"]
        found = jobs.get(job_id)
        if found is None:
            raise ApiError(404, f"no {noun} {job_id} (the engine keeps the last {KEEP_IN_MEMORY} by id)")
        return answer(found)

    @router.serve(routes.cancel)
    async def cancel(request: Request) -> Response:
        job_id = request.path_params["id"]
        if jobs.cancel(job_id):
            return answer(cancelled(job_id, True))
        found = jobs.get(job_id)
        if found is None:
            raise ApiError(404, f"no {noun} {job_id}")
        raise ApiError(409, f"{noun} {job_id} is not running (it is {found.state})")
