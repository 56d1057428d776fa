#!/usr/bin/env python3
"""The engine's CPU per tool call, from the requests the opencode plugin sends for one, without opencode.

bench/opencode_overhead.py measures what evolve adds to real opencode, where one `opencode run` costs
seconds of CPU and its figures spread by tens of ms per call on 2 cores. This script sends a warm
`evolve serve` the traffic the shim sends for a tool call of opencode 1.18.33 and measures what the
engine spends on it: its own CPU and that of its hook processes, warm-start servers and git, per
call, and how long each request takes to be acknowledged. No LLM, no opencode: the engine's share
alone.

Series alternate in blocks, so that the machine's drift hits them alike: "now", what the shim sends
(one tool-before with the session's history, one tool-after, one finished response), and "before",
the same plus the four session events opencode repeats at every step (unchanged title and busy
status), which the shim forwarded until it learned to leave them out. With `--baseline DIR` (a
checkout of an earlier commit with its own .venv) the series are "now" and "baseline": the same
requests to that checkout's engine, started beside this one on a workspace its own `evolve init`
made; the last line gives the engine's own CPU per call (hooks, warm-start servers and git apart)
against the baseline's, as a ratio, with the load average (`--events` adds "before").

The workspace is the example one (`evolve init`) plus hooks/20-tools.py, bench/opencode_overhead.py's
python3 hook for tool_before, tool_after and observe_message, so per call the engine runs 4 hooks
(the example hook observes messages too). `--no-tool-hook` leaves it out. Calls are sent one every
`--gap` ms (the model's step, default 40 ms); around each block the script waits until the engine
reports itself idle and reads its CPU.

Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/shim_traffic.py [--calls 200] [--blocks 4] [--gap 40] [--no-tool-hook] [--cold]
     [--baseline DIR [--events]] [--keep-shims]
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
    parts: list[dict[str, Any]] = [
        {"type": "step-start"},
        tool_part,
        {"type": "step-finish", "reason": "tool-calls"},
    ]
    finished = calls.assistant(AssistantRequest(SESSION, message, parts))
    if not events:
        return [before, after, finished]
    busy = calls.opencode_event(OpencodeEvent("session.status", status))
    return [updated, busy, before, after, updated, finished, updated]


SHAPES = {
    "before": "the shim forwarding every session event (7 requests per call)",
    "now": "the shim forwarding a session event only when it changes (3 requests per call)",
    "baseline": "the same 3 requests per call, to the engine of the --baseline checkout",
}


@dataclass
class Measured:
    calls: int = 0
    own_ms: float = 0.0
    children_ms: float = 0.0
    hook_runs: int = 0
    acks: dict[str, list[float]] = field(default_factory=dict)
    blocks: list[float] = field(default_factory=list)  # the engine's own CPU per call, per block


@dataclass
class Arm:
    """One measured series: an engine and the traffic sent to it."""

    engine: EngineProcess
    events: bool
    client: httpx.Client | None = None


def make_workspace(base: Path, env: dict[str, str], command: list[str], tool_hook: bool, cold: bool) -> Path:
    """The example workspace as `command`'s `evolve init` makes it (each checkout its own)."""
    ws = base / "ws"
    subprocess.run([*command, "init", str(ws)], check=True, capture_output=True, env=env, cwd=base)
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


def start_engine(
    base: Path, env: dict[str, str], command: list[str], tool_hook: bool, cold: bool
) -> EngineProcess:
    base.mkdir(parents=True)
    ws = make_workspace(base, env, command, tool_hook, cold)
    return EngineProcess(ws, env, base / "engine.log", command=command).start()


def connect(engine: EngineProcess, base: Path) -> httpx.Client:
    """A client connected as the shim connects (a `run` session), with the session's first message."""
    client = engine.client()
    client.headers[API_VERSION_HEADER] = str(API_VERSION)
    request = calls.connect(
        ConnectRequest("http://127.0.0.1:9", str(base), mode="server", shim_version="bench", command="run")
    )
    conn = sent(client, request).json()
    if "id" not in conn:
        raise RuntimeError(f"connect refused: {conn}")
    client.headers[CONNECTION_HEADER] = request.decode(conn).id
    sent(client, calls.chat_message(ChatMessageRequest(SESSION, "build")))
    return client


def baseline_command(checkout: Path) -> tuple[list[str], dict[str, str]]:
    """How to run the engine of another checkout: its own .venv's python, its own code first on the path."""
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} is missing: run ./scripts/bootstrap.sh in {checkout} first")
    return [str(python), "-m", "engine"], {"PYTHONPATH": str(checkout)}


