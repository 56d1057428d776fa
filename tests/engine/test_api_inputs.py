"""No request body bricks anything: every POST route of a real engine gets malformed bodies (values
of every wrong type in every field it reads, at the top and nested, NaN, numbers too large for a
float, lone surrogates, nesting 10,000 deep, bodies over the size limit) and must answer each with a
4xx naming the problem, or do its work; never a 500. Afterwards, and after a restart, every listing
answers 200 with JSON that parses."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env

# A hook that answers every stage, so that stages really run with what the requests carried.
ECHO = "#!/bin/sh\ncat >/dev/null\necho '{}'\n"

SESSION = "ses_fuzz"
# Each route with a body it accepts; the fields below are broken one at a time.
ROUTES: dict[str, dict[str, Any]] = {
    "/v1/tools/evolve_datetime/permission": {"args": {"timezone": "UTC"}},
    "/v1/tools/evolve_datetime/call": {
        "args": {"timezone": "UTC"},
        "session": SESSION,
        "call_id": "c1",
        "origin": "tool",
        "history": [{"info": {"role": "user", "agent": "a"}, "parts": [{"type": "text", "text": "hi"}]}],
    },
    "/v1/opencode/connect": {
        "url": "http://127.0.0.1:9",
        "directory": "/tmp",
        "token": "t",
        "mode": "server",
        "shim_version": "1",
    },
    "/v1/opencode/disconnect": {"id": "oc_none"},
    "/v1/opencode/system": {
        "session": SESSION,
        "system": ["you are"],
        "history": [{"info": {"role": "user"}, "parts": [{"type": "text", "text": "hi"}]}],
    },
    "/v1/opencode/chat-message": {
        "session": SESSION,
        "agent": "build",
        "model": {"providerID": "p", "modelID": "m"},
        "synthetic": False,
    },
    "/v1/opencode/tool-before": {
        "session": SESSION,
        "tool": "bash",
        "call_id": "c2",
        "args": {"command": "ls"},
        "history": [],
        "wait": True,
    },
    "/v1/opencode/tool-after": {
        "session": SESSION,
        "tool": "bash",
        "call_id": "c2",
        "args": {"command": "ls"},
        "title": "ls",
        "output": "a\nb",
        "wait": True,
    },
    "/v1/opencode/compacting": {"session": SESSION, "history": [], "prompt": "p"},
    "/v1/opencode/before-turn": {"session": SESSION, "history": [], "tools": ["bash"]},
    "/v1/opencode/tools-offered": {"tools": [{"name": "bash", "description": "d", "parameters": {}}]},
    "/v1/opencode/assistant": {
        "session": SESSION,
        "message": {"id": "m1", "agent": "build", "tokens": {"input": 3, "output": 4}, "summary": None},
        "parts": [{"type": "text", "text": "done"}, {"type": "reasoning", "text": "hm"}],
        "history": [],
    },
    "/v1/opencode/event": {"type": "session.updated", "properties": {"info": {"id": SESSION, "title": "t"}}},
    "/v1/stages/idle": {"context": {"answer": "x"}, "session": SESSION, "with_runs": True},
    "/v1/changes/HEAD/approve": {"by": "me"},
    "/v1/pending/chg_none/approve": {"by": "me"},
    "/v1/pending/chg_none/reject": {"by": "me", "reason": "no"},
    "/v1/pending/chg_none/dismiss": {"by": "me", "reason": "no"},
    "/v1/debug/load": {"count": 2, "stdout_bytes": 10},
    "/v1/heartbeat/pause": {},
    "/v1/heartbeat/resume": {},
}
# Paths inside the bodies to break as well (a number is an index into an array).
NESTED: dict[str, list[tuple[Any, ...]]] = {
    "/v1/tools/evolve_datetime/call": [("history", 0), ("history", 0, "info"), ("history", 0, "parts")],
    "/v1/opencode/system": [("system", 0), ("history", 0), ("history", 0, "info"), ("history", 0, "parts")],
    "/v1/opencode/chat-message": [("model", "providerID")],
    "/v1/opencode/tool-before": [("args", "command")],
    "/v1/opencode/assistant": [
        ("message", "id"),
        ("message", "agent"),
        ("message", "summary"),
        ("message", "tokens"),
        ("message", "tokens", "input"),
        ("parts", 0),
        ("parts", 0, "type"),
        ("parts", 0, "text"),
    ],
    "/v1/opencode/event": [
        ("type",),
        ("properties", "info"),
        ("properties", "info", "id"),
        ("properties", "info", "title"),
    ],
    "/v1/stages/idle": [("context", "answer")],
}
# Other shapes of opencode's events, each broken in its own fields.
EVENTS: list[tuple[dict[str, Any], list[tuple[Any, ...]]]] = [
    (
        {"type": "session.status", "properties": {"sessionID": SESSION, "status": {"type": "busy"}}},
        [("properties", "sessionID"), ("properties", "status"), ("properties", "status", "type")],
    ),
    ({"type": "session.idle", "properties": {"sessionID": SESSION}}, [("properties", "sessionID")]),
    ({"type": "session.deleted", "properties": {"info": {"id": "ses_gone"}}}, [("properties", "info", "id")]),
]
VALUES: list[Any] = [1, -1, 1.5, 10**30, "s", "", True, False, None, [], [1, "a"], {}, {"a": {"b": 1}}]
# Values that JSON text can carry and a Python dict cannot write: spliced into the body as text.
RAW_VALUES = [
    "NaN",
    "-Infinity",
    "1e999",
    '"\\ud800"',
    "[" * 10_000 + "]" * 10_000,
    '"' + "x" * 200_000 + '"',
]
MARK = "__raw_value__"


def with_value(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(base)
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


def cases() -> Iterator[tuple[str, str]]:
    """(route, body text) for every broken body."""
    shapes = [(route, base, [(k,) for k in base] + NESTED.get(route, [])) for route, base in ROUTES.items()]
    shapes += [("/v1/opencode/event", base, paths) for base, paths in EVENTS]
    for route, base, paths in shapes:
        for path in paths:
            for value in VALUES:
                yield route, json.dumps(with_value(base, path, value))
            for raw in RAW_VALUES:
                yield route, json.dumps(with_value(base, path, MARK)).replace(f'"{MARK}"', raw)
        for text in ["not json", "[1, 2]", '"text"', "null", "{" * 10_000 + "}" * 10_000, '{"a": NaN}']:
            yield route, text


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[EngineProcess]:
    workspace = tmp_path / "ws"
    (workspace / "hooks").mkdir(parents=True)
    hook = workspace / "hooks" / "echo.sh"
    hook.write_text(ECHO, encoding="utf-8")
    hook.chmod(0o755)
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO), EVOLVE_DEBUG_LOAD="1")
    process = EngineProcess(workspace, env, tmp_path / "engine.log")
    process.start()
    yield process
    process.stop()


def listings_answer(engine: EngineProcess) -> None:
    for path in [
        "/v1/runs",
        "/v1/dispatches",
        "/v1/tool-calls",
        "/v1/sessions",
        f"/v1/sessions/{SESSION}",
        "/v1/status",
        "/v1/changes",
        "/v1/pending/chg_none",
    ]:
        resp = engine.request("GET", path, check=False)
        assert resp.status_code < 500, f"GET {path} -> {resp.status_code}: {resp.text[:500]}"
        resp.json()


def test_no_body_gets_a_500(engine: EngineProcess) -> None:
    failures: list[str] = []
    answered = 0
    with engine.client() as client:
        for route, text in cases():
            resp = client.post(route, content=text.encode("utf-8", "surrogatepass"))
            answered += 1
            if resp.status_code >= 500:
                failures.append(f"POST {route} {text[:120]!r} -> {resp.status_code}: {resp.text[:200]}")
            elif resp.status_code >= 400:
                assert "error" in resp.json(), (route, text[:120], resp.text[:200])
    assert answered > 1000
    assert not failures, f"{len(failures)} of {answered} bodies got a 500:\n" + "\n".join(failures[:40])
    listings_answer(engine)
    assert "Traceback" not in engine.log_tail(10_000)
    engine.stop()
    engine.start()
    listings_answer(engine)


def test_a_body_over_the_limit_is_a_clear_413(engine: EngineProcess, tmp_path: Path) -> None:
    big = json.dumps({"session": SESSION, "history": [], "system": ["x" * (33 * 1024 * 1024)]})
    with engine.client() as client:
        resp = client.post("/v1/opencode/system", content=big)
        assert resp.status_code == 413
        assert "max_request_bytes" in resp.json()["error"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            for _ in range(40):
                yield b"x" * (1024 * 1024)

        resp = client.post("/v1/opencode/system", content=chunks())
        assert resp.status_code == 413
        assert client.get("/v1/health").status_code == 200
    # The limit is the configuration's: raised, the same body goes through.
    (engine.workspace / "config").mkdir(exist_ok=True)
    (engine.workspace / "config" / "evolve.jsonc").write_text('{"max_request_bytes": 67108864}')
    engine.stop()
    engine.start()
    resp = httpx.post(
        engine.url + "/v1/opencode/system",
        content=big,
        headers={"authorization": f"Bearer {engine.token}"},
        timeout=120,
        verify=False,
    )
    assert resp.status_code == 200
