"""The engine's connections as its clients use them: a connection kept alive and idle for as long as a
client keeps one (httpx, the console's client, keeps one 5 s) still answers, so no client ever sends a
request into a connection the engine is closing."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env

CLIENT_KEEPS_S = 5.0  # httpx's keepalive_expiry: the longest any of the engine's clients keeps one


def health_over(conn: socket.socket, host: str, token: str) -> bytes:
    """GET /v1/health on `conn`, kept alive; the answer's head and body, or b"" if the engine closed."""
    conn.sendall(f"GET /v1/health HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = conn.recv(65536)
        if not chunk:
            return answer
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(
        next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += conn.recv(65536)
    return answer


def test_a_connection_idle_as_long_as_a_client_keeps_one_still_answers(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "hooks").mkdir(parents=True)
    engine = EngineProcess(workspace, isolated_env(tmp_path / "home", PYTHONPATH=str(REPO)), tmp_path / "log")
    engine.start()
    try:
        url = urlsplit(engine.url)
        assert url.hostname is not None and url.port is not None
        with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
            assert health_over(conn, url.netloc, engine.token).startswith(b"HTTP/1.1 200")
            time.sleep(CLIENT_KEEPS_S + 0.5)
            again = health_over(conn, url.netloc, engine.token)
            assert again.startswith(b"HTTP/1.1 200"), f"the engine closed the idle connection: {again!r}"
    finally:
        engine.stop()