def spread(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}" if values else "-"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="tool calls per series (default 200)")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks per series (default 4)")
    parser.add_argument("--warmup", type=int, default=10, help="calls sent first, not measured (default 10)")
    parser.add_argument("--gap", type=float, default=40.0, help="ms between tool calls (default 40)")
    parser.add_argument(
        "--no-tool-hook", dest="tool_hook", action="store_false", help="without hooks/20-tools.py"
    )
    parser.add_argument("--cold", action="store_true", help="with hook_warm_start off")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of an earlier commit with its own .venv (git worktree add --detach DIR COMMIT; "
        "./scripts/bootstrap.sh there): its engine gets the same traffic, in blocks alternating with this one's",
    )
    parser.add_argument(
        "--events",
        action="store_true",
        help="with --baseline, also the 'before' series (every session event forwarded; always on without it)",
    )
    parser.add_argument("--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH")
    args = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENCODE_EVOLVE", "EVOLVE_"))}
    python3 = "(PATH unchanged)" if args.keep_shims else drop_shims(env)
    env["PYTHONPATH"] = str(REPO)  # the engine of this checkout, whatever the venv has installed
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-shim-"))
    arms: dict[str, Arm] = {}
    load0 = os.getloadavg()[0]
    try:
        this = start_engine(base / "now", env, [sys.executable, "-m", "engine"], args.tool_hook, args.cold)
        arms["now"] = Arm(this, events=False)
        if args.baseline is None or args.events:
            arms["before"] = Arm(this, events=True)
        if args.baseline is not None:
            command, extra = baseline_command(args.baseline.resolve())
            other = start_engine(base / "baseline", {**env, **extra}, command, args.tool_hook, args.cold)
            arms["baseline"] = Arm(other, events=False)
        clients: dict[int, httpx.Client] = {}
        for arm in arms.values():
            if arm.engine.pid not in clients:
                clients[arm.engine.pid] = connect(arm.engine, base)
            arm.client = clients[arm.engine.pid]
        measured = {name: Measured() for name in arms}
        step = 0

        def send(name: str, record: bool) -> None:
            nonlocal step
            arm = arms[name]
            assert arm.client is not None
            for call in call_requests(step, events=arm.events):
                t0 = time.perf_counter()
                response = sent(arm.client, call)
                took = (time.perf_counter() - t0) * 1000
                if response.status_code >= 300:
                    raise RuntimeError(f"{name} {call.path}: {response.status_code} {response.text}")
                if record:
                    measured[name].acks.setdefault(call.path, []).append(took)
            step += 1
            time.sleep(args.gap / 1000)

        for name in arms:
            for _ in range(args.warmup):
                send(name, record=False)
        t0 = time.perf_counter()
        per_block = max(1, args.calls // args.blocks)
        names = list(arms)
        for block in range(args.blocks):  # the series alternate, so that drift hits them all alike
            for name in names[block % len(names) :] + names[: block % len(names)]:
                arm = arms[name]
                assert arm.client is not None
                wait_idle(arm.client)
                own0, children0 = engine_cpu_ms(arm.engine.pid)
                runs0 = _count(engine_status(arm.client))
                for _ in range(per_block):
                    send(name, record=True)
                wait_idle(arm.client)
                own1, children1 = engine_cpu_ms(arm.engine.pid)
                runs1 = _count(engine_status(arm.client))
                m = measured[name]
                m.calls += per_block
                m.own_ms += own1 - own0
                m.children_ms += children1 - children0
                m.hook_runs += runs1 - runs0
                m.blocks.append((own1 - own0) / per_block)
        wall = (time.perf_counter() - t0) * 1000
        for client in clients.values():
            client.close()
    finally:
        for arm in arms.values():
            arm.engine.stop()
        shutil.rmtree(base, ignore_errors=True)

    print(
        f"hooks' python3: {python3}; warm starts {'off' if args.cold else 'on'}; tool hook "
        f"{'on' if args.tool_hook else 'off'}; {args.blocks} blocks of {per_block} calls per series in "
        f"{wall / 1000:.1f} s; load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    )
    if args.baseline is not None:
        print(f"baseline: {args.baseline} ({_describe(args.baseline)})")
    own_per_call, total_per_call = {}, {}
    for name, m in measured.items():
        own, children = m.own_ms / m.calls, m.children_ms / m.calls
        own_per_call[name], total_per_call[name] = own, own + children
        print(f"\n{name}: {SHAPES[name]}; {m.hook_runs / m.calls:.1f} hook runs per call")
        for route, times in sorted(m.acks.items()):
            q = statistics.quantiles(times, n=20)
            print(
                f"   {route:28} n={len(times):5}  ack median {statistics.median(times):5.2f} ms  p95 {q[18]:6.2f} ms"
            )
        print(
            f"   CPU per tool call: the engine {own:.1f} ms (per block {spread(m.blocks)}); its hooks, "
            f"warm-start servers and git {children:.1f} ms; together {own + children:.1f} ms"
        )
    if "before" in measured:
        print(
            f"\nengine CPU per tool call from the shim's traffic: {total_per_call['now']:.1f} ms now, "
            f"{total_per_call['before']:.1f} ms with every session event forwarded "
            f"({total_per_call['now'] / total_per_call['before']:.2f}x)"
        )
    if "baseline" in measured:
        now, was = own_per_call["now"], own_per_call["baseline"]
        print(
            f"\nthe engine's own CPU per tool call: {now:.1f} ms, baseline {was:.1f} ms: {now / was:.2f}x "
            f"(targets <= 5 ms and <= 0.5x: {'meets' if now <= 5 and now <= was / 2 else 'MISSES'}); with "
            f"its hooks, servers and git {total_per_call['now']:.1f} ms against "
            f"{total_per_call['baseline']:.1f} ms ({total_per_call['now'] / total_per_call['baseline']:.2f}x); "
            f"load average {load0:.2f}-{os.getloadavg()[0]:.2f}"
        )
    return 0


def _describe(checkout: Path) -> str:
    """The checkout's commit, so that a printed figure says what it was measured against."""
    proc = subprocess.run(
        ["git", "-C", str(checkout), "log", "-1", "--format=%h %cs"], capture_output=True, text=True
    )
    return proc.stdout.strip() or "not a git checkout"


def _count(status: EngineStatus) -> int:
    runs = (status.journal or {}).get("runs")
    if not isinstance(runs, int):
        raise RuntimeError("the engine's status has no journal run count")
    return runs


if __name__ == "__main__":
    sys.exit(main())
