"""The engine's HTTP client for opencode's API (httpx).

opencode is reached either at its own port (`opencode serve --port`, TUI `--port`) or, when it has
none (`opencode run`, the plain TUI), through the shim's loopback proxy, which forwards to opencode's
in-process API and requires its own random token. Either way every request names the workspace
directory, because opencode scopes sessions by directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from engine.protocol.records import ConnectionInfo
from engine.protocol.tlsverify import verify_for


class OpencodeError(RuntimeError):
    """opencode answered, but with an error (or something unusable)."""


class OpencodeUnreachable(OpencodeError):
    """opencode did not answer at all: the connection is presumed gone. `refused`: nothing listens
    there any more (as opposed to an answer that did not come in time)."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class NoOpencode(OpencodeUnreachable):
    """No opencode is connected to the engine."""


@dataclass
class Connection:
    """One opencode process that announced itself through the shim."""

    id: str
    url: str
    directory: str
    token: str | None = None
    mode: str = "unknown"  # in-process | server
    shim_version: str | None = None
    command: str | None = None  # opencode's subcommand: run, serve; None for the TUI
    connected_at: float = field(default_factory=time.time)
    last_ok: float | None = None
    last_error: str | None = None

    def info(self) -> ConnectionInfo:
        return ConnectionInfo(
            id=self.id,
            url=self.url,
            directory=self.directory,
            mode=self.mode,
            shim_version=self.shim_version,
            command=self.command,
            connected_at=self.connected_at,
            last_ok=self.last_ok,
            last_error=self.last_error,
        )


class OpencodeClient:
    def __init__(self, conn: Connection, timeout: float = 10.0) -> None:
        self.conn = conn
        # Percent-encoded as opencode's own client sends it (a path may hold any character).
        headers = {"x-opencode-directory": quote(conn.directory, safe="/")}
        if conn.token:
            headers["authorization"] = f"Bearer {conn.token}"
        self._http = httpx.AsyncClient(
            base_url=conn.url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=2.0),
            verify=verify_for(conn.url),  # opencode's own port, the shim's loopback proxy: http
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        try:
            kwargs: dict[str, Any] = {"json": json, "params": params}
            if timeout is not None:
                kwargs["timeout"] = timeout
            resp = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            self.conn.last_error = f"{type(exc).__name__}: {exc}"
            raise OpencodeUnreachable(
                f"opencode unreachable at {self.conn.url}: {self.conn.last_error}",
                refused=isinstance(exc, httpx.ConnectError),
            ) from exc
        except httpx.HTTPError as exc:  # reached, but the answer was unusable: the connection stays
            raise OpencodeError(f"opencode {method} {path}: bad answer: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            detail = resp.text[:500]
            self.conn.last_error = f"HTTP {resp.status_code}: {detail}"
            raise OpencodeError(f"opencode {method} {path} failed: HTTP {resp.status_code}: {detail}")
        self.conn.last_ok = time.time()
        self.conn.last_error = None
        if resp.status_code == 204 or not resp.content:
            return None
        return resp.json()

    async def health(self, timeout: float) -> None:
        """Whether opencode answers at all (its health route)."""
        await self._request("GET", "/global/health", timeout=timeout)

    async def create_session(self, title: str | None = None) -> dict[str, Any]:
        body = {"title": title} if title else {}
        result: dict[str, Any] = await self._request("POST", "/session", json=body)
        return result

    async def session(self, session: str) -> dict[str, Any]:
        """The session's record as opencode keeps it (title, directory, times, ...)."""
        result: dict[str, Any] = await self._request("GET", f"/session/{session}")
        return result

    async def fork(self, session: str, message: str) -> dict[str, Any]:
        """A new session holding the messages of `session` before `message`."""
        result: dict[str, Any] = await self._request(
            "POST", f"/session/{session}/fork", json={"messageID": message}
        )
        return result

    async def status(self) -> dict[str, Any]:
        """`{session id: {"type": "busy" | ...}}`; idle sessions are absent."""
        result: dict[str, Any] = await self._request("GET", "/session/status")
        return result

    async def messages(self, session: str, limit: int | None = None) -> list[dict[str, Any]]:
        params = {"limit": limit} if limit else None
        result: list[dict[str, Any]] = await self._request(
            "GET", f"/session/{session}/message", params=params
        )
        return result

    async def prompt(
        self,
        session: str,
        text: str,
        *,
        agent: str | None = None,
        model: dict[str, str] | None = None,
        no_reply: bool = False,
        synthetic: bool = True,
        wait: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Send a user message. With `wait`, block until the turn ends (`POST /session/{id}/message`)."""
        body: dict[str, Any] = {"parts": [{"type": "text", "text": text, "synthetic": synthetic}]}
        if agent:
            body["agent"] = agent
        if model:
            body["model"] = model
        if no_reply:
            body["noReply"] = True
        path = f"/session/{session}/message" if wait else f"/session/{session}/prompt_async"
        return await self._request("POST", path, json=body, timeout=timeout)

    async def abort(self, session: str) -> Any:
        """Stop the session's running turn (as the user's cancel does)."""
        return await self._request("POST", f"/session/{session}/abort")

    async def reply_permission(self, request: str, reply: str, message: str | None = None) -> Any:
        """Answer a pending permission request (`once`, `always` or `reject`), as a user would."""
        body: dict[str, Any] = {"reply": reply}
        if message:
            body["message"] = message
        return await self._request("POST", f"/permission/{request}/reply", json=body)

    async def summarize(self, session: str, model: dict[str, str], timeout: float | None = None) -> Any:
        return await self._request("POST", f"/session/{session}/summarize", json=model, timeout=timeout)

    async def archive(self, session: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._request(
            "PATCH", f"/session/{session}", json={"time": {"archived": int(time.time() * 1000)}}
        )
        return result
