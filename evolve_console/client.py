"""The console's only way to the engine: its HTTP API and its event stream (so the console can watch
an engine on another machine). `send` sends one of the contract's typed calls (engine.protocol.calls)
and returns its answer as the route's record; `events` follows the event stream. The console names
no route itself: every request is a call of the contract."""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from engine.protocol import API_VERSION, API_VERSION_HEADER, Announcement, Event, calls
from engine.protocol.calls import Call, NotAnAnswer
from engine.protocol.routes import A
from engine.protocol.tlsverify import verify_for


class EngineError(RuntimeError):
    """The engine refused or failed a request; the message is the engine's own explanation, and
    `details` the other fields of its answer (such as the later changes a revert conflicts with)."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class EngineGone(RuntimeError):
    """The engine did not answer (stopped, restarting, unreachable)."""


def _certificate_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate check that failed under `exc`, if that is why there was no answer."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def why_unanswered(exc: httpx.HTTPError) -> str:
    """Why a request got no answer, in words (not the name of httpx's exception)."""
    bad = _certificate_error(exc)
    if bad is not None:
        return (
            f"its certificate does not match ({bad.verify_message or bad.reason}): it is not the engine "
            'you trust, or the console was not given its certificate ("ca" in the agents file, or --ca)'
        )
    if isinstance(exc, httpx.ConnectTimeout):
        return "it did not take the connection in time"
    if isinstance(exc, httpx.ConnectError):
        return "nothing listens at that address"
    if isinstance(exc, httpx.TimeoutException):
        return "it took too long to answer"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "the connection closed before it answered"
    return "the request failed on its way"


@dataclass(frozen=True)
class Target:
    """Where the console finds its engine; `workspace` (when known) finds it again after a restart."""

    url: str
    token: str
    workspace: str | None = None
    ca: str | None = None  # the certificate to trust for an https URL (None: the system's authorities)

    @classmethod
    def announced(cls, workspace: str, *, alive: bool = False) -> Target | None:
        """The engine announced in `<workspace>/state/engine.json` (address and token), if any;
        with `alive`, only if it answers its health check."""
        found = Announcement.read(workspace)
        if found is None or (alive and not found.alive()):
            return None
        return cls(found.url, found.token, workspace)


def refusal(url: str, status: int, data: Any, headers: httpx.Headers) -> str | None:
    """What an answer of `status` means in plain words, when it is not the engine's own explanation
    of a request: a token refused, an engine of another API version, something that is no engine."""
    if API_VERSION_HEADER not in headers:
        # Every answer of an evolve engine carries its API version, refusals included.
        return (
            f"what answers at {url} is not an evolve engine (HTTP {status}, without the {API_VERSION_HEADER} "
            "header): check the address and the port"
        )
    theirs = headers.get(API_VERSION_HEADER, "")
    if status == 401:
        return (
            f"the engine at {url} refused the token: it is not this engine's token (a local engine's is in "
            "its state/engine.json; an engine started with --token-file has the one in that file)"
        )
    if status == 409 and theirs != str(API_VERSION):
        return (
            f"the engine at {url} speaks evolve API {theirs}, this console API {API_VERSION}: install the same "
            "evolve release on both sides"
        )
    return None


class EngineClient:
    def __init__(self, target: Target, timeout: float = 30.0) -> None:
        self.target = target
        verify: ssl.SSLContext | bool = verify_for(target.url)
        if target.ca:
            # Only the certificate given: a self-signed engine's, or its own authority's.
            verify = ssl.create_default_context(cafile=target.ca)
        self._http = httpx.AsyncClient(
            base_url=target.url.rstrip("/"),
            headers={"authorization": f"Bearer {target.token}", API_VERSION_HEADER: str(API_VERSION)},
            timeout=httpx.Timeout(timeout, connect=3.0),
            verify=verify,
            # An engine elsewhere is reached directly (or through the operator's own tunnel), never
            # through a proxy of the environment, which would see the token.
            trust_env=False,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call[A], timeout: float | None = None) -> A:
        """Send a typed call; its answer as the route's record. EngineGone when the engine does not
        answer; EngineError when it refuses (its reason) or answers something other than the record."""
        data = await self._request(call, timeout)
        try:
            return call.decode(data)
        except (NotAnAnswer, TypeError, ValueError) as exc:
            raise EngineError(
                f"the engine answered {call.method} {call.path} with something this console cannot "
                "read: is one of them older than the other? Update both to the same version"
            ) from exc

    async def _request(self, call: Call[A], timeout: float | None) -> Any:
        method = call.method
        kwargs: dict[str, Any] = {"params": call.query}
        if call.body is not None:
            kwargs["json"] = call.body
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            try:
                resp = await self._http.request(method, call.path, **kwargs)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if method != "GET":
                    raise
                # A kept-alive connection the engine (or a proxy) closed just as it was reused: the
                # request never reached it. A read is asked again, once, on a new connection.
                resp = await self._http.request(method, call.path, **kwargs)
        except httpx.HTTPError as exc:
            raise EngineGone(
                f"the engine at {self.target.url} does not answer: {why_unanswered(exc)}"
            ) from exc
        try:
            data = resp.json()
        except ValueError:
            data = {"error": resp.text[:500]}
        if resp.status_code >= 400 or API_VERSION_HEADER not in resp.headers:
            plain = refusal(self.target.url, resp.status_code, data, resp.headers)
            message = plain or (data.get("error") if isinstance(data, dict) else str(data))
            raise EngineError(str(message), data if isinstance(data, dict) else None)
        return data

    async def events(self, since: int | None, brief: bool = True) -> AsyncIterator[Event]:
        """Engine events as they happen; with `since`, first the recent ones after that sequence number.
        `brief`: hook runs as summaries (the console fetches a run's details when it is selected)."""
        stream = calls.events(since, brief)
        try:
            async with self._http.stream(
                stream.method, stream.path, params=stream.query, timeout=httpx.Timeout(30.0, read=60.0)
            ) as resp:
                if resp.status_code != 200 or API_VERSION_HEADER not in resp.headers:
                    plain = refusal(self.target.url, resp.status_code, None, resp.headers)
                    raise EngineError(
                        plain or f"the engine refused its event stream (HTTP {resp.status_code})"
                    )
                data: list[str] = []
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif not line and data:
                        with contextlib.suppress(ValueError):
                            message = json.loads("\n".join(data))
                            if isinstance(message, dict):
                                yield stream.decode(message)
                        data = []
        except httpx.HTTPError as exc:
            raise EngineGone(f"the event stream from {self.target.url} ended: {why_unanswered(exc)}") from exc
