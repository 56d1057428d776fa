"""The whole API is one contract (engine/protocol/routes.py): every `/v1/...` route named anywhere in
the code is one it declares, the engine serves exactly the declared routes, every route has its typed
call (engine/protocol/calls.py), and a real engine's answers are the records the contract names."""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from engine.cli.client import EngineClient
from engine.protocol import calls, routes
from engine.protocol.calls import Call
from engine.protocol.records import (
    Attempt,
    ChangeList,
    EngineStatus,
    FailureList,
    FileAtChange,
    Health,
    HeartbeatStatus,
    HookRun,
    RunList,
    ScenarioList,
    StageRun,
    TickList,
    ToolCall,
    ToolCallRequest,
)
from engine.protocol.routes import ROUTES
from tests.support.engine_process import EngineProcess
from tests.support.environment import EVOLVE, isolated_env

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("engine", "evolve_console", "evolve_demo", "shim", "bench")

# A path segment as code writes it: a literal, or a parameter (a Python f-string's `{...}`, a JS
# template's `${...}`), possibly several in one segment.
_SEGMENT = r"(?:\$\{[^}]*\}|\{[^}]*\}|[A-Za-z0-9_.\-~*])+"
_ROUTE = re.compile(rf"/v1((?:/{_SEGMENT})*)")
_FILLED = re.compile(r"\$?\{[^}]*\}")


def routes_named(text: str) -> set[str]:
    """The routes a source text names, parameters written `{}`: `f"/v1/runs/{run_id}"` is
    `/v1/runs/{}`. The bare prefix (`"/v1/"`, `"/v1"`) names no route."""
    found = set()
    for match in _ROUTE.finditer(text):
        rest = match.group(1).rstrip(".")
        if rest.strip("/"):
            found.add("/v1" + _FILLED.sub("{}", rest))
    return found


def declares(template: str, named: str) -> bool:
    """Whether the declared `template` is the route `named`: the same segments, where a parameter
    of either side stands for any one segment."""
    a, b = template.split("/"), named.split("/")
    return len(a) == len(b) and all(
        x == y or x.startswith("{") or y.startswith("{") for x, y in zip(a, b, strict=True)
    )


def source_files(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (REPO / top).rglob("*") if p.suffix in (".py", ".js"))


def test_the_scan_reads_routes_as_code_writes_them() -> None:
    text = """f"/v1/runs/{run_id}" `/v1/tools/${spec.name}/call` f"/v1/stages/{request['stage']}"
    "/v1/health." url.includes("/v1/") "/v1/events?since=0" /v1/tools/*/call"""
    assert routes_named(text) == {
        "/v1/runs/{}",
        "/v1/tools/{}/call",
        "/v1/stages/{}",
        "/v1/health",
        "/v1/events",
        "/v1/tools/*/call",
    }
    assert declares("/v1/tools/{name}/call", "/v1/tools/notes_add/call")
    assert declares("/v1/heartbeat/fire", "/v1/heartbeat/{}")
    assert not declares("/v1/tools/{name}/call", "/v1/tools/*/permission")
    assert not declares("/v1/runs", "/v1/runs/{}")


def test_every_route_the_code_names_is_declared() -> None:
    templates = [r.path for r in ROUTES]
    undeclared = {
        f"{path.relative_to(REPO)}: {named}"
        for path in source_files(*SCANNED)
        for named in routes_named(path.read_text(encoding="utf-8"))
        if not any(declares(t, named) for t in templates)
    }
    assert undeclared == set(), "declare these in engine/protocol/routes.py (or fix the name)"


def test_each_route_is_declared_once() -> None:
    keys = [r.key for r in ROUTES]
    assert len(keys) == len(set(keys))
    constants = {name: value for name, value in vars(routes).items() if isinstance(value, routes.Route)}
    assert sorted(r.key for r in constants.values()) == sorted(keys), "a route constant missing from ROUTES"


def test_the_engine_serves_exactly_the_declared_routes(tmp_path: Path) -> None:
    from starlette.routing import Route

    from engine.api import build_app
    from engine.runtime import Engine

    app = build_app(Engine(tmp_path, journal=False), "t")
    served = {
        (method, r.path)
        for r in app.app.routes  # type: ignore[attr-defined]
        if isinstance(r, Route)
        for method in r.methods or ()
        if method != "HEAD"  # Starlette adds it to every GET
    }
    assert served == {(r.method, r.path) for r in ROUTES}


def test_every_route_has_its_typed_call() -> None:
    tree = ast.parse((REPO / "engine" / "protocol" / "calls.py").read_text(encoding="utf-8"))
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "routes"
    }
    declared = {name for name, value in vars(routes).items() if isinstance(value, routes.Route)}
    assert declared - used == set(), "add a function to engine/protocol/calls.py for these"


def test_a_call_fills_its_path_and_keeps_only_declared_query_parameters_and_given_fields() -> None:
    revert = calls.revert("HEAD^", refresh=["ses_a"])
    assert (revert.method, revert.path, revert.query) == ("POST", "/v1/changes/HEAD%5E/revert", {})
    assert revert.body == {"refresh": ["ses_a"], "together": False}  # `by` not given: left out
    listed = calls.runs(session="ses_a", failed=True, limit=5)
    assert (listed.method, listed.path, listed.body) == ("GET", "/v1/runs", None)
    assert listed.query == {"session": "ses_a", "failed": "1", "limit": "5"}
    assert calls.heartbeat_fire().body == {}  # a POST without a body sends an empty object
    with pytest.raises(TypeError, match="no query parameter"):
        calls.call(routes.RUNS, query={"sesion": "typo"})
    with pytest.raises(TypeError, match="takes rev"):
        calls.call(routes.CHANGE)
    with pytest.raises(calls.NotAnAnswer):
        calls.status().decode(["not", "an", "object"])


# ---- the console, until its call sites go through `send` ----------------------------------------


def test_the_console_names_no_route_it_sends_typed_calls() -> None:
    """Every request of the console is a typed call of the contract (`client.send(calls....)`): no
    module of it builds a route string, the transport included."""
    named = {
        f"{path.relative_to(REPO)}: {n}"
        for path in source_files("evolve_console")
        for n in routes_named(path.read_text("utf-8"))
    }
    assert named == set(), "console call sites send typed calls (client.send(calls....)), not route strings"


# ---- a real engine answers the records the contract names ---------------------------------------


def answered(client: EngineClient, call: Call[Any]) -> Any:
    """Send `call`; check that the raw answer holds no field its record lacks and that the record
    decoded from it gives every field back as it came; return the record."""
    raw = client.request(call.method, call.path, json=call.body, params=call.query)
    record = call.decode(raw)
    declared = {f.name for f in fields(record)}
    assert set(raw) <= declared, f"{call.route.key} answered fields its record lacks: {set(raw) - declared}"
    again = record.to_dict()
    assert {k: again[k] for k in raw} == raw, f"{call.route.key}: the record does not give its answer back"
    return record


def test_a_real_engine_answers_each_route_with_its_record(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = isolated_env(tmp_path)
    subprocess.run([*EVOLVE, "init", str(ws)], env=env, check=True, capture_output=True, cwd=REPO)
    engine = EngineProcess(ws, env, tmp_path / "engine.log").start()
    client = EngineClient(engine.url, engine.token)
    try:
        assert isinstance(answered(client, calls.health()), Health)
        assert isinstance(answered(client, calls.status()), EngineStatus)
        dispatched = answered(client, calls.stage("mutate_request", {"system": []}, with_runs=True))
        assert isinstance(dispatched, StageRun) and dispatched.run_records
        assert [r.id for r in dispatched.run_records] == dispatched.runs
        without = answered(client, calls.stage("mutate_request", {"system": []}))
        assert without.run_records is None
        listed = answered(client, calls.runs(dispatch=dispatched.id))
        assert isinstance(listed, RunList) and {r.id for r in listed.runs} == set(dispatched.runs)
        assert isinstance(answered(client, calls.run(listed.runs[0].id)), HookRun)
        answered(client, calls.dispatches(limit=1))
        request = ToolCallRequest(args={"timezone": "UTC"}, origin="operator")
        made = answered(client, calls.tool_call("evolve_datetime", request))
        assert isinstance(made, ToolCall) and made.error is None
        answered(client, calls.tool_calls(tool="evolve_datetime"))
        answered(client, calls.tools())
        answered(client, calls.tool_permission("evolve_datetime", {}))
        answered(client, calls.sessions())
        assert isinstance(answered(client, calls.heartbeat()), HeartbeatStatus)
        assert isinstance(answered(client, calls.heartbeat_ticks(limit=5)), TickList)
        assert isinstance(answered(client, calls.failures()), FailureList)
        assert answered(client, calls.heartbeat_pause()).paused
        assert not answered(client, calls.heartbeat_resume()).paused
        answered(client, calls.commits(limit=5))
        changes = answered(client, calls.changes(limit=5))
        assert isinstance(changes, ChangeList) and changes.changes
        head = changes.changes[0]
        assert answered(client, calls.change(head.sha)).sha == head.sha
        answered(client, calls.impact(head.sha))
        answered(client, calls.reach(head.sha))
        answered(client, calls.diff(head.sha))
        file = answered(client, calls.file_at(head.sha, head.files[0]))
        assert isinstance(file, FileAtChange) and file.path == head.files[0]
        rename = {"hook": "notes.py", "oldString": 'NAME = "notes"', "newString": 'NAME = "memo"'}
        rejected = answered(client, calls.tool_call("evolve_hook_edit", ToolCallRequest(args=rename)))
        assert rejected.error == "validation failed:"
        [tried] = answered(client, calls.changes(limit=5)).attempts
        whole = answered(client, calls.attempt(tried.id))
        assert isinstance(whole, Attempt) and whole.diff and whole.output
        scenarios = answered(client, calls.scenarios())
        assert isinstance(scenarios, ScenarioList) and scenarios.scenarios and scenarios.errors == []
    finally:
        client.close()
        engine.stop()
