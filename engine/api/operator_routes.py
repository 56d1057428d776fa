"""The routes the console and the command line use: what the engine recorded (runs, stage results,
tool calls, sessions, changes, heartbeat) and the operator's commands (fire, pause, approve, revert,
reject, run a stage)."""

from __future__ import annotations

import asyncio
import difflib
import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from engine import __version__
from engine.api.http import ApiError, JSONResponse, Router, body, float_param, int_param, opt_int, opt_str
from engine.changes.gitstore import GitError
from engine.changes.history import ChangeError
from engine.journal.store import Journal
from engine.protocol.api import API_VERSION
from engine.protocol.stages import STAGES
from engine.replay.inputs import UnknownStage
from engine.replay.replayer import DEFAULT_LIMIT, Change, ReplayError
from engine.runtime import Engine

_T = TypeVar("_T")


async def changing(action: Callable[[], Awaitable[_T]]) -> _T:
    """An operator action on changes: a refusal (ChangeError) is a 409 with its reason."""
    try:
        return await action()
    except ChangeError as exc:
        raise ApiError(409, str(exc), exc.details) from exc


FLUSH_TIMEOUT_S = 10.0


async def flushed(journal: Journal) -> None:
    """Wait until what the journal was given is on disk; a 503 (retry) when its writer is stuck."""
    try:
        await asyncio.to_thread(journal.flush, FLUSH_TIMEOUT_S)
    except TimeoutError:
        raise ApiError(
            503,
            f"the journal's writer is behind ({journal.pending} record(s) not yet on disk after "
            f"{FLUSH_TIMEOUT_S:.0f} s); retry shortly",
            retry_after=1,
        ) from None


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


