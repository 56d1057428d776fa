#!/usr/bin/env python3
"""The engine's CPU per tool call, from the requests the opencode plugin sends for one, without opencode.

bench/opencode_overhead.py measures what evolve adds to real opencode, where one `opencode run` costs
seconds of CPU and its figures spread by tens of ms per call on 2 cores. This script sends a warm
`evolve serve` the traffic the shim sends for a tool call of opencode 1.18.33 and measures what the
engine spends on it: its own CPU and that of its hook processes, warm-start servers and git, per
call, and how long each request takes to be acknowledged. No LLM, no opencode: the engine's share
alone.

Two traffic shapes alternate in blocks, so that the machine's drift hits both: "now", what the shim
sends (one tool-before with the session's history, one tool-after, one finished response), and
"before", the same plus the four session events opencode repeats at every step (unchanged title and
busy status), which the shim forwarded until it learned to leave them out.

The workspace is the example one (`evolve init`) plus hooks/20-tools.py, bench/opencode_overhead.py's
python3 hook for tool_before, tool_after and observe_message, so per call the engine runs 4 hooks
(the example hook observes messages too). `--no-tool-hook` leaves it out. Calls are sent one every
`--gap` ms (the model's step, default 40 ms); around each block the script waits until the engine
reports itself idle and reads its CPU.

Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/shim_traffic.py [--calls 200] [--blocks 4] [--gap 40] [--no-tool-hook] [--cold]
     [--keep-shims]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/support is not an installed package

from opencode_overhead import TOOL_HOOK, engine_cpu_ms  # noqa: E402  (bench/opencode_overhead.py)

from engine.protocol import calls  # noqa: E402
from engine.protocol.api import (  # noqa: E402
    API_VERSION,
    API_VERSION_HEADER,
    CONNECTION_HEADER,
)
from engine.protocol.calls import Call  # noqa: E402
from engine.protocol.records import (  # noqa: E402
    AssistantRequest,
    ChatMessageRequest,
    ConnectRequest,
    EngineStatus,
    OpencodeEvent,
    ToolAfterRequest,
    ToolBeforeRequest,
)
from tests.support.engine_process import EngineProcess  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

SESSION = "ses_bench0000000000000000000"
FILE_TEXT = "".join(f"line {i}\n" for i in range(1, 6))


def history(step: int) -> list[dict[str, Any]]:
    """The session's messages as the shim forwards them before step `step`: a user message, then per
    earlier step an assistant message with its read call (about 4 kB by step 10, as in opencode)."""
    messages: list[dict[str, Any]] = [
        {
            "info": {"role": "user", "agent": "build"},
            "parts": [{"type": "text", "text": "read small.txt ten times"}],
        }
    ]
    for k in range(step):
        messages.append(
            {
                "info": {"role": "assistant", "agent": "build"},
                "parts": [
                    {"type": "step-start"},
                    {
                        "type": "tool",
                        "tool": "read",
                        "callID": f"call_{k}",
                        "state": {
                            "status": "completed",
                            "input": {"filePath": "small.txt"},
                            "output": FILE_TEXT,
                        },
                    },
                    {"type": "step-finish", "reason": "tool-calls"},
                ],
            }
        )
    return messages


def call_requests(step: int, events: bool) -> list[Call[Any]]:
    """The shim's requests for tool call number `step`, in opencode's order (the history as in a
    10-call run: it grows for 10 calls, then starts over). With `events`, the four session events
    opencode repeats at every step (title and busy status unchanged), which the shim used to forward."""
    call_id, message_id = f"call_{step}", f"msg_{step:06d}"
    session_info = {"id": SESSION, "title": "bench", "time": {"updated": step}}
    updated = calls.opencode_event(OpencodeEvent("session.updated", {"info": session_info}))
    status = {"sessionID": SESSION, "status": {"type": "busy"}}
    tool_part = {
        "id": f"prt_{step}",
        "messageID": message_id,
        "sessionID": SESSION,
        "type": "tool",
        "tool": "read",
        "callID": call_id,
        "state": {"status": "completed", "input": {"filePath": "small.txt"}, "output": FILE_TEXT},
    }
    before = calls.tool_before(
        ToolBeforeRequest(
            SESSION, "read", call_id, args={"filePath": "small.txt"}, own=False, history=history(step % 10)
        )
    )
    after = calls.tool_after(ToolAfterRequest(SESSION, "read", call_id, title="small.txt", output=FILE_TEXT))
    message = {
        "id": message_id,
        "agent": "build",
        "finish": "tool-calls",
        "providerID": "mock",
        "modelID": "mock-model",
        "tokens": {"input": 1200 + step, "output": 20, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        "turn": "msg_user",
    }
    parts = [{"type": "step-start"}, tool_part, {"type": "step-finish", "reason": "tool-calls"}]
    finished = calls.assistant(AssistantRequest(SESSION, message, parts))
    if not events:
        return [before, after, finished]
    busy = calls.opencode_event(OpencodeEvent("session.status", status))
    return [updated, busy, before, after, updated, finished, updated]


SHAPES = {
    "before": "the shim forwarding every session event (7 requests per call)",
    "now": "the shim forwarding a session event only when it changes (3 requests per call)",
}


@dataclass
class Measured:
    calls: int = 0
    own_ms: float = 0.0
    children_ms: float = 0.0
    hook_runs: int = 0
    acks: dict[str, list[float]] = field(default_factory=dict)


def make_workspace(base: Path, env: dict[str, str], tool_hook: bool, cold: bool) -> Path:
    ws = base / "ws"
    subprocess.run(
        [sys.executable, "-m", "engine", "init", str(ws)], check=True, capture_output=True, env=env, cwd=REPO
    )
    if tool_hook:
        hook = ws / "hooks" / "20-tools.py"
        hook.write_text(TOOL_HOOK)
        hook.chmod(0o755)
    if cold:
        config = ws / "config" / "evolve.jsonc"
        text = config.read_text()
        config.write_text(text[: text.rindex("}")] + '  "hook_warm_start": false,\n}\n')
    return ws


def sent(client: httpx.Client, call: Call[Any]) -> httpx.Response:
    """The call as data, over the benchmark's own connection (nothing decoded on the timed path)."""
    content = json.dumps(call.body) if call.body is not None else None
    return client.request(call.method, call.path, params=call.query, content=content)


