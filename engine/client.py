"""A small client for a running engine's HTTP API (the command line uses it; the console has its own
async one). The address and token come from the workspace's `state/engine.json`, or are given."""

from __future__ import annotations

from typing import Any

import httpx

from .server import API_VERSION
from .service import Announcement, running
from .workspace import Workspace


class EngineUnavailable(RuntimeError):
    pass


class EngineClient:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers={"authorization": f"Bearer {token}", "x-evolve-api": str(API_VERSION)},
            timeout=timeout,
        )

    @classmethod
    def for_workspace(cls, ws: Workspace, timeout: float = 30.0) -> EngineClient | None:
        """The running engine of `ws`, or None when none answers."""
        found: Announcement | None = running(ws)
        return cls(found.url, found.token, timeout) if found else None

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, json: Any = None, timeout: float | None = None) -> Any:
        try:
            if timeout is None:
                resp = self._http.request(method, path, json=json)
            else:
                resp = self._http.request(method, path, json=json, timeout=timeout)
        except httpx.HTTPError as exc:
            raise EngineUnavailable(f"the engine at {self.url} did not answer: {exc}") from exc
        try:
            data = resp.json()
        except ValueError:
            data = {"error": resp.text[:500]}
        if resp.status_code >= 400:
            raise EngineUnavailable(
                f"engine {method} {path}: HTTP {resp.status_code}: {data.get('error', data)}"
            )
        return data

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, json: Any = None, timeout: float | None = None) -> Any:
        return self.request("POST", path, json=json or {}, timeout=timeout)
