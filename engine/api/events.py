"""`GET /v1/events`: the engine's events as Server-Sent Events (protocol.events)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from engine.api.http import Router, query, sse
from engine.core.bus import EventBus
from engine.protocol import routes
from engine.protocol.api import BRIEF_RUN_FIELDS
from engine.protocol.events import Event, EventKind

KEEP_ALIVE_S = 15.0


def add_events_route(router: Router, bus: EventBus, stopping: asyncio.Event) -> None:
    """`stopping`: set when the engine stops, which ends every stream."""

    @router.serve(routes.EVENTS)
    async def events(request: Request) -> Response:
        wanted = query(request, routes.EVENTS)
        since: int = wanted["since"]  # -1 (the default): no backlog, live only
        brief: bool = wanted["brief"]
        sub = bus.subscribe()
        backlog = [e for e in bus.recent if since >= 0 and e.seq > since]

        def encode(e: Event) -> bytes:
            data = e.to_dict()
            if brief and e.kind == EventKind.HOOK_RUN:
                # A watcher that fetches details on demand needs only the summary of each run.
                data["data"] = {k: e.data.get(k) for k in BRIEF_RUN_FIELDS}
            return sse(data)

        async def stream() -> AsyncIterator[bytes]:
            ending = asyncio.ensure_future(stopping.wait())
            getting: asyncio.Future[Event] | None = None
            try:
                yield b": evolve event stream\n\n"
                for e in backlog:
                    yield encode(e)
                last = backlog[-1].seq if backlog else since
                while True:
                    getting = asyncio.ensure_future(sub.get())
                    done, _ = await asyncio.wait(
                        {getting, ending}, timeout=KEEP_ALIVE_S, return_when=asyncio.FIRST_COMPLETED
                    )
                    if ending in done:  # the engine is stopping: end the stream now
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
                ending.cancel()
                if getting is not None:
                    getting.cancel()
                sub.close()

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )
