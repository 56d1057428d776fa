"""The engine itself: whether it answers (`health`), its status, stopping it, and the synthetic load
the console's benchmark feeds on."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from engine import __version__
from engine.api.http import ApiError, Router, answer, body, opt_int
from engine.protocol import routes
from engine.protocol.api import API_VERSION
from engine.protocol.records import EngineStatus, Health, LoadRecorded, Ok

Inject = Callable[[int, int], int]  # (count, stdout bytes) -> synthetic hook runs recorded


def add_status_routes(
    router: Router,
    *,
    workspace: Path,
    last_seq: Callable[[], int],
    status: Callable[[], EngineStatus],
    shutdown: Callable[[], None],
    load: Inject | None = None,
    served: Counter[str] | None = None,
) -> None:
    """`last_seq()`: the newest event's number; `load`: only when the engine was started with
    EVOLVE_DEBUG_LOAD=1; `served`: the requests answered, by route (EngineStatus.requests)."""

    @router.serve(routes.HEALTH)
    async def health(request: Request) -> Response:
        # Subscribe to /v1/events?since=<seq> to miss nothing.
        return answer(Health(True, __version__, API_VERSION, str(workspace), os.getpid(), last_seq()))

    @router.serve(routes.STATUS)
    async def engine_status(request: Request) -> Response:
        return answer(replace(status(), requests=dict(served or {})))

    @router.serve(routes.DEBUG_LOAD)
    async def debug_load(request: Request) -> Response:
        """Synthetic hook runs through the real journal and event stream, for load tests of the
        console."""
        if load is None:
            raise ApiError(404, "not enabled: start the engine with EVOLVE_DEBUG_LOAD=1")
        data = await body(request)
        count = opt_int(data, "count", 1, 1, 100_000)
        size = opt_int(data, "stdout_bytes", 0, 0, 16 * 1024 * 1024)
        return answer(LoadRecorded(load(count, size)))

    @router.serve(routes.SHUTDOWN)
    async def stop(request: Request) -> Response:
        shutdown()
        return answer(Ok())
