"""The HTTP API's version, the header that carries it, and the routes the opencode plugin calls.

The shim (`shim/evolve.js`) cannot import Python: it repeats the version and these routes, and a test
checks that its copies match these.
"""

from __future__ import annotations

from typing import Final

API_VERSION: Final = 2
"""Raised whenever a route, a request body or an answer changes incompatibly."""

API_VERSION_HEADER: Final = "x-evolve-api"
"""Sent by clients that want a 409 (not a misunderstanding) from an engine of another API version."""

HANDLED_HEADER: Final = "x-evolve-handled"
"""On every answer to the shim: the stages some hook runs for, comma-separated, so that the shim awaits
a tool stage only when a hook handles it (and learns of a re-discovery with its next request)."""

SHIM_ROUTES: Final = (
    "/v1/health",
    "/v1/tools",
    "/v1/tools/{name}/permission",
    "/v1/tools/{name}/call",
    "/v1/opencode/connect",
    "/v1/opencode/disconnect",
    "/v1/opencode/system",
    "/v1/opencode/chat-message",
    "/v1/opencode/tool-before",
    "/v1/opencode/tool-after",
    "/v1/opencode/compacting",
    "/v1/opencode/before-turn",
    "/v1/opencode/text-complete",
    "/v1/opencode/assistant",
    "/v1/opencode/event",
    "/v1/opencode/tools-offered",
)
"""Every route the shim calls; the engine serves each of them."""

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
