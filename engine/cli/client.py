"""The command line's client for a running engine's HTTP API (the console has its own, asynchronous
one). The address and token come from the workspace's announcement, or are given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from engine.protocol.api import API_VERSION, API_VERSION_HEADER
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
        )

    @classmethod
    def for_workspace(cls, root: Path, timeout: float = 30.0) -> EngineClient | None:
        """The running engine of the workspace at `root`, or None when none answers."""
        found = running(root)
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
