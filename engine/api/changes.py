"""Changes and reviews: the history as the operator sees it, a change's impact, diff and files, and
the operator's approvals, reverts and rejections, including of the changes held for review."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from engine.api.http import ApiError, Router, answer, body, opt_str, query
from engine.changes.attempts import Attempts
from engine.changes.history import ChangeError, Changes
from engine.protocol import routes
from engine.protocol.records import Change, ChangeList, CommitLog, LoggedCommit, PendingChange

_T = TypeVar("_T")


async def changing(action: Callable[[], Awaitable[_T]]) -> _T:
    """An operator action on changes: a refusal (ChangeError) is a 409 with its reason."""
    try:
        return await action()
    except ChangeError as exc:
        raise ApiError(409, str(exc), exc.details) from exc


def text_field(data: dict[str, Any], key: str, limit: int) -> str | None:
    """A string that goes into git (a commit, a note) or a held change: at most `limit` characters,
    of text that encodes (no lone surrogates)."""
    value = opt_str(data, key)
    if value is None:
        return None
    if len(value) > limit:
        raise ApiError(400, f"{key!r} must be at most {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"{key!r} must be text (it holds an unpaired surrogate)") from None
    return value


def operator(data: dict[str, Any]) -> str:
    """Who acts (`by`): a name of at most 200 characters; "operator" when not given."""
    return text_field(data, "by", 200) or "operator"


def counts(history: list[Change], pending: list[PendingChange], attempts: int) -> dict[str, int]:
    """What waits, for the badges: only what can still be decided counts as awaiting."""
    return {
        "awaiting": sum(p.status == "pending" for p in pending),
        "stale": sum(p.status == "stale" for p in pending),
        "unreviewed": sum(c.state == "unreviewed" for c in history),
        "attempts": attempts,
    }


def add_change_routes(router: Router, changes: Changes, attempts: Attempts) -> None:
    @router.serve(routes.COMMITS)
    async def commits(request: Request) -> Response:
        found = await asyncio.to_thread(changes.log, query(request, routes.COMMITS)["limit"])
        return answer(CommitLog([LoggedCommit.from_dict(c) for c in found]))

    @router.serve(routes.CHANGES)
    async def listed(request: Request) -> Response:
        limit = query(request, routes.CHANGES)["limit"]
        history = await asyncio.to_thread(changes.history, limit)
        held = [p.summary() for p in changes.pending(include_decided=True)]
        tried = await asyncio.to_thread(attempts.listed, limit)
        return answer(ChangeList(history, held, tried, counts(history, held, len(tried))))

    @router.serve(routes.ATTEMPT)
    async def attempt(request: Request) -> Response:
        attempt_id = request.path_params["id"]
        found = await asyncio.to_thread(attempts.get, attempt_id)
        if found is None:
            raise ApiError(404, f"there is no attempt {attempt_id} among the newest thousand")
        return answer(found)

    @router.serve(routes.CHANGE)
    async def change(request: Request) -> Response:
        rev = request.path_params["rev"]
        return answer(await changing(lambda: asyncio.to_thread(changes.change, rev)))

    @router.serve(routes.CHANGE_IMPACT)
    async def impact(request: Request) -> Response:
        rev = request.path_params["rev"]
        return answer(await changing(lambda: asyncio.to_thread(changes.impact, rev)))

    @router.serve(routes.CHANGE_REACH)
    async def reach(request: Request) -> Response:
        rev = request.path_params["rev"]
        return answer(await changing(lambda: asyncio.to_thread(changes.reach, rev)))

    @router.serve(routes.CHANGE_DIFF)
    async def diff(request: Request) -> Response:
        rev = request.path_params["rev"]
        return answer(await changing(lambda: asyncio.to_thread(changes.diff, rev)))

    @router.serve(routes.CHANGE_FILE)
    async def file(request: Request) -> Response:
        wanted = query(request, routes.CHANGE_FILE)
        rev, path, old_path = request.path_params["rev"], wanted["path"], wanted["old_path"]
        return answer(await changing(lambda: asyncio.to_thread(changes.file, rev, path, old_path)))

    @router.serve(routes.CHANGE_APPROVE)
    async def approve(request: Request) -> Response:
        who = operator(await body(request))
        return answer(await changing(lambda: changes.approve(request.path_params["rev"], who)))

    @router.serve(routes.CHANGE_REVERT)
    async def revert(request: Request) -> Response:
        data = await body(request)
        who = operator(data)
        refresh = data.get("refresh") or []
        if not isinstance(refresh, list) or not all(isinstance(s, str) for s in refresh):
            raise ApiError(400, "'refresh' must be a list of session ids")
        together = data.get("together", False)
        if not isinstance(together, bool):
            raise ApiError(400, "'together' must be true or false")
        rev = request.path_params["rev"]
        return answer(await changing(lambda: changes.revert(rev, who, refresh, together)))

    @router.serve(routes.PENDING)
    async def pending(request: Request) -> Response:
        try:
            return answer(changes.review(request.path_params["id"]))
        except ChangeError as exc:
            raise ApiError(409, str(exc)) from exc

    @router.serve(routes.PENDING_APPROVE)
    async def approve_pending(request: Request) -> Response:
        who = operator(await body(request))
        return answer(await changing(lambda: changes.approve_pending(request.path_params["id"], who)))

    @router.serve(routes.PENDING_REJECT)
    async def reject_pending(request: Request) -> Response:
        data = await body(request)
        who, reason = operator(data), text_field(data, "reason", 10_000)
        return answer(await changing(lambda: changes.reject_pending(request.path_params["id"], who, reason)))

    @router.serve(routes.PENDING_DISMISS)
    async def dismiss_pending(request: Request) -> Response:
        data = await body(request)
        who, reason = operator(data), text_field(data, "reason", 10_000)
        return answer(await changing(lambda: changes.dismiss_pending(request.path_params["id"], who, reason)))
