"""Stages and what the journal recorded: a stage dispatched by hand, hook runs, stage dispatches and
tool calls. The three listings are one code path: the contract's query parameters, read once, handed
to the journal's query method."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer, body, opt_id, query
from engine.api.journaling import journal_failing
from engine.journal.store import Journal, JournalFailing
from engine.protocol import routes
from engine.protocol.records import (
    DispatchList,
    HookRun,
    Record,
    RunList,
    StageResult,
    StageRun,
    ToolCallList,
)
from engine.protocol.routes import A, Route
from engine.protocol.stages import STAGES

FLUSH_TIMEOUT_S = 10.0


class Dispatching(Protocol):
    """What a stage dispatched by hand needs (engine.hooks.stages.Stages)."""

    async def dispatch(
        self, stage: str, context: dict[str, Any] | None = None, *, session: str | None = None
    ) -> StageResult: ...

    def runs_of(self, result: StageResult) -> list[HookRun]: ...


async def flushed(journal: Journal) -> None:
    """Wait until what the journal was given is on disk; a 503 (retry) when its writer is stuck or
    cannot write."""
    try:
        await asyncio.to_thread(journal.flush, FLUSH_TIMEOUT_S)
    except JournalFailing as exc:
        raise journal_failing(str(exc)) from None
    except TimeoutError:
        raise ApiError(
            503,
            f"the journal's writer is behind ({journal.pending} record(s) not yet on disk after "
            f"{FLUSH_TIMEOUT_S:.0f} s); retry shortly",
            retry_after=1,
        ) from None


def add_run_routes(router: Router, journal: Journal | None, stages: Dispatching) -> None:
    def needed() -> Journal:
        if journal is None:
            raise ApiError(503, "this engine runs without a journal")
        return journal

    @router.serve(routes.STAGE)
    async def stage(request: Request) -> Response:
        data = await body(request)
        context = data.get("context") or {}
        if not isinstance(context, dict):
            raise ApiError(400, "'context' must be an object")
        name = request.path_params["stage"]
        if name not in STAGES:
            raise ApiError(404, f"unknown stage {name!r}; stages: {', '.join(STAGES)}")
        result = await stages.dispatch(name, context, session=opt_id(data, "session"))
        if not (data.get("with_runs") and journal is not None):
            return answer(result)
        await flushed(journal)
        return answer(StageRun(**vars(result), run_records=stages.runs_of(result)))

    def listing(route: Route[A], read: Callable[[Journal, dict[str, Any]], Record]) -> None:
        @router.serve(route)
        async def handler(request: Request) -> Response:
            found = needed()
            # What was already announced on the event stream must be in the answer: a client that
            # reads /v1/health's seq, then this, then subscribes since that seq misses nothing.
            await flushed(found)
            return answer(read(found, query(request, route)))

    def runs(j: Journal, q: dict[str, Any]) -> RunList:
        dispatch = q.pop("dispatch")  # the query's name of the journal's dispatch_id
        return RunList(j.runs(**q, dispatch_id=dispatch), j.counts())

    listing(routes.RUNS, runs)
    listing(routes.DISPATCHES, lambda j, q: DispatchList(j.dispatches(**q)))
    listing(routes.TOOL_CALLS, lambda j, q: ToolCallList(j.tool_calls(**q)))

    @router.serve(routes.RUN)
    async def run(request: Request) -> Response:
        item = needed().run(request.path_params["id"])
        if item is None:
            raise ApiError(404, f"no run {request.path_params['id']}")
        return answer(item)
