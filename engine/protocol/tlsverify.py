"""Whether an HTTP client checks certificates: only where there are any. A rule every client of the
engine (and the engine, of opencode) follows, hence here, where the console can import it too."""

from __future__ import annotations


def verify_for(url: str) -> bool:
    """httpx's `verify` for a client of `url`: True (the system's trusted authorities) for https;
    False for plain http, which never uses TLS, so that no certificate store is loaded (httpx loads
    it for every client it makes: ~30 ms of CPU each, in every `evolve` command, console and health check)."""
    return url.lower().startswith("https:")
