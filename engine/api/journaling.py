"""Acknowledged means kept, or refused: while the journal cannot write (a full disk, an I/O error, a
lock another program holds), the routes whose work the journal records answer `503` at once, with
`Retry-After` and `"journal": "failing"`, instead of taking work whose record would be lost. The
engine takes them again by itself once the journal writes (engine.journal.writer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from engine.api.http import ApiError
from engine.journal.store import Journal
from engine.protocol import routes
from engine.protocol.routes import Route

RETRY_AFTER_S: Final = 2

JOURNALED: Final[frozenset[str]] = frozenset(
    route.key
    for route in (
        routes.STAGE,
        routes.TOOL_CALL,
        routes.HEARTBEAT_FIRE,
        routes.DEBUG_LOAD,
        routes.OPENCODE_SYSTEM,
        routes.OPENCODE_CHAT_MESSAGE,
        routes.OPENCODE_TOOL_BEFORE,
        routes.OPENCODE_TOOL_AFTER,
        routes.OPENCODE_COMPACTING,
        routes.OPENCODE_BEFORE_TURN,
        routes.OPENCODE_ASSISTANT,
        routes.OPENCODE_EVENT,
    )
)
"""The routes whose work makes records (hook runs, dispatches, tool calls, events)."""


def journal_failing(reason: str) -> ApiError:
    return ApiError(
        503,
        f"the journal cannot write ({reason}): the engine takes no work it would journal until it "
        "can, and tries again by itself; retry shortly",
        {"journal": "failing"},
        retry_after=RETRY_AFTER_S,
    )


def refusing(journal: Journal | None) -> Callable[[Route[Any]], ApiError | None]:
    """The refusal of a route while the journal cannot write, or None."""

    def refusal(route: Route[Any]) -> ApiError | None:
        if journal is None or route.key not in JOURNALED:
            return None
        reason = journal.failing
        return journal_failing(reason) if reason is not None else None

    return refusal
