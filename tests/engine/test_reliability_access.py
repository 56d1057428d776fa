"""Private by default (docs/reliability.md): every route of the contract, asked of a real engine
without the bearer token (and with a wrong one), is refused with a 401 before anything of it runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.protocol.routes import ROUTES
from tests.support.attacks import Engines, engines, write


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


def test_every_route_refuses_a_request_without_the_token(tmp_path: Path, started: Engines) -> None:
    ws = tmp_path / "ws"
    write(ws / "prompts" / "chat.md", "chat\n", 0o644)
    engine = started.start(ws)
    head = engine.head()
    assert len(ROUTES) > 40
    client = httpx.Client(base_url=engine.url, timeout=10, verify=False)
    for route in ROUTES:
        path = route.path
        for name, value in {"stage": "idle", "rev": head, "id": "x", "name": "evolve_datetime"}.items():
            path = path.replace("{" + name + "}", value)
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {engine.token}"}):
            resp = client.request(route.method, path, json={}, headers=headers)
            assert resp.status_code == 401, (route.method, path, headers, resp.status_code)
            assert "unauthorized" in resp.json()["error"]
    client.close()
    assert engine.get("/v1/heartbeat")["paused"] is False  # nothing of what was refused ran