def lines_of(text: str) -> list[str]:
    """The lines of `text` as git counts them (split at "\n" only), each with its line end."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def add_operator_routes(router: Router, engine: Engine) -> None:
    def journal() -> Journal:
        if engine.journal is None:
            raise ApiError(503, "this engine runs without a journal")
        return engine.journal

    @router.add("/v1/health", "GET")
    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "ok": True,
                "version": __version__,
                "api": API_VERSION,
                "workspace": str(engine.workspace.root),
                "pid": os.getpid(),
                "seq": engine.bus.last_seq,  # subscribe to /v1/events?since=<this> to miss nothing
            }
        )

    @router.add("/v1/status", "GET")
    async def status(request: Request) -> Response:
        return JSONResponse(replace(engine.status(), requests=dict(router.served)).to_dict())

    @router.add("/v1/stages/{stage}", "POST")
    async def stage(request: Request) -> Response:
        data = await body(request)
        context = data.get("context") or {}
        if not isinstance(context, dict):
            raise ApiError(400, "'context' must be an object")
        name = request.path_params["stage"]
        if name not in STAGES:
            raise ApiError(404, f"unknown stage {name!r}; stages: {', '.join(STAGES)}")
        result = await engine.stages.dispatch(name, context, session=opt_str(data, "session"))
        out: dict[str, Any] = result.to_dict()
        if data.get("with_runs") and engine.journal is not None:
            await flushed(engine.journal)
            by_id = {r.id: r for r in engine.journal.runs(dispatch_id=result.id, limit=10_000)}
            out["run_records"] = [by_id[i].to_dict() for i in result.runs if i in by_id]
        return JSONResponse(out)

    # ---- the journal ------------------------------------------------------------------------

    @router.add("/v1/runs", "GET")
    async def runs(request: Request) -> Response:
        found = journal()
        # Runs already announced on the event stream must be in the answer: a client that reads
        # /v1/health's seq, then this, then subscribes since that seq misses none of them.
        await flushed(found)
        failed = request.query_params.get("failed")
        items = found.runs(
            stage=request.query_params.get("stage"),
            hook=request.query_params.get("hook"),
            session=request.query_params.get("session"),
            failed=None if failed is None else failed.lower() in ("1", "true", "yes"),
            dispatch_id=request.query_params.get("dispatch"),
            before=float_param(request, "before"),
            limit=int_param(request, "limit", 200),
        )
        return JSONResponse({"runs": [r.to_dict() for r in items], "counts": found.counts()})

    @router.add("/v1/runs/{id}", "GET")
    async def run(request: Request) -> Response:
        item = journal().run(request.path_params["id"])
        if item is None:
            raise ApiError(404, f"no run {request.path_params['id']}")
        return JSONResponse(item.to_dict())

    @router.add("/v1/dispatches", "GET")
    async def dispatches(request: Request) -> Response:
        found = journal()
        await flushed(found)  # as for /v1/runs
        items = found.dispatches(
            stage=request.query_params.get("stage"),
            session=request.query_params.get("session"),
            before=float_param(request, "before"),
            limit=int_param(request, "limit", 200),
        )
        return JSONResponse({"dispatches": [d.to_dict() for d in items]})

    @router.add("/v1/tool-calls", "GET")
    async def tool_calls(request: Request) -> Response:
        items = journal().tool_calls(
            tool=request.query_params.get("tool"),
            session=request.query_params.get("session"),
            before=float_param(request, "before"),
            limit=int_param(request, "limit", 200),
        )
        return JSONResponse({"tool_calls": [c.to_dict() for c in items]})

    @router.add("/v1/sessions", "GET")
    async def sessions(request: Request) -> Response:
        return JSONResponse({"sessions": [s.info().to_dict() for s in engine.sessions.known()]})

    @router.add("/v1/sessions/{id}", "GET")
    async def session(request: Request) -> Response:
        info = await asyncio.to_thread(engine.sessions.info, request.path_params["id"], True)
        if info is None:
            raise ApiError(404, f"the engine knows no session {request.path_params['id']}")
        info.tools = engine.connections.tools_offered(info.connection)
        return JSONResponse(info.to_dict())

    # ---- the heartbeat ----------------------------------------------------------------------

    @router.add("/v1/heartbeat", "GET")
    async def heartbeat_status(request: Request) -> Response:
        return JSONResponse(engine.heartbeat.status().to_dict())

    @router.add("/v1/heartbeat/fire", "POST")
    async def heartbeat_fire(request: Request) -> Response:
        result = await engine.heartbeat.fire("manual")
        return JSONResponse({"result": result.to_dict(), "status": engine.heartbeat.status().to_dict()})

    @router.add("/v1/heartbeat/pause", "POST")
    async def heartbeat_pause(request: Request) -> Response:
        await engine.heartbeat.pause()
        return JSONResponse(engine.heartbeat.status().to_dict())

    @router.add("/v1/heartbeat/resume", "POST")
    async def heartbeat_resume(request: Request) -> Response:
        await engine.heartbeat.resume()
        return JSONResponse(engine.heartbeat.status().to_dict())

    # ---- changes ----------------------------------------------------------------------------

    @router.add("/v1/commits", "GET")
    async def commits(request: Request) -> Response:
        limit = int_param(request, "limit", 100)
        return JSONResponse({"commits": await asyncio.to_thread(engine.git.log, limit)})

    @router.add("/v1/changes", "GET")
    async def changes(request: Request) -> Response:
        limit = int_param(request, "limit", 200)
        history = await asyncio.to_thread(engine.changes.history, limit)
        pending = [p.summary().to_dict() for p in engine.changes.pending(include_decided=True)]
        return JSONResponse({"changes": [c.to_dict() for c in history], "pending": pending})

    @router.add("/v1/changes/{rev}", "GET")
    async def change(request: Request) -> Response:
        found = await changing(lambda: asyncio.to_thread(engine.changes.change, request.path_params["rev"]))
        return JSONResponse(found.to_dict())

    @router.add("/v1/changes/{rev}/impact", "GET")
    async def change_impact(request: Request) -> Response:
        return JSONResponse(
            await changing(lambda: asyncio.to_thread(engine.changes.impact, request.path_params["rev"]))
        )

    @router.add("/v1/changes/{rev}/diff", "GET")
    async def change_diff(request: Request) -> Response:
        return JSONResponse(
            await changing(lambda: asyncio.to_thread(engine.changes.diff, request.path_params["rev"]))
        )

    @router.add("/v1/changes/{rev}/file", "GET")
    async def change_file(request: Request) -> Response:
        path = request.query_params.get("path")
        if not path:
            raise ApiError(
                400, "query parameter 'path' is required: a file of the commit, e.g. hooks/notes.py"
            )
        rev, old_path = request.path_params["rev"], request.query_params.get("old_path")
        found = await changing(lambda: asyncio.to_thread(engine.changes.file, rev, path, old_path))
        return JSONResponse(found.to_dict())

    @router.add("/v1/changes/{rev}/approve", "POST")
    async def change_approve(request: Request) -> Response:
        who = operator(await body(request))
        return JSONResponse(await changing(lambda: engine.changes.approve(request.path_params["rev"], who)))

    @router.add("/v1/changes/{rev}/revert", "POST")
    async def change_revert(request: Request) -> Response:
        data = await body(request)
        who = operator(data)
        refresh = data.get("refresh") or []
        if not isinstance(refresh, list) or not all(isinstance(s, str) for s in refresh):
            raise ApiError(400, "'refresh' must be a list of session ids")
        together = data.get("together", False)
        if not isinstance(together, bool):
            raise ApiError(400, "'together' must be true or false")
        rev = request.path_params["rev"]
        return JSONResponse(await changing(lambda: engine.changes.revert(rev, who, refresh, together)))

    @router.add("/v1/pending/{id}", "GET")
    async def pending_get(request: Request) -> Response:
        try:
            item = engine.changes.get(request.path_params["id"])
        except ChangeError as exc:
            raise ApiError(409, str(exc)) from exc
        try:
            before = (engine.workspace.root / item.file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            before = ""
        # A last line without a newline gets git's marker, or it would run into the next line.
        diff = "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in difflib.unified_diff(
                lines_of(before),
                lines_of(item.content or ""),
                f"a/{item.file}",
                f"b/{item.file}",
            )
        )
        return JSONResponse({**item.to_dict(), "diff": diff})

    @router.add("/v1/pending/{id}/approve", "POST")
    async def pending_approve(request: Request) -> Response:
        who = operator(await body(request))
        return JSONResponse(
            await changing(lambda: engine.changes.approve_pending(request.path_params["id"], who))
        )

    @router.add("/v1/pending/{id}/reject", "POST")
    async def pending_reject(request: Request) -> Response:
        data = await body(request)
        who, reason = operator(data), text_field(data, "reason", 10_000)
        return JSONResponse(
            await changing(lambda: engine.changes.reject_pending(request.path_params["id"], who, reason))
        )

    # ---- replays -----------------------------------------------------------------------------

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
            record = engine.replays.start(await change(), stages or None, limit)
        except UnknownStage as exc:
            raise ApiError(400, str(exc)) from exc
        except ReplayError as exc:
            raise ApiError(409, str(exc)) from exc
        if data.get("wait"):
            record = await engine.replays.wait(record.id)
        return JSONResponse(record.to_dict())

    def replay_found(found: Any, what: str) -> Response:
        if found is None:
            raise ApiError(404, f"no replay of {what} yet; start one with POST")
        return JSONResponse(found.to_dict())

    @router.add("/v1/changes/{rev}/replay", "POST")
    async def change_replay(request: Request) -> Response:
        return await replaying(request, lambda: engine.replays.commit(request.path_params["rev"]))

    @router.add("/v1/pending/{id}/replay", "POST")
    async def pending_replay(request: Request) -> Response:
        return await replaying(request, lambda: engine.replays.pending_change(request.path_params["id"]))

    @router.add("/v1/changes/{rev}/replay", "GET")
    async def change_replay_latest(request: Request) -> Response:
        rev = request.path_params["rev"]
        try:
            sha = await asyncio.to_thread(engine.git.resolve, rev)
        except GitError:
            sha = ""
        if not sha:
            raise ApiError(404, f"no commit {rev!r} in {engine.workspace.root}")
        return replay_found(engine.replays.latest(sha), f"commit {sha[:10]}")

    @router.add("/v1/pending/{id}/replay", "GET")
    async def pending_replay_latest(request: Request) -> Response:
        pending_id = request.path_params["id"]
        return replay_found(engine.replays.latest(pending_id), f"pending change {pending_id}")

    @router.add("/v1/replays/{id}", "GET")
    async def replay_get(request: Request) -> Response:
        replay_id = request.path_params["id"]
        found = engine.replays.get(replay_id)
        if found is None:
            raise ApiError(404, f"no replay {replay_id} (the engine keeps the last 20 by id)")
        return JSONResponse(found.to_dict())

    @router.add("/v1/replays/{id}/cancel", "POST")
    async def replay_cancel(request: Request) -> Response:
        replay_id = request.path_params["id"]
        if engine.replays.cancel(replay_id):
            return JSONResponse({"id": replay_id, "cancelled": True})
        found = engine.replays.get(replay_id)
        if found is None:
            raise ApiError(404, f"no replay {replay_id}")
        raise ApiError(409, f"replay {replay_id} is not running (it is {found.state})")

    # ---- the engine itself ------------------------------------------------------------------

    @router.add("/v1/debug/load", "POST")
    async def debug_load(request: Request) -> Response:
        """Synthetic hook runs through the real journal and event stream, for load tests of the
        console. Only when the engine was started with EVOLVE_DEBUG_LOAD=1."""
        if engine.env.get("EVOLVE_DEBUG_LOAD") != "1":
            raise ApiError(404, "not enabled: start the engine with EVOLVE_DEBUG_LOAD=1")
        data = await body(request)
        count = opt_int(data, "count", 1, 1, 100_000)
        size = opt_int(data, "stdout_bytes", 0, 0, 16 * 1024 * 1024)
        return JSONResponse({"recorded": engine.runner.inject(count, size)})

    @router.add("/v1/shutdown", "POST")
    async def shutdown(request: Request) -> Response:
        engine.request_shutdown()
        return JSONResponse({"ok": True})
