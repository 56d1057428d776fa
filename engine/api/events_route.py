"""`GET /v1/events`: the engine's events as Server-Sent Events (protocol.events)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from engine.api.http import ApiError, Router, sse
from engine.protocol.api import BRIEF_RUN_FIELDS
from engine.protocol.events import Event, EventKind
from engine.runtime import Engine

KEEP_ALIVE_S = 15.0


def add_events_route(router: Router, engine: Engine) -> None:
    @router.add("/v1/events", "GET")
    async def events(request: Request) -> Response:
        raw_since = request.query_params.get("since")
        try:
            since = int(raw_since) if raw_since is not None else -1  # -1: no backlog, live only
        except ValueError:
            raise ApiError(400, "query parameter 'since' must be an integer") from None
        brief = request.query_params.get("brief") in ("1", "true", "yes")
        sub = engine.bus.subscribe()
        backlog = [e for e in engine.bus.recent if since >= 0 and e.seq > since]

        def encode(e: Event) -> bytes:
            data = e.to_dict()
            if brief and e.kind == EventKind.HOOK_RUN:
                # A watcher that fetches details on demand needs only the summary of each run.
                data["data"] = {k: e.data.get(k) for k in BRIEF_RUN_FIELDS}
            return sse(data)

        async def stream() -> AsyncIterator[bytes]:
            stopping = asyncio.ensure_future(engine.shutdown_requested.wait())
            getting: asyncio.Future[Event] | None = None
            try:
                yield b": evolve event stream\n\n"
                for e in backlog:
                    yield encode(e)
                last = backlog[-1].seq if backlog else since
                while True:
                    getting = asyncio.ensure_future(sub.get())
                    done, _ = await asyncio.wait(
                        {getting, stopping}, timeout=KEEP_ALIVE_S, return_when=asyncio.FIRST_COMPLETED
                    )
                    if stopping in done:  # the engine is stopping: end the stream now
                        getting.cancel()
                        return
                    if getting not in done:
                        getting.cancel()
                        yield b": keep-alive\n\n"
                        continue
                    e = getting.result()
                    if e.seq <= last:
                        continue
                    last = e.seq
                    yield encode(e)
            finally:
                # Closed mid-wait (the client went away, the engine stops): no task may be left
                # pending, or the event loop complains when it is collected.
                stopping.cancel()
                if getting is not None:
                    getting.cancel()
                sub.close()

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )
