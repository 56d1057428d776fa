"""Any stored value is safe to read, list, replay and send (docs/reliability.md, "Nothing bricks it"):
a fuzz test against a real engine (`evolve serve`). Each malformed value (lone surrogates, a NUL,
controls, text in other scripts, a very long word) is stored through every door the engine takes
text in (a stage's session and context, the plugin's session events and histories, a tool call's
arguments, session, call id and turn, a hook's output, a prompt written by the agent), then every
listing of the API is read, the event stream is sent from the start, a change is replayed (waited
for and not), and the command line prints its JSON exports: nothing answers 500, nothing is lost,
nothing fails to encode."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support.attacks import Engines, engines, write
from tests.support.engine_process import EngineProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.hooks

VALUES = [
    "\ud800",  # a lone high surrogate (a JavaScript client's broken emoji)
    "\udfff",
    "a\ud83dz",  # half a pair between letters
    "\u0000",  # NUL
    "\x1b[31mred\x1b[0m\r\n\t\x07",  # terminal escapes and controls
    "\u202eevil\u202c",  # right-to-left override
    "\ufeff\ufffe\uffff",
    "😀 日本語 עברית",
    "x" * 70_000,  # one long word
]

# Echoes its input's context back in its result, so that the values go through a hook and back.
ECHO = f"""#!{sys.executable}
import json, sys
data = json.loads(sys.stdin.read())
if sys.argv[1] == "discover":
    print(json.dumps({{"stages": ["mutate_request", "idle"]}}))
elif sys.argv[1] == "mutate_request":
    print(json.dumps({{"system": [json.dumps(data.get("session"))[:50_000], "VERSION"]}}))
else:
    print(json.dumps({{"log": data.get("answer")}}))
    print(json.dumps({{}}))
"""


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


def encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def send(engine: EngineProcess, path: str, body: Any) -> httpx.Response:
    """POST `body` as a JavaScript client sends it: JSON with every non-ASCII character escaped,
    lone surrogates included (httpx's own encoding refuses those)."""
    return httpx.post(
        engine.url + path,
        content=json.dumps(body, ensure_ascii=True),
        headers={"authorization": f"Bearer {engine.token}", "content-type": "application/json"},
        timeout=120,
        verify=False,
    )


def no_500(resp: httpx.Response, what: str) -> httpx.Response:
    assert resp.status_code < 500, f"{what} -> {resp.status_code}: {resp.text[:500]}"
    return resp


def store_everything(engine: EngineProcess) -> None:
    """Every value through every door."""
    for i, value in enumerate(VALUES):
        session = f"ses_{i}_{value[:40]}"
        no_500(
            send(
                engine,
                "/v1/stages/mutate_request",
                {"context": {"session": {"id": session}, "system": [value]}, "session": session},
            ),
            f"stage with value {i}",
        )
        no_500(
            send(engine, "/v1/stages/idle", {"context": {"answer": value}, "session": session}),
            f"idle with value {i}",
        )
        for event in (
            {"type": "session.created", "properties": {"info": {"id": session, "title": value}}},
            {"type": "session.updated", "properties": {"info": {"id": session, "title": value + "!"}}},
        ):
            no_500(send(engine, "/v1/opencode/event", event), f"event {i}")
        history = [{"info": {"role": "user", "agent": value}, "parts": [{"type": "text", "text": value}]}]
        no_500(
            send(engine, "/v1/opencode/system", {"session": session, "system": [value], "history": history}),
            f"system {i}",
        )
        no_500(
            send(
                engine,
                "/v1/tools/evolve_prompt_read/call",
                {"args": {"prompt": value}, "session": session, "call_id": value, "turn": value},
            ),
            f"tool call {i}",
        )
        written = no_500(
            send(
                engine,
                "/v1/tools/evolve_prompt_write/call",
                {"args": {"prompt": "chat.md", "content": f"chat {i} {value}\n"}, "session": session},
            ),
            f"prompt write {i}",
        ).json()["output"]
        if encodes(value):
            assert written.startswith("successfully wrote"), written
        else:  # a file cannot hold it: refused in so many words, nothing half written
            assert "an unpaired surrogate" in written and "nothing was written" in written, written


def read_everything(engine: EngineProcess) -> dict[str, Any]:
    """Every listing and record the API has, each answered without a 500 and decodable as JSON."""
    got: dict[str, Any] = {}
    for path in ["/v1/status", "/v1/runs", "/v1/dispatches", "/v1/tool-calls", "/v1/sessions", "/v1/changes"]:
        got[path] = no_500(engine.request("GET", path, params={"limit": 500}, check=False), path).json()
    for path in ["/v1/heartbeat", "/v1/commits", "/v1/tools"]:
        got[path] = no_500(engine.request("GET", path, check=False), path).json()
    for run in got["/v1/runs"]["runs"][:40]:
        no_500(engine.request("GET", f"/v1/runs/{run['id']}", check=False), "a run")
    for session in got["/v1/sessions"]["sessions"]:
        # As a client names it in a URL: percent-encoded (every id can be, its surrogates escaped).
        one = no_500(
            engine.request("GET", f"/v1/sessions/{quote(session['id'], safe='')}", check=False), "a session"
        )
        assert one.status_code == 200 and one.json()["id"] == session["id"]
    for change in got["/v1/changes"]["changes"][:5]:
        sha = change["sha"]
        for tail in ["", "/impact", "/diff", "/replay"]:
            no_500(engine.request("GET", f"/v1/changes/{sha}{tail}", check=False), f"change {tail}")
        for file in change["files"]:
            no_500(
                engine.request("GET", f"/v1/changes/{sha}/file", params={"path": file}, check=False), "file"
            )
    # The event stream from its first event to the newest: every event encodes.
    newest = int(engine.get("/v1/health")["seq"])
    seen = 0
    with httpx.stream(
        "GET",
        f"{engine.url}/v1/events",
        params={"since": 0},
        headers={"authorization": f"Bearer {engine.token}"},
        timeout=30,
        verify=False,
    ) as stream:
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen = max(seen, int(json.loads(line[6:])["seq"]))
            if seen >= newest:
                break
    got["events"] = seen
    return got


def test_every_stored_value_can_be_listed_replayed_and_sent(tmp_path: Path, started: Engines) -> None:
    ws = tmp_path / "ws"
    write(ws / "hooks" / "echo.py", ECHO.replace("VERSION", "v1"))
    write(ws / "prompts" / "chat.md", "chat\n", 0o644)
    engine = started.start(ws)
    store_everything(engine)
    got = read_everything(engine)
    titles = {s.get("title") for s in got["/v1/sessions"]["sessions"]}
    assert "\ud800!" in titles and "a\ud83dz!" in titles  # kept, and given back as they came
    engine.call_tool("evolve_hook_write", {"hook": "echo.py", "content": ECHO.replace("VERSION", "v2")})
    # A replay waited for, and one polled for: both end, with the values in their inputs.
    waited = no_500(engine.request("POST", "/v1/changes/HEAD/replay", {"wait": True}, check=False), "replay")
    assert waited.json()["state"] == "done", waited.text[:1000]
    started_replay = engine.post("/v1/changes/HEAD~1/replay", {})
    done = wait_for(
        "the replay to end",
        lambda: (r := engine.get(f"/v1/replays/{started_replay['id']}"))["state"] != "running" and r,
        timeout=120,
    )
    assert done["state"] in ("done", "failed"), done
    no_500(engine.request("GET", "/v1/changes/HEAD/replay", check=False), "the latest replay")
    # Exports of the command line, printed as JSON.
    exported = engine.cli("replay", "HEAD", "--json")
    assert json.loads(exported.stdout)["state"] == "done"
    called = subprocess.run(  # a failed call (no such prompt) exits 1, its record printed all the same
        [
            *engine.command,
            "call",
            "evolve_prompt_read",
            "--args",
            json.dumps({"prompt": "\ud800"}),
            "--json",
            "--workspace",
            str(ws),
        ],
        env=engine.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    record = json.loads(called.stdout)
    assert record["tool"] == "evolve_prompt_read" and record["args"] == {"prompt": "\ud800"}, called.stderr
    staged = engine.cli("stage", "idle", "--input", json.dumps({"answer": "\ud800 \x00"}), "--verbose")
    assert json.loads(staged.stdout)["runs"][0]["logs"] == ["\ud800 \x00"]  # the hook logged it back
    # And after a restart, from the journal alone.
    engine.stop()
    engine = started.start(ws)
    again = read_everything(engine)
    assert len(again["/v1/sessions"]["sessions"]) == len(got["/v1/sessions"]["sessions"])