def engine_status(client: httpx.Client) -> EngineStatus:
    status = calls.status()
    return status.decode(sent(client, status).json())


def wait_idle(client: httpx.Client) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if engine_status(client).busy is False:
            return
        time.sleep(0.02)
    raise RuntimeError("the engine stayed busy for 2 minutes")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="tool calls per traffic shape (default 200)")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks per shape (default 4)")
    parser.add_argument("--warmup", type=int, default=10, help="calls sent first, not measured (default 10)")
    parser.add_argument("--gap", type=float, default=40.0, help="ms between tool calls (default 40)")
    parser.add_argument(
        "--no-tool-hook", dest="tool_hook", action="store_false", help="without hooks/20-tools.py"
    )
    parser.add_argument("--cold", action="store_true", help="with hook_warm_start off")
    parser.add_argument("--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_EVOLVE", "EVOLVE_"))}
    python3 = "(PATH unchanged)" if args.keep_shims else drop_shims(env)
    env["PYTHONPATH"] = str(REPO)  # the engine of this checkout, whatever the venv has installed
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-shim-"))
    engine = None
    try:
        ws = make_workspace(base, env, args.tool_hook, args.cold)
        engine = EngineProcess(ws, env, base / "engine.log").start()
        with engine.client() as client:
            client.headers[API_VERSION_HEADER] = str(API_VERSION)
            connect = calls.connect(
                ConnectRequest(
                    "http://127.0.0.1:9", str(base), mode="server", shim_version="bench", command="run"
                )
            )
            conn = sent(client, connect).json()
            if "id" not in conn:
                raise RuntimeError(f"connect refused: {conn}")
            client.headers[CONNECTION_HEADER] = connect.decode(conn).id
            sent(client, calls.chat_message(ChatMessageRequest(SESSION, "build")))
            measured = {shape: Measured() for shape in SHAPES}
            step = 0

            def send(shape: str | None) -> None:
                nonlocal step
                for call in call_requests(step, events=shape == "before"):
                    t0 = time.perf_counter()
                    response = sent(client, call)
                    took = (time.perf_counter() - t0) * 1000
                    if response.status_code >= 300:
                        raise RuntimeError(f"{call.path}: {response.status_code} {response.text}")
                    if shape is not None:
                        measured[shape].acks.setdefault(call.path, []).append(took)
                step += 1
                time.sleep(args.gap / 1000)

            for _ in range(args.warmup):
                send(None)
            t0 = time.perf_counter()
            per_block = max(1, args.calls // args.blocks)
            for block in range(args.blocks):  # the two shapes alternate, so that drift hits both
                for shape in list(SHAPES)[block % 2 :] + list(SHAPES)[: block % 2]:
                    wait_idle(client)
                    own0, children0 = engine_cpu_ms(engine.pid)
                    runs0 = _count(engine_status(client))
                    for _ in range(per_block):
                        send(shape)
                    wait_idle(client)
                    own1, children1 = engine_cpu_ms(engine.pid)
                    runs1 = _count(engine_status(client))
                    m = measured[shape]
                    m.calls += per_block
                    m.own_ms += own1 - own0
                    m.children_ms += children1 - children0
                    m.hook_runs += runs1 - runs0
            wall = (time.perf_counter() - t0) * 1000
    finally:
        if engine is not None:
            engine.stop()
        shutil.rmtree(base, ignore_errors=True)

    print(
        f"hooks' python3: {python3}; warm starts {'off' if args.cold else 'on'}; tool hook "
        f"{'on' if args.tool_hook else 'off'}; {args.blocks} blocks of {per_block} calls per shape in "
        f"{wall / 1000:.1f} s; load average {os.getloadavg()[0]:.2f}"
    )
    totals = {}
    for shape, m in measured.items():
        own, children = m.own_ms / m.calls, m.children_ms / m.calls
        totals[shape] = own + children
        print(f"\n{shape}: {SHAPES[shape]}; {m.hook_runs / m.calls:.1f} hook runs per call")
        for route, times in sorted(m.acks.items()):
            q = statistics.quantiles(times, n=20)
            print(
                f"   {route:28} n={len(times):5}  ack median {statistics.median(times):5.2f} ms  p95 {q[18]:6.2f} ms"
            )
        print(
            f"   engine CPU per tool call: {own + children:.1f} ms (engine {own:.1f} ms; its hooks, "
            f"warm-start servers and git {children:.1f} ms)"
        )
    print(
        f"\nengine CPU per tool call from the shim's traffic: {totals['now']:.1f} ms now, "
        f"{totals['before']:.1f} ms with every session event forwarded ({totals['now'] / totals['before']:.2f}x)"
    )
    return 0


def _count(status: EngineStatus) -> int:
    runs = (status.journal or {}).get("runs")
    if not isinstance(runs, int):
        raise RuntimeError("the engine's status has no journal run count")
    return runs


if __name__ == "__main__":
    sys.exit(main())
