"""The HTTP API's version, the headers of the contract, and the routes the opencode plugin calls
(`routes.ROUTES` declares every route).

The shim (`shim/evolve.js`) cannot import Python: it repeats the version and its routes, and a test
checks that its copies match these.
"""

from __future__ import annotations

from typing import Final

from .routes import ROUTES

API_VERSION: Final = 2
"""Raised whenever a route, a request body or an answer changes incompatibly."""

API_VERSION_HEADER: Final = "x-evolve-api"
"""Sent by clients that want a 409 (not a misunderstanding) from an engine of another API version; and
on every answer of the engine, refusals included, so that a client knows it reached an evolve engine
(and of which API version) before it reads anything else of the answer."""

HANDLED_HEADER: Final = "x-evolve-handled"
"""On every answer to the shim: the stages some hook runs for, comma-separated, so that the shim awaits
a tool stage only when a hook handles it (and learns of a re-discovery with its next request)."""

SHIM_ROUTES: Final = tuple(dict.fromkeys(r.path for r in ROUTES if r.shim))
"""Every route the shim calls (those of the contract marked `shim`); the engine serves each of them."""

CONNECTION_HEADER: Final = "x-evolve-connection"
"""The shim's connection id (the `id` of `POST /v1/opencode/connect`'s answer), on every later call."""

BRIEF_RUN_FIELDS: Final = (
    "id",
    "started_at",
    "stage",
    "hook",
    "session",
    "dispatch_id",
    "duration_ms",
    "error",
    "exit_code",
    "signal",
)
"""The fields of a hook run sent on the event stream with `?brief=1`: what a list of runs shows.
A watcher fetches the rest (`GET /v1/runs/{id}`) when a run is selected."""
