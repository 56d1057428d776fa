"""The console's only way to the engine: its HTTP API and its event stream (so the console can watch
an engine on another machine)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from engine.protocol import API_VERSION, API_VERSION_HEADER, Announcement, Event


class EngineError(RuntimeError):
    """The engine refused or failed a request; the message is the engine's own explanation, and
    `details` the other fields of its answer (such as the later changes a revert conflicts with)."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class EngineGone(RuntimeError):
    """The engine did not answer (stopped, restarting, unreachable)."""


@dataclass(frozen=True)
class Target:
    """Where the console finds its engine; `workspace` (when known) finds it again after a restart."""

    url: str
    token: str
    workspace: str | None = None

    @classmethod
    def announced(cls, workspace: str, *, alive: bool = False) -> Target | None:
        """The engine announced in `<workspace>/state/engine.json` (address and token), if any;
        with `alive`, only if it answers its health check."""
        found = Announcement.read(workspace)
        if found is None or (alive and not found.alive()):
            return None
        return cls(found.url, found.token, workspace)


class EngineClient:
    def __init__(self, target: Target, timeout: float = 30.0) -> None:
        self.target = target
        self._http = httpx.AsyncClient(
            base_url=target.url.rstrip("/"),
            headers={"authorization": f"Bearer {target.token}", API_VERSION_HEADER: str(API_VERSION)},
            timeout=httpx.Timeout(timeout, connect=3.0),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        try:
            kwargs: dict[str, Any] = {"params": {k: v for k, v in (params or {}).items() if v is not None}}
            if json_body is not None:
                kwargs["json"] = json_body
            if timeout is not None:
                kwargs["timeout"] = timeout
            try:
                resp = await self._http.request(method, path, **kwargs)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if method != "GET":
                    raise
                # A kept-alive connection the engine (or a proxy) closed just as it was reused: the
                # request never reached it. A read is asked again, once, on a new connection.
                resp = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise EngineGone(
                f"the engine at {self.target.url} does not answer ({type(exc).__name__})"
            ) from exc
        try:
            data = resp.json()
        except ValueError:
            data = {"error": resp.text[:500]}
        if resp.status_code >= 400:
            message = data.get("error") if isinstance(data, dict) else str(data)
            raise EngineError(str(message), data if isinstance(data, dict) else None)
        return data

    async def get(self, path: str, **params: Any) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any = None, timeout: float | None = None) -> Any:
        return await self.request("POST", path, json_body=body or {}, timeout=timeout)

    async def events(self, since: int | None, brief: bool = True) -> AsyncIterator[Event]:
        """Engine events as they happen; with `since`, first the recent ones after that sequence number.
        `brief`: hook runs as summaries (the console fetches a run's details when it is selected)."""
        params: dict[str, Any] = {"since": since} if since is not None else {}
        if brief:
            params["brief"] = 1
        try:
            async with self._http.stream(
                "GET", "/v1/events", params=params, timeout=httpx.Timeout(30.0, read=60.0)
            ) as resp:
                if resp.status_code != 200:
                    raise EngineError(f"event stream refused: HTTP {resp.status_code}")
                data: list[str] = []
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif not line and data:
                        with contextlib.suppress(ValueError):
                            message = json.loads("\n".join(data))
                            if isinstance(message, dict):
                                yield Event.from_dict(message)
                        data = []
        except httpx.HTTPError as exc:
            raise EngineGone(f"the event stream from {self.target.url} ended ({type(exc).__name__})") from exc
