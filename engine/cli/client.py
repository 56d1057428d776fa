"""The command line's transport to a running engine's HTTP API: it sends the contract's typed calls
(`engine.protocol.calls`) synchronously and returns their answers as records; the console has the
asynchronous one. The address and token come from the workspace's announcement, or are given."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from engine.core import strictjson
from engine.protocol.api import API_VERSION, API_VERSION_HEADER
from engine.protocol.calls import Call, NotAnAnswer
from engine.protocol.routes import A
from engine.protocol.tlsverify import verify_for
from engine.service import running


class EngineUnavailable(RuntimeError):
    pass


class EngineClient:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers={"authorization": f"Bearer {token}", API_VERSION_HEADER: str(API_VERSION)},
            timeout=timeout,
            verify=verify_for(self.url),
        )

    @classmethod
    def for_workspace(cls, root: Path, timeout: float = 30.0) -> EngineClient | None:
        """The running engine of the workspace at `root`, or None when none answers."""
        found = running(root)
        return cls(found.url, found.token, timeout) if found else None

    def close(self) -> None:
        self._http.close()

    def send(self, call: Call[A], timeout: float | None = None) -> A:
        """Send a typed call; its answer as the route's record. EngineUnavailable when the engine does
        not answer, refuses (the engine's reason), or answers something else than the record."""
        data = self.request(call.method, call.path, json=call.body, timeout=timeout, params=call.query)
        try:
            return call.decode(data)
        except (NotAnAnswer, TypeError, ValueError) as exc:
            raise EngineUnavailable(
                f"engine {call.method} {call.path}: an answer it cannot read: {exc}"
            ) from exc

    def request(
        self,
        method: str,
        path: str,
        json: Any = None,
        timeout: float | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """One request; the answer's JSON (an object, unless the engine misbehaves)."""
        kwargs: dict[str, Any] = {"params": dict(params or {})}
        if json is not None:
            # strictjson: text UTF-8 cannot hold (a lone surrogate from the command line) is sent
            # \u-escaped, as a JavaScript client sends it, where httpx's own encoding would fail.
            kwargs["content"] = strictjson.dumps(json).encode("utf-8")
            kwargs["headers"] = {"content-type": "application/json"}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise EngineUnavailable(f"the engine at {self.url} did not answer: {exc}") from exc
        try:
            data = resp.json()
        except ValueError:
            data = {"error": resp.text[:500]}
        if resp.status_code >= 400:
            message = data.get("error", data) if isinstance(data, dict) else data
            raise EngineUnavailable(f"engine {method} {path}: HTTP {resp.status_code}: {message}")
        return data
