#!/usr/bin/env python3
"""What the evolve plugin adds to real opencode: per tool call, to the first LLM request, per run.

Real opencode 1.18.33 (installed by scripts/install_opencode.sh into .cache/), one isolated HOME, and
the scripted model of the end-to-end tests (evolve_demo/scripted_model.py), as tests/e2e/README.md describes. Two
projects with the same opencode.json, one with the evolve plugin (`python -m engine shim install`,
the example workspace from `evolve init`) and one without it. Every run is
`opencode run --format json --title bench <words>`; `--title` spares opencode's title LLM call.

Run kinds, each repetition runs all of them, in an order that rotates every repetition:

* **tools**: the mock answers with one `read` call of a 5-line file per step, `--calls` (10) steps,
  then a text answer; with and without the plugin.
* **simple**: one text answer; with and without the plugin.
* **hook**: `--hook-calls` (5) `notes_list` calls (a hook tool of the example workspace), one per
  step, then a text answer; with the plugin only, for information.
* **tools** again in a third project, **guarded**: the plugin with the example workspace plus
  `hooks/guard.py`, an hcp hook that handles `before_tool` (GUARD_HOOK below, it allows every call), so
  that the shim awaits one dispatch per tool call: what a tool call costs with a hook that handles
  before_tool, next to the example workspace's, whose hook does not.

Both projects also load a timing probe: two tiny plugins written by this script, one listed before
evolve's entry and one after it (PROBE_JS below). They time each evolve hook on opencode's path and
each HTTP request the shim sends to the engine. End-to-end differences on a busy 2-core machine
spread by seconds (one `opencode run` costs ~6 s of CPU in opencode); the probe shows where the
plugin's own milliseconds go.

Measured:

1. Per tool call: opencode's own tool part time (`state.time.end - start` of each tool part in the
   run's `--format json` output), the step cycle (the mock receiving main request k to k+1), and
   wall time: (tools - plain tools) / calls, and the difference of differences
   ((tools - simple) with the plugin - (tools - simple) without) / calls, which cancels the per-run
   costs. From the probe: the time each evolve hook adds on opencode's path, added up per tool call.
   For `notes_list`: the tool part time next to the engine's own duration of the call and of the
   `execute_tool` hook run (engine journal) and the shim's two requests (permission, call).
2. First LLM request: from opencode's start, and from the user message's creation (`info.time.created`,
   read afterwards through `opencode serve --pure` on the same HOME), to the mock receiving the first
   main request; with minus without the plugin, compared with the `mutate_request` hook run's own
   duration (engine journal): "added beyond the hook's own run time"; precisely from the probe: the
   first system transform minus the hook run, split into engine, HTTP, and shim/opencode.
3. `opencode run` wall time with and without the plugin: medians over the repetitions, with a warm
   engine (started before the repetitions and kept running, as the shim leaves it), plus the very
   first run with the plugin, which starts the engine.
4. HTTP round trips from Python to the warm engine (idle, and right after /v1/opencode/tool-after), and
   to a reference Starlette/uvicorn server with its listening socket created with proto 0 (no
   TCP_NODELAY on accepted connections, as the engine once did) and with IPPROTO_TCP (as it does now).
   `--engine-nodelay` runs the whole bench with the engine's sockets created with IPPROTO_TCP.

Also printed: the CPU time of opencode (its rusage) and of the engine with its hook processes
(/proc/<pid>/stat) per run, and the hook runs the engine made per run, by stage. Between runs the
bench waits (untimed) until the engine reports itself idle (`/v1/status` busy = false), so that one
run's background work does not land in the next.

Prints figures only; never asserts on timing. Takes ~4-5 minutes on 2 cores with the defaults.

With `--baseline DIR` (a checkout of an earlier commit with its own .venv: `git worktree add --detach
DIR COMMIT`, then ./scripts/bootstrap.sh there) a fourth project runs that checkout's shim and engine,
its tools and simple runs interleaved with the others; the last line gives the CPU of the engine, its
warm-start servers and hooks per tools run against the baseline's and against opencode's own CPU,
and the added wall per call and before exit with their spread.

Run: .venv/bin/python bench/opencode_overhead.py [--repeat 5] [--calls 10] [--hook-calls 5] [--keep]
     [--no-probe] [--engine-nodelay] [--keep-shims] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests/support (not an installed package)

from engine.cli.client import EngineClient, EngineUnavailable  # noqa: E402
from engine.journal.store import Journal  # noqa: E402
from engine.protocol import calls  # noqa: E402
from engine.protocol.api import API_VERSION, API_VERSION_HEADER  # noqa: E402
from engine.protocol.calls import Call  # noqa: E402
from engine.protocol.records import SystemRequest, ToolAfterRequest  # noqa: E402
from evolve_demo.scripted_model import MockLLM, Reply  # noqa: E402
from tests.support.engine_process import announcement, stop_workspace_engine  # noqa: E402
from tests.support.environment import drop_shims, without_settings  # noqa: E402
from tests.support.opencode import (  # noqa: E402
    CONFIG_SEED,
    OPENCODE_VERSION,
    install_opencode,
    make_home,
    mock_provider,
    opencode_env,
)
from tests.support.processes import free_port, pid_alive  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

TARGET_MS = 5.0

# An hcp hook that handles before_tool and allows every call: the cheapest hook that makes the shim
# await the engine on each tool call (a Python start and an empty answer).
GUARD_HOOK = """#!/usr/bin/env python3
import json, sys

if sys.argv[1] == "discover":
    print(json.dumps({"name": "guard", "stages": ["before_tool"]}))
elif sys.argv[1] == "before_tool":
    json.loads(sys.stdin.read())
"""
RUN_TIMEOUT = 180.0
WORDS = ("read", "the", "file")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# `--engine-nodelay`: the engine started by the shim through this instead of `python -m engine`. It
# creates TCP sockets with proto=IPPROTO_TCP instead of 0, which is all it takes for asyncio to set
# TCP_NODELAY on the connections the engine accepts (asyncio.base_events._set_nodelay checks
# sock.proto); engine/service.py creates its listening socket with proto 0. Everything else is the
# unchanged engine.
NODELAY_ENGINE = """import socket, sys


class TCPSocket(socket.socket):
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        inet = family in (socket.AF_INET, socket.AF_INET6)
        if fileno is None and inet and type == socket.SOCK_STREAM and proto in (-1, 0):
            proto = socket.IPPROTO_TCP
        super().__init__(family, type, proto, fileno)


socket.socket = TCPSocket
from engine.cli.main import main

sys.exit(main())
"""

# A timing probe, loaded as two opencode plugins around evolve's: `probe_a.js` before it and
# `probe_b.js` after it in the project's plugin list (the plain project gets the same two, with
# nothing in between). opencode runs a hook of every plugin one after the other and awaits each
# (Plugin.trigger), with the same input/output objects, so the time from probe a's hook to probe b's
# is what the evolve hook between them kept opencode waiting. Event hooks are called in a plain loop
# without awaiting (each gets its own {event} object, so they are paired by event id): there the
# interval is the synchronous part of the evolve hook. Probe a also wraps fetch() to time the shim's
# HTTP requests to the engine (until the response headers). Records are kept in memory and written
# to <dir>/probe-<pid>.jsonl when opencode disposes the plugins (or exits).
PROBE_JS = r"""// Timing probe written by bench/opencode_overhead.py; not part of evolve.
import { appendFileSync } from "node:fs";

const PHASE = "@PHASE@";
const HOOKS = [
  "chat.message",
  "experimental.chat.messages.transform",
  "experimental.chat.system.transform",
  "experimental.session.compacting",
  "tool.execute.before",
  "tool.execute.after",
  "tool.definition",
];

function state(options) {
  const g = (globalThis.__evolveBenchProbe ??= { open: new WeakMap(), events: new Map(), records: [] });
  if (!g.file && options?.dir) {
    g.file = `${options.dir}/probe-${process.pid}.jsonl`;
    g.skip = options.skip || "";
    process.on("exit", () => flush(g));
  }
  return g;
}

function flush(g) {
  if (!g.file || !g.records.length) return;
  try {
    appendFileSync(g.file, g.records.map((r) => JSON.stringify(r)).join("\n") + "\n");
  } catch {}
  g.records.length = 0;
}

function detail(name, input) {
  return { s: input?.sessionID, c: input?.callID, k: input?.tool || input?.toolID };
}

export default async function probe(input, options) {
  const g = state(options);
  const hooks = {};
  if (PHASE === "a" && !g.fetchWrapped) {
    g.fetchWrapped = true;
    const original = globalThis.fetch;
    const wrapped = async function (resource, init) {
      const url = typeof resource === "string" ? resource : resource?.url || String(resource);
      if (!url.includes("/v1/") || (g.skip && url.startsWith(g.skip))) return original.call(this, resource, init);
      const t = performance.now();
      const resp = await original.call(this, resource, init);
      const d = performance.now() - t;
      const n = typeof init?.body === "string" ? init.body.length : 0;
      g.records.push({ h: "fetch", k: new URL(url).pathname, d, n, at: Date.now() });
      return resp;
    };
    globalThis.fetch = Object.assign(wrapped, original);
  }
  for (const name of HOOKS) {
    hooks[name] =
      PHASE === "a"
        ? async (_i, o) => {
            g.open.set(o, performance.now());
          }
        : async (i, o) => {
            const t = performance.now();
            const start = g.open.get(o);
            if (start !== undefined) g.records.push({ h: name, d: t - start, at: Date.now(), ...detail(name, i) });
          };
  }
  hooks.event =
    PHASE === "a"
      ? async ({ event }) => {
          g.events.set(event?.id, performance.now());
        }
      : async ({ event }) => {
          const t = performance.now();
          const start = g.events.get(event?.id);
          g.events.delete(event?.id);
          if (start !== undefined) g.records.push({ h: "event", k: event?.type, d: t - start, at: Date.now() });
        };
  if (PHASE === "b") hooks.dispose = async () => flush(g);
  return hooks;
}
"""


# A second hook in both evolve workspaces (unless --no-tool-hook): it handles the stages of every tool
# call that the example hook declares it leaves alone, so that each call starts hook runs as a hook
# watching the agent's tools would make it (tool_before, tool_after and observe_message).
TOOL_HOOK = """#!/usr/bin/env python3
\"\"\"Written by bench/opencode_overhead.py: a hook for tool_before, tool_after and observe_message.\"\"\"
import json
import sys

STAGES = ["tool_before", "tool_after", "observe_message"]
stage = sys.argv[1]
data = json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "tools", "stages": STAGES}))
elif stage in STAGES:
    print(json.dumps({"log": f"{stage} {data.get('tool') or ''}".strip()}))
"""

# Targets of the warm-start figures (ms): added per tool call, last request to exit, `opencode run`
# with a warm engine, and the engine's CPU (with its hooks and git) per tool call.
TARGETS = {"call": 5.0, "tail": 10.0, "hello": 50.0, "cpu": 15.0}

# ---- small helpers ------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: list[float]) -> str:
    if not values:
        return "n=0"
    return f"min {min(values):.1f}, max {max(values):.1f}, n={len(values)}"


def clean_env(keep_shims: bool) -> dict[str, str]:
    """The environment without EVOLVE_*/OPENCODE_* and, unless `keep_shims`, without version-manager
    shims on PATH (both sides, with and without the plugin, get the same PATH)."""
    env = without_settings()
    if not keep_shims:
        drop_shims(env)
    return env


def proc_cpu_ms(pid: int) -> tuple[float, float]:
    """(own CPU, CPU of reaped children) of a process in ms, from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan"), float("nan")
    # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) * 1000 / CLK_TCK, (cutime + cstime) * 1000 / CLK_TCK


def engine_cpu_ms(pid: int) -> tuple[float, float]:
    """(own CPU, CPU of everything it started) of an engine in ms: its reaped children (hooks spawned
    cold, git) and its warm-start servers, which are still running, with the hooks they reaped."""
    own, children = proc_cpu_ms(pid)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if (
                int(stat.rsplit(")", 1)[1].split()[1]) != pid
                or b"evolve-warm-" not in (entry / "cmdline").read_bytes()
            ):
                continue
        except (OSError, ValueError):
            continue
        server_own, server_children = proc_cpu_ms(int(entry.name))
        children += server_own + server_children
    return own, children


def bench_home(base: Path) -> Path:
    """An isolated HOME; opencode's one-time install of @opencode-ai/plugin is copied from the seed
    the end-to-end tests keep in .cache/ when there is one (else opencode installs it, from npm)."""
    home = base / "home"
    if not make_home(home):
        print(f"(no {CONFIG_SEED}: opencode installs @opencode-ai/plugin on its first run, from npm)")
    return home


# ---- projects and runs --------------------------------------------------------------------------


@dataclass
class Project:
    name: str  # "plain" or "evolve"
    dir: Path
    env: dict[str, str]
    ws: Path | None = None

    @property
    def small_file(self) -> Path:
        return self.dir / "small.txt"

    def engine_announcement(self) -> dict[str, Any] | None:
        return None if self.ws is None else announcement(self.ws)


@dataclass
class Run:
    project: str
    kind: str  # tools, simple, hook, cold, warmup
    rep: int
    wall_ms: float = 0.0
    t0: float = 0.0  # epoch seconds at spawn
    t_exit: float = 0.0  # epoch seconds at exit
    session: str = ""
    tool_parts: list[dict[str, Any]] = field(default_factory=list)
    main_at: list[float] = field(default_factory=list)  # epoch seconds the mock received each main request
    cpu_opencode_ms: float = 0.0
    cpu_engine_ms: float = float("nan")  # engine process itself
    cpu_engine_children_ms: float = float("nan")  # its hooks, git, ... (reaped children)
    user_created: float | None = None  # epoch seconds (from opencode serve afterwards)
    probe: list[dict[str, Any]] = field(default_factory=list)  # records of the timing probe plugins

    def probed(self, hook: str, key: str | None = None) -> list[float]:
        return [float(r["d"]) for r in self.probe if r["h"] == hook and (key is None or r.get("k") == key)]

    @property
    def part_ms(self) -> list[float]:
        return [float(p["state"]["time"]["end"] - p["state"]["time"]["start"]) for p in self.tool_parts]

    @property
    def first_from_start_ms(self) -> float:
        return (self.main_at[0] - self.t0) * 1000

    @property
    def first_from_user_ms(self) -> float:
        if self.user_created is None:
            return float("nan")
        return self.main_at[0] * 1000 - self.user_created * 1000

    @property
    def step_gaps_ms(self) -> list[float]:
        return [(b - a) * 1000 for a, b in zip(self.main_at, self.main_at[1:], strict=False)]

    @property
    def tail_ms(self) -> float:
        return (self.t_exit - self.main_at[-1]) * 1000


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.base = Path(tempfile.mkdtemp(prefix="evolve-bench-opencode-"))
        self.bin = install_opencode()
        self.home = bench_home(self.base)
        self.mock = MockLLM()
        self.env = clean_env(args.keep_shims)
        self.python = sys.executable
        self.probe_dir = self.base / "probe"
        self.probe_dir.mkdir()
        for phase in ("a", "b"):
            (self.probe_dir / f"probe_{phase}.js").write_text(PROBE_JS.replace("@PHASE@", phase))
        self.plain = self.make_project("plain", plugin=False)
        self.evolve = self.make_project("evolve", plugin=True)
        self.guarded = self.make_project("guarded", plugin=True)
        assert self.guarded.ws is not None
        guard = self.guarded.ws / "hooks" / "guard.py"
        guard.write_text(GUARD_HOOK)
        guard.chmod(0o755)
        # The same, with warm starts off: the engine before them, for the "before" figures.
        self.evolve_cold = self.make_project("evolve-cold", plugin=True) if args.cold else None
        if self.evolve_cold is not None and self.evolve_cold.ws is not None:
            config = self.evolve_cold.ws / "config" / "evolve.jsonc"
            text = config.read_text()
            config.write_text(text[: text.rindex("}")] + '  "hook_warm_start": false,\n}\n')
        # The same as "evolve" with the code of another checkout (--baseline): its own `evolve init`,
        # its own shim, its own engine; the "before" of the A/B figures.
        self.baseline: Project | None = None
        if args.baseline is not None:
            checkout = args.baseline.resolve()
            python = checkout / ".venv" / "bin" / "python"
            if not python.exists():
                raise SystemExit(f"{python} is missing: run ./scripts/bootstrap.sh in {checkout} first")
            self.baseline = self.make_project("baseline", plugin=True, python=str(python), cwd=checkout)

    # ---- setup ------------------------------------------------------------------------------------

    def evolve_cli(self, *words: str, python: str | None = None, cwd: Path = REPO) -> str:
        proc = subprocess.run(
            [python or self.python, "-m", "engine", *words],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd,
            env=self.env,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"evolve {' '.join(words)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
            )
        return proc.stdout

    def make_project(self, name: str, plugin: bool, python: str | None = None, cwd: Path = REPO) -> Project:
        root = self.base / name
        proj = root / "proj"
        proj.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
        (proj / "small.txt").write_text("".join(f"line {i}\n" for i in range(1, 6)))
        (proj / "opencode.json").write_text(json.dumps(mock_provider(self.mock.url), indent=2))
        ws = None
        if plugin:
            ws = root / "ws"
            self.evolve_cli("init", str(ws), python=python, cwd=cwd)
            if self.args.tool_hook:
                hook = ws / "hooks" / "20-tools.py"
                hook.write_text(TOOL_HOOK)
                hook.chmod(0o755)
            self.evolve_cli(
                "shim",
                "install",
                "--workspace",
                str(ws),
                "--project",
                str(proj),
                "--command",
                f"{python or self.python} -m engine",
                python=python,
                cwd=cwd,
            )
        return Project(name, proj, opencode_env(self.env, self.home, proj), ws)

    def same_config(self) -> None:
        """The plain project gets the evolve project's opencode.json minus evolve's plugin entry (shim
        install may also add the heartbeat agent), so the two differ only in that plugin. Both get
        the timing probe around it (unless --no-probe)."""
        data = json.loads((self.evolve.dir / "opencode.json").read_text())
        (entry,) = data.pop("plugin")
        if self.args.engine_nodelay:
            entry[1]["command"] = [self.python, "-c", NODELAY_ENGINE]
        probes: list[Any] = []
        if not self.args.no_probe:
            options = {"dir": str(self.probe_dir), "skip": self.mock.url.rsplit("/v1", 1)[0]}
            probes = [[(self.probe_dir / f"probe_{p}.js").as_uri(), options] for p in ("a", "b")]
        (self.plain.dir / "opencode.json").write_text(json.dumps({**data, "plugin": probes}, indent=2))
        evolve = [*probes[:1], entry, *probes[1:]]
        (self.evolve.dir / "opencode.json").write_text(json.dumps({**data, "plugin": evolve}, indent=2))
        # The guarded project: the same, with its own workspace (the one shim install wrote there).
        (guarded,) = json.loads((self.guarded.dir / "opencode.json").read_text())["plugin"]
        if self.args.engine_nodelay:
            guarded[1]["command"] = entry[1]["command"]
        plugins = [*probes[:1], guarded, *probes[1:]]
        (self.guarded.dir / "opencode.json").write_text(json.dumps({**data, "plugin": plugins}, indent=2))
        if self.evolve_cold is not None:  # its own plugin entry: its own workspace
            cold = json.loads((self.evolve_cold.dir / "opencode.json").read_text())
            (cold_entry,) = cold.pop("plugin")
            if self.args.engine_nodelay:
                cold_entry[1]["command"] = [self.python, "-c", NODELAY_ENGINE]
            plugins = [*probes[:1], cold_entry, *probes[1:]]
            (self.evolve_cold.dir / "opencode.json").write_text(
                json.dumps({**data, "plugin": plugins}, indent=2)
            )
        if self.baseline is not None:  # its own plugin entry: the other checkout's shim and engine
            other = json.loads((self.baseline.dir / "opencode.json").read_text())
            (other_entry,) = other.pop("plugin")
            plugins = [*probes[:1], other_entry, *probes[1:]]
            (self.baseline.dir / "opencode.json").write_text(
                json.dumps({**data, "plugin": plugins}, indent=2)
            )

    # ---- one opencode run -------------------------------------------------------------------------

    def script_for(self, kind: str, project: Project) -> list[Reply]:
        if kind == "tools":
            call = ("read", {"filePath": str(project.small_file)})
            return [Reply(tool_calls=[call]) for _ in range(self.args.calls)] + [Reply(text="done")]
        if kind == "hook":
            return [Reply(tool_calls=[("notes_list", {})]) for _ in range(self.args.hook_calls)] + [
                Reply(text="done")
            ]
        return [Reply(text="done")]

    def engine_pid(self, project: Project | None = None) -> int | None:
        found = (project or self.evolve).engine_announcement()
        return int(found["pid"]) if found and pid_alive(int(found["pid"])) else None

    def run(self, project: Project, kind: str, rep: int, pure: bool = False) -> Run:
        script = self.script_for("simple" if kind in ("cold", "warmup") else kind, project)
        self.mock.script(*script)
        seen = len(self.mock.requests)
        pid = self.engine_pid(project) if project.ws is not None else None
        cpu_before = engine_cpu_ms(pid) if pid else (float("nan"), float("nan"))
        argv = [
            str(self.bin),
            "run",
            *(["--pure"] if pure else []),
            "--format",
            "json",
            "--title",
            "bench",
            *WORDS,
        ]
        out_path = self.base / "run.out"
        err_path = self.base / "run.err"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            t0 = time.time()
            p0 = time.perf_counter()
            proc = subprocess.Popen(
                argv, cwd=project.dir, env=project.env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
            timer = threading.Timer(RUN_TIMEOUT, proc.kill)
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            p1 = time.perf_counter()
            t_exit = time.time()
        proc.returncode = os.waitstatus_to_exitcode(status)
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
        run = Run(project.name + ("-pure" if pure else ""), kind, rep, (p1 - p0) * 1000, t0, t_exit)
        run.cpu_opencode_ms = (usage.ru_utime + usage.ru_stime) * 1000
        with self.mock._lock:
            mains = [r for r in self.mock.requests[seen:] if r.kind == "main"]
            leftover = len(self.mock._script)
            self.mock._script.clear()
        run.main_at = [r.at for r in mains]
        probe_file = self.probe_dir / f"probe-{proc.pid}.jsonl"
        if probe_file.is_file():
            run.probe = [json.loads(line) for line in probe_file.read_text().splitlines() if line.strip()]
        for line in stdout.splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                run.session = run.session or str(event.get("sessionID") or "")
                if event.get("type") == "tool_use":
                    run.tool_parts.append(event["part"])
        expected_calls = len(script) - 1
        problems = []
        if proc.returncode != 0:
            problems.append(f"exit {proc.returncode}")
        if leftover or len(mains) != len(script):
            problems.append(f"{len(mains)} main requests for {len(script)} scripted replies")
        done = [p for p in run.tool_parts if p.get("state", {}).get("status") == "completed"]
        if len(done) != expected_calls or len(run.tool_parts) != expected_calls:
            problems.append(
                f"{len(done)} completed tool parts of {len(run.tool_parts)}, expected {expected_calls}"
            )
        errors = [
            p["state"].get("output", "") for p in done if "tool error" in str(p["state"].get("output", ""))
        ]
        if errors:
            problems.append(f"tool errors: {errors[:2]}")
        if problems:
            raise RuntimeError(
                f"opencode run ({project.name}, {kind}) went wrong: {'; '.join(problems)}\n"
                f"--- stdout (tail) ---\n{stdout[-3000:]}\n--- stderr (tail) ---\n{stderr[-3000:]}"
            )
        if project.ws is not None and not pure:
            self.settle_engine(project)
            pid = pid or self.engine_pid(project)
            if pid:
                after = engine_cpu_ms(pid)
                run.cpu_engine_ms = after[0] - cpu_before[0]
                run.cpu_engine_children_ms = after[1] - cpu_before[1]
        return run

    def settle_engine(self, project: Project | None = None, timeout: float = 30.0) -> None:
        """Untimed: wait until the engine says it is idle (what it accepted from the run: observe_message,
        idle, tool_before / tool_after and its commit check after each dispatch), twice in a row 50 ms
        apart."""
        found = (project or self.evolve).engine_announcement()
        if not found:
            return
        deadline = time.monotonic() + timeout
        idle_in_a_row = 0
        with contextlib.closing(EngineClient(found["url"], found["token"], 5)) as client:
            while idle_in_a_row < 2 and time.monotonic() < deadline:
                try:
                    busy = client.send(calls.status()).busy
                except EngineUnavailable:
                    return
                idle_in_a_row = 0 if busy else idle_in_a_row + 1
                time.sleep(0.05)

    # ---- afterwards: user message times and the engine journal --------------------------------------

    def fill_user_times(self, project: Project, runs: list[Run]) -> None:
        """`info.time.created` of each session's user message, through `opencode serve --pure`."""
        port = free_port()
        log = self.base / f"serve-{project.name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(self.bin), "serve", "--pure", "--port", str(port), "--hostname", "127.0.0.1"],
                cwd=project.dir,
                env=project.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"opencode serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            return httpx.get(f"{url}/global/health", timeout=2).json().get("healthy") is True

        try:
            wait_for(
                "opencode serve to get healthy",
                healthy,
                timeout=60,
                interval=0.2,
                ignore=(httpx.HTTPError, ValueError),
            )
            with httpx.Client(
                base_url=url, headers={"x-opencode-directory": str(project.dir)}, timeout=30
            ) as http:
                for run in runs:
                    resp = http.get(f"/session/{run.session}/message")
                    resp.raise_for_status()
                    users = [m["info"] for m in resp.json() if m.get("info", {}).get("role") == "user"]
                    if users:
                        run.user_created = float(users[0]["time"]["created"]) / 1000
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def journal_figures(self, runs: list[Run]) -> dict[str, dict[str, Any]]:
        """Per evolve session: mutate_request run and dispatch durations, hook runs by stage, and the
        notes_list tool calls (engine-side duration) with their execute_tool hook runs."""
        assert self.evolve.ws is not None
        journal = Journal(self.evolve.ws / "state" / "journal.sqlite3")
        out: dict[str, dict[str, Any]] = {}
        try:
            deadline = time.monotonic() + 20
            for run in runs:
                while True:
                    runs_ = journal.runs(session=run.session, limit=10_000)
                    mutate = [r for r in runs_ if r.stage == "mutate_request"]
                    if mutate or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                dispatches = journal.dispatches(stage="mutate_request", session=run.session)
                tool_calls = journal.tool_calls(tool="notes_list", session=run.session, limit=10_000)
                out[run.session] = {
                    "mutate_run_ms": [r.duration_ms for r in mutate],
                    "mutate_dispatch_ms": [d.duration_ms for d in dispatches],
                    "stages": Counter(r.stage for r in runs_),
                    "stage_ms": {
                        s: sum(r.duration_ms for r in runs_ if r.stage == s) for s in {r.stage for r in runs_}
                    },
                    "tool_call_ms": [c.duration_ms for c in tool_calls],
                    "execute_tool_ms": [r.duration_ms for r in runs_ if r.stage == "execute_tool"],
                }
        finally:
            journal.close()
        return out

    def api_roundtrips(self, n: int = 40, n_busy: int = 15) -> dict[str, list[float]]:
        """The engine's HTTP handlers timed from Python (httpx, keep-alive), warm engine, no opencode:
        /v1/opencode/system for a session whose prompt is already frozen (no hook runs), a hook tool's
        permission check; then the same system request sent right after /v1/opencode/tool-after, as
        in a step of a real session (the engine has just started a tool_after dispatch: a hook
        process and, after it, its commit check). A session of its own, so the runs' figures stay
        apart."""
        found = self.evolve.engine_announcement()
        if not found:
            return {}
        session = "ses_benchreplay"
        system = calls.system(SystemRequest(session, ["You are opencode."]))
        timed: dict[str, Call[Any]] = {
            f"{c.method} {c.path}{label}": c
            for c, label in (
                (calls.health(), ""),
                (system, " (frozen)"),
                (calls.tool_permission("notes_list", {}), ""),
            )
        }
        out: dict[str, list[float]] = {name: [] for name in timed}
        busy = f"{system.method} {system.path} (frozen), right after /tool-after"
        out[busy] = []

        def send(http: httpx.Client, call: Call[Any]) -> httpx.Response:
            # The call as data (no decoding): the time is the engine's and the connection's alone.
            return http.request(call.method, call.path, params=call.query, json=call.body)

        headers = {"authorization": f"Bearer {found['token']}", API_VERSION_HEADER: str(API_VERSION)}
        with httpx.Client(base_url=found["url"], headers=headers, timeout=30) as http:
            send(http, system).raise_for_status()  # mutate_request, freeze
            self.settle_engine()
            for _ in range(3):
                send(http, calls.health())
            for _ in range(n):
                for name, call in timed.items():
                    t = time.perf_counter()
                    resp = send(http, call)
                    out[name].append((time.perf_counter() - t) * 1000)
                    resp.raise_for_status()
            for i in range(n_busy):
                self.settle_engine()
                after = ToolAfterRequest(session, "read", f"replay_{i}", title="t", output="o")
                send(http, calls.tool_after(after)).raise_for_status()
                t = time.perf_counter()
                send(http, system).raise_for_status()
                out[busy].append((time.perf_counter() - t) * 1000)
            self.settle_engine()
        return out

    def guard_figures(self) -> dict[str, list[float]]:
        """The guarded engine's before_tool dispatches and their hook runs (engine journal), in ms."""
        assert self.guarded.ws is not None
        journal = Journal(self.guarded.ws / "state" / "journal.sqlite3")
        try:
            return {
                "dispatch_ms": [d.duration_ms for d in journal.dispatches(stage="before_tool", limit=10_000)],
                "run_ms": [r.duration_ms for r in journal.runs(stage="before_tool", limit=10_000)],
            }
        finally:
            journal.close()

    def stop_engine(self) -> None:
        for project in (self.evolve, self.guarded, self.evolve_cold, self.baseline):
            if project is not None and project.ws is not None:
                stop_workspace_engine(project.ws, self.env)

    def close(self) -> None:
        self.stop_engine()
        self.mock.close()
        if self.args.keep:
            print(f"(kept {self.base})")
        else:
            shutil.rmtree(self.base, ignore_errors=True)


def reference_roundtrips(n: int = 30) -> dict[str, list[float]]:
    """A minimal Starlette app served by uvicorn in a thread of this process, the way engine/service.py
    serves the engine (its own listening socket handed to uvicorn), timed with the same httpx client:
    once with the socket created as service.py creates it (proto 0: asyncio then leaves TCP_NODELAY
    off on accepted connections, and uvicorn's separate write of the response body waits for the
    client's delayed ACK), once created with IPPROTO_TCP (asyncio sets TCP_NODELAY)."""
    import asyncio

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def health(request: Any) -> JSONResponse:
        return JSONResponse({"ok": True})

    out: dict[str, list[float]] = {}
    for label, proto in (
        ("proto 0 (no TCP_NODELAY)", 0),
        ("IPPROTO_TCP (TCP_NODELAY)", socket.IPPROTO_TCP),
    ):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/v1/health", health)])
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        thread = threading.Thread(target=asyncio.run, args=(server.serve(sockets=[sock]),), daemon=True)
        thread.start()
        try:
            times: list[float] = []
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                deadline = time.monotonic() + 10
                while True:
                    try:
                        http.get("/v1/health")
                        break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)
                for _ in range(n):
                    t = time.perf_counter()
                    http.get("/v1/health").raise_for_status()
                    times.append((time.perf_counter() - t) * 1000)
            out[f"reference server, listening socket {label}"] = times
        finally:
            server.should_exit = True
            thread.join(10)
            sock.close()
    return out


# ---- the measurement --------------------------------------------------------------------------------


def paired(a: list[Run], b: list[Run], fn: Any) -> list[float]:
    """fn(a_i) - fn(b_i) for the runs of the same repetition."""
    by_rep = {r.rep: r for r in b}
    return [fn(r) - fn(by_rep[r.rep]) for r in a if r.rep in by_rep]


SYSTEM = "experimental.chat.system.transform"
MESSAGES = "experimental.chat.messages.transform"


def definition_batches(run: Run) -> list[float]:
    """opencode resolves every tool's definition for each LLM request, all concurrently (each through
    every plugin's tool.definition hook): the records of one request are consecutive, and the longest
    interval among them is about the whole batch's span."""
    spans: list[float] = []
    current: list[float] = []
    for rec in run.probe:
        if rec["h"] in ("event", "fetch"):
            continue
        if rec["h"] == "tool.definition":
            current.append(float(rec["d"]))
        elif current:
            spans.append(max(current))
            current = []
    if current:
        spans.append(max(current))
    return spans


def fetched(runs: list[Run], path: str, skip_first: bool = False) -> tuple[list[float], list[float]]:
    """(durations until response headers, request body sizes) of the shim's requests to `path`."""
    ds: list[float] = []
    ns: list[float] = []
    for run in runs:
        recs = [r for r in run.probe if r["h"] == "fetch" and r.get("k") == path]
        for rec in recs[1 if skip_first else 0 :]:
            ds.append(float(rec["d"]))
            ns.append(float(rec.get("n") or 0))
    return ds, ns


def probed_hook(group: list[Run], name: str, first: bool | None = None) -> list[float]:
    """The probe's times of hook `name` in these runs (`first`: only each run's first, False: all but it)."""
    out: list[float] = []
    for run in group:
        values = run.probed(name)
        out.extend(values[:1] if first else values[1:] if first is False else values)
    return out


def event_time(group: list[Run]) -> list[float]:
    """Per request: for each event type, the median synchronous time per event times the events
    of that type per request (medians, so that a preempted or garbage-collecting moment on a
    busy machine does not count as the hook's)."""
    types = {x.get("k") for r in group for x in r.probe if x["h"] == "event"}
    total = 0.0
    for kind in types:
        per_event = med([d for r in group for d in r.probed("event", kind)])
        per_request = med([len(r.probed("event", kind)) / max(len(r.main_at), 1) for r in group])
        total += per_event * per_request
    return [total]


def plugin_time_per_call(pt: list[Run], et: list[Run], verbose: bool = False) -> float:
    """The plugin's time on opencode's path per tool call step (one call per step): each hook that
    step goes through, with (`et`) minus without (`pt`) the plugin, added up."""
    hook, events = probed_hook, event_time
    rows = [
        ("tool.execute.before (per call)", hook(pt, "tool.execute.before"), hook(et, "tool.execute.before")),
        ("tool.execute.after (per call)", hook(pt, "tool.execute.after"), hook(et, "tool.execute.after")),
        (f"{SYSTEM}, later requests (frozen prompt)", hook(pt, SYSTEM, False), hook(et, SYSTEM, False)),
        (f"{MESSAGES} (per request)", hook(pt, MESSAGES), hook(et, MESSAGES)),
        (
            "tool definitions, whole batch per request",
            [x for r in pt for x in definition_batches(r)],
            [x for r in et for x in definition_batches(r)],
        ),
        ("event hooks, synchronous part, per request", events(pt), events(et)),
    ]
    added = 0.0
    for label, without, with_ in rows:
        diff = med(with_) - med(without)
        added += diff
        if verbose:
            print(
                f"     {label:<58} without {med(without):6.2f}  with {med(with_):7.2f}  added {diff:+7.2f} ms"
            )
    return added


def probe_section(runs: list[Run], journal: dict[str, dict[str, Any]], calls: int) -> tuple[float, float]:
    """Prints what the probe plugins saw; returns (plugin time per tool call step, first-request time
    beyond the mutate_request hook run), both with minus without, in ms."""

    def of(project: str, kind: str) -> list[Run]:
        return [r for r in runs if r.project == project and r.kind == kind]

    pt, et = of("plain", "tools"), of("evolve", "tools")
    ps, es = of("plain", "simple"), of("evolve", "simple")

    hook = probed_hook
    print("\n   Probe (plugins around evolve's, see the docstring): plugin time on opencode's path, medians")
    added = plugin_time_per_call(pt, et, verbose=True)

    def definitions(r: Run) -> float:
        return sum(1 for x in r.probe if x["h"] == "tool.definition") / max(len(r.main_at), 1)

    ndefs = [definitions(r) for r in et]
    ndefs_plain = [definitions(r) for r in pt]
    print(
        f"     -> plugin time per tool call (one call per step: the rows above added up): {added:+.2f} ms "
        f"(tool definitions per request: {med(ndefs_plain):.0f} without, {med(ndefs):.0f} with the plugin)"
    )
    sys_d, sys_n = fetched(et, "/v1/opencode/system", skip_first=True)
    _, before_n = fetched(et, "/v1/opencode/tool-before")
    print(
        f"     the frozen-prompt system transform is one awaited HTTP request: /v1/opencode/system "
        f"{med(sys_d):.2f} ms until response headers (body {med(sys_n) / 1000:.1f} kB: the session's history "
        f"rides along); tool.execute.before sends /v1/opencode/tool-before without awaiting it (body "
        f"{med(before_n) / 1000:.1f} kB), the synchronous part is building that request"
    )
    gt = of("guarded", "tools")
    if gt:
        guarded = plugin_time_per_call(pt, gt)
        before_g = hook(gt, "tool.execute.before")
        fetch_g, _ = fetched(gt, "/v1/opencode/tool-before")
        print(
            f"     with a hook that handles before_tool (the guarded project): plugin time per tool call "
            f"{guarded:+.2f} ms, of which tool.execute.before {med(before_g):.2f} ms (it awaits "
            f"/v1/opencode/tool-before: {med(fetch_g):.2f} ms until response headers)"
        )

    # The first request of a session.
    first_p = hook(ps + pt, SYSTEM, True)
    evolve_first = es + et
    first_e = {r.session: (r.probed(SYSTEM) or [float("nan")])[0] for r in evolve_first}
    fetch_first = {
        r.session: next(
            (float(x["d"]) for x in r.probe if x["h"] == "fetch" and x.get("k") == "/v1/opencode/system"),
            float("nan"),
        )
        for r in evolve_first
    }
    run_ms = {r.session: med(journal.get(r.session, {}).get("mutate_run_ms", [])) for r in evolve_first}
    disp_ms = {r.session: med(journal.get(r.session, {}).get("mutate_dispatch_ms", [])) for r in evolve_first}
    base = med(first_p)
    beyond = [first_e[s] - run_ms[s] - base for s in first_e]
    shim_side = [first_e[s] - fetch_first[s] for s in first_e]
    http_side = [fetch_first[s] - disp_ms[s] for s in first_e]
    engine_side = [disp_ms[s] - run_ms[s] for s in first_e]
    print(
        f"   Probe, first request: {SYSTEM} {med(list(first_e.values())):.1f} ms with the plugin "
        f"({base:.2f} ms without); mutate_request hook run {med(list(run_ms.values())):.1f} ms"
    )
    print(
        f"     beyond the hook's own run time: median {med(beyond):+.1f} ms ({spread(beyond)}), of which: "
        f"engine dispatch beyond the run {med(engine_side):.1f} ms, HTTP + handler (request until headers "
        f"minus dispatch) {med(http_side):.1f} ms, shim and opencode around the request (JSON, reading the "
        f"response, waiting for opencode's event loop) {med(shim_side):.1f} ms"
    )
    first_rows = [
        ("chat.message", hook(ps + pt, "chat.message"), hook(es + et, "chat.message")),
        (MESSAGES, hook(ps + pt, MESSAGES, True), hook(es + et, MESSAGES, True)),
        (
            "tool definitions, batch of the first request",
            [definition_batches(r)[0] for r in ps + pt if definition_batches(r)],
            [definition_batches(r)[0] for r in es + et if definition_batches(r)],
        ),
    ]
    listed = "; ".join(f"{label} {med(b) - med(a):+.2f} ms" for label, a, b in first_rows)
    print(f"     other plugin time before the first request (added): {listed}")
    return added, med(beyond)


def fetch_table(runs: list[Run]) -> None:
    """Every request the shim made, as opencode saw it (until response headers)."""
    by_kind: dict[str, list[Run]] = {}
    for r in runs:
        if r.project == "evolve":
            by_kind.setdefault(r.kind, []).append(r)
    paths = sorted({x["k"] for r in runs for x in r.probe if x["h"] == "fetch"})
    if not paths:
        return
    print(
        "\n   The shim's HTTP requests to the engine, as opencode's fetch() saw them (until response headers):"
    )
    print(f"     {'request':<36} {'per run (tools/simple/hook)':>28} {'median':>8} {'max':>8} {'body':>8}")
    for path in paths:
        counts = "/".join(
            f"{med([sum(1 for x in r.probe if x['h'] == 'fetch' and x.get('k') == path) for r in by_kind.get(k, [])]):g}"
            for k in ("tools", "simple", "hook")
        )
        ds, ns = fetched([r for r in runs if r.project == "evolve"], path)
        print(f"     {path:<36} {counts:>28} {med(ds):7.1f}  {max(ds):7.1f}  {med(ns) / 1000:6.1f}kB")
    print(
        "     (only /v1/opencode/system, /v1/tools/*/permission and /v1/tools/*/call are awaited by opencode; "
        "the others are sent without waiting, and their times include every moment opencode's event loop "
        "was busy elsewhere before it read the response)"
    )


def report(
    bench: Bench,
    runs: list[Run],
    cold: Run,
    journal: dict[str, dict[str, Any]],
    api: dict[str, list[float]],
    guard: dict[str, list[float]],
) -> str:
    args = bench.args
    probing = not args.no_probe

    def of(project: str, kind: str) -> list[Run]:
        return [r for r in runs if r.project == project and r.kind == kind]

    pt, et = of("plain", "tools"), of("evolve", "tools")
    ps, es = of("plain", "simple"), of("evolve", "simple")
    hooks = of("evolve", "hook")

    # 1. per tool call
    print(f"\n1. Per tool call: `read` of a 5-line file, {args.calls} calls per run, one per step")
    all_p = [m for r in pt for m in r.part_ms]
    all_e = [m for r in et for m in r.part_ms]
    part_diff = paired(et, pt, lambda r: med(r.part_ms))
    print(
        f"   tool part time (opencode's state.time end - start), median of all calls: "
        f"without {med(all_p):.1f} ms, with {med(all_e):.1f} ms (difference {med(all_e) - med(all_p):+.1f} ms)"
    )
    print(
        f"     paired per repetition (median of the run's calls, with - without): median {med(part_diff):+.1f} ms "
        f"({spread(part_diff)})"
    )
    gaps_p = [g for r in pt for g in r.step_gaps_ms]
    gaps_e = [g for r in et for g in r.step_gaps_ms]
    gap_diff = paired(et, pt, lambda r: med(r.step_gaps_ms))
    print(
        f"   step cycle (mock receives main request k -> k+1: answer streamed, tool run, next request "
        f"built and sent), median: without {med(gaps_p):.1f} ms, with {med(gaps_e):.1f} ms; paired "
        f"difference median {med(gap_diff):+.1f} ms ({spread(gap_diff)})"
    )
    naive = paired(et, pt, lambda r: r.wall_ms / args.calls)
    plain_tools = {r.rep: r.wall_ms for r in pt}
    evolve_tools = {r.rep: r.wall_ms for r in et}
    plain_simple = {r.rep: r.wall_ms for r in ps}
    dd = [
        ((evolve_tools[s.rep] - s.wall_ms) - (plain_tools[s.rep] - plain_simple[s.rep])) / args.calls
        for s in es
        if s.rep in evolve_tools and s.rep in plain_tools and s.rep in plain_simple
    ]
    print(
        f"   wall time: (tools run with - without) / {args.calls}: median {med(naive):+.1f} ms "
        f"({spread(naive)}); this includes the per-run costs (plugin start, first request, exit)"
    )
    print(
        f"   wall time without the per-run costs: ((tools - simple) with - (tools - simple) without) / "
        f"{args.calls}: median {med(dd):+.1f} ms ({spread(dd)})"
    )
    gt = of("guarded", "tools")
    guard_part = paired(gt, pt, lambda r: med(r.part_ms))
    guard_gap = paired(gt, pt, lambda r: med(r.step_gaps_ms))
    guard_vs_evolve = paired(gt, et, lambda r: med(r.step_gaps_ms))
    print(
        f"   with a hook that handles before_tool (the guarded project, one awaited dispatch per call): "
        f"tool part time paired with - without the plugin {med(guard_part):+.1f} ms ({spread(guard_part)}); "
        f"step cycle {med(guard_gap):+.1f} ms ({spread(guard_gap)}), {med(guard_vs_evolve):+.1f} ms against "
        f"the example workspace's"
    )
    print(
        f"     its before_tool dispatch (engine journal): median {med(guard['dispatch_ms']):.1f} ms, of which "
        f"the hook run {med(guard['run_ms']):.1f} ms (n={len(guard['run_ms'])})"
    )
    probe_call, probe_first, probe_guard = float("nan"), float("nan"), float("nan")
    if probing:
        probe_call, probe_first = probe_section(runs, journal, args.calls)
        probe_guard = plugin_time_per_call(pt, gt) if gt else float("nan")
    hook_parts = [m for r in hooks for m in r.part_ms]
    tool_call_ms = [m for r in hooks for m in journal.get(r.session, {}).get("tool_call_ms", [])]
    exec_ms = [m for r in hooks for m in journal.get(r.session, {}).get("execute_tool_ms", [])]
    print(
        f"   hook tool call notes_list ({args.hook_calls} per run, for information): tool part median "
        f"{med(hook_parts):.1f} ms ({spread(hook_parts)}); the engine's call_tool (journal) "
        f"{med(tool_call_ms):.1f} ms, of which the execute_tool hook run {med(exec_ms):.1f} ms"
    )
    if probing:
        perm_d, _ = fetched(hooks, "/v1/tools/notes_list/permission")
        call_d, _ = fetched(hooks, "/v1/tools/notes_list/call")
        before = [x for r in hooks for x in r.probed("tool.execute.before")]
        after = [x for r in hooks for x in r.probed("tool.execute.after")]
        print(
            f"     inside that part time: permission request {med(perm_d):.1f} ms, call request "
            f"{med(call_d):.1f} ms (call_tool {med(tool_call_ms):.1f} ms of it), tool.execute.before "
            f"{med(before):.1f} ms, after {med(after):.1f} ms; the rest ({med(hook_parts) - med(perm_d) - med(call_d) - med(before) - med(after):.1f} ms) "
            f"is reading both responses' bodies, opencode's permission check (ctx.ask) and the shim's and opencode's own work between them"
        )
    for label, group in (("tools", et), ("simple", es), ("hook", hooks)):
        stages: Counter[str] = Counter()
        stage_ms: Counter[str] = Counter()
        for r in group:
            found = journal.get(r.session, {})
            stages.update(found.get("stages", {}))
            stage_ms.update(found.get("stage_ms", {}))
        n = max(len(group), 1)
        listed = ", ".join(f"{s} {stages[s] / n:g} ({stage_ms[s] / n:.0f} ms)" for s in sorted(stages))
        print(f"   hook runs per {label} run with the plugin (count, summed run time): {listed}")
    for label, a, b in (("tools", pt, et), ("simple", ps, es)):
        print(
            f"   CPU per {label} run: opencode without {med([r.cpu_opencode_ms for r in a]):.0f} ms, "
            f"with {med([r.cpu_opencode_ms for r in b]):.0f} ms; engine {med([r.cpu_engine_ms for r in b]):.0f} ms "
            f"+ its hooks and git {med([r.cpu_engine_children_ms for r in b]):.0f} ms"
        )

    # 2. first LLM request
    print("\n2. First LLM request of a session (warm engine: started before the repetitions, not counted)")
    for label, a, b in (("simple", ps, es), ("tools", pt, et)):
        start_d = paired(b, a, lambda r: r.first_from_start_ms)
        user_d = paired(b, a, lambda r: r.first_from_user_ms)
        print(
            f"   {label} runs: from opencode's start: without {med([r.first_from_start_ms for r in a]):.0f} ms, "
            f"with {med([r.first_from_start_ms for r in b]):.0f} ms, paired difference {med(start_d):+.0f} ms "
            f"({spread(start_d)})"
        )
        print(
            f"     from the user message's creation: without {med([r.first_from_user_ms for r in a]):.1f} ms, "
            f"with {med([r.first_from_user_ms for r in b]):.1f} ms, paired difference {med(user_d):+.1f} ms "
            f"({spread(user_d)})"
        )
    evolve_first = es + et
    run_ms = {r.session: med(journal.get(r.session, {}).get("mutate_run_ms", [])) for r in evolve_first}
    disp_ms = {r.session: med(journal.get(r.session, {}).get("mutate_dispatch_ms", [])) for r in evolve_first}
    print(
        f"   mutate_request (journal): hook run {med(list(run_ms.values())):.1f} ms "
        f"({spread(list(run_ms.values()))}), whole dispatch {med(list(disp_ms.values())):.1f} ms"
    )
    beyond: list[float] = []
    for a, b in ((ps, es), (pt, et)):
        by_rep = {r.rep: r for r in a}
        for r in b:
            if r.rep in by_rep:
                delta = r.first_from_user_ms - by_rep[r.rep].first_from_user_ms
                beyond.append(delta - run_ms[r.session])
    print(
        f"   end to end, added beyond the hook's own run time (paired difference from the user message "
        f"minus that run's mutate_request hook run): median {med(beyond):+.1f} ms ({spread(beyond)})"
    )
    if probing:
        print(f"   probe (precise, see 1.): {probe_first:+.1f} ms beyond the hook's own run time")

    # 3. wall time
    print("\n3. `opencode run` wall time (warm engine), median")
    for label, a, b in (("simple", ps, es), ("tools", pt, et)):
        d = paired(b, a, lambda r: r.wall_ms)
        print(
            f"   {label}: without {med([r.wall_ms for r in a]):.0f} ms, with {med([r.wall_ms for r in b]):.0f} ms, "
            f"paired difference {med(d):+.0f} ms ({spread(d)})"
        )
    for label, group in (("without", ps), ("with", es)):
        print(
            f"   simple run {label} the plugin: start -> first request {med([r.first_from_start_ms for r in group]):.0f} ms, "
            f"last request -> exit {med([r.tail_ms for r in group]):.0f} ms"
        )
    tail_d = paired(es, ps, lambda r: r.tail_ms)
    print(
        f"   last request -> exit, paired difference: median {med(tail_d):+.0f} ms ({spread(tail_d)}); with the "
        f"plugin opencode's dispose waits for the shim's requests still in flight (observe_message and idle)"
    )
    warm = med([r.wall_ms for r in es])
    print(
        f"   first run with the plugin, which starts the engine: {cold.wall_ms:.0f} ms "
        f"({cold.wall_ms - warm:+.0f} ms against the warm median with the plugin); its first request came "
        f"{cold.first_from_start_ms:.0f} ms after opencode's start"
    )
    if probing:
        fetch_table([*runs, cold])
    if api:
        print(
            "\n4. HTTP round trips from Python (httpx, keep-alive, no opencode): the warm engine's handlers, "
            "and a reference Starlette/uvicorn server"
        )
        for name, values in api.items():
            print(f"   {name:<66} median {med(values):6.2f} ms ({spread(values)})")

    verdict_call = "meets" if probe_call < TARGET_MS else "MISSES"
    verdict_first = "meets" if probe_first < TARGET_MS else "MISSES"
    if not probing:
        verdict_call = "meets" if med(part_diff) < TARGET_MS else "MISSES"
        verdict_first = "meets" if med(beyond) < TARGET_MS else "MISSES"
    engine = " (engine with TCP_NODELAY)" if args.engine_nodelay else ""
    return (
        f"opencode overhead{engine}: per read call {probe_call:+.1f} ms of plugin time on opencode's path "
        f"({verdict_call} target < {TARGET_MS:g} ms; end to end: tool part {med(part_diff):+.1f} ms, wall "
        f"{med(dd):+.1f} ms); with a hook that handles before_tool {probe_guard:+.1f} ms per read call "
        f"(tool part {med(guard_part):+.1f} ms; its dispatch {med(guard['dispatch_ms']):.1f} ms); first request {probe_first:+.1f} ms beyond mutate_request's own run "
        f"({verdict_first} target < {TARGET_MS:g} ms; end to end {med(beyond):+.0f} ms); run wall "
        f"{med(paired(es, ps, lambda r: r.wall_ms)):+.0f} ms warm, {cold.wall_ms - warm:+.0f} ms more when it "
        f"starts the engine"
    )


def warm_start_figures(runs: list[Run], calls: int) -> str:
    """The four figures of warm starts, after (evolve) and before (evolve with hook_warm_start off),
    each a median of differences paired by repetition against opencode without the plugin; printed
    as a table, returned as the final line."""

    def of(project: str, kind: str) -> list[Run]:
        return [r for r in runs if r.project == project and r.kind == kind]

    pt, ps = of("plain", "tools"), of("plain", "simple")
    figures: dict[str, dict[str, float]] = {}
    for project in ("evolve", "evolve-cold"):
        et, es = of(project, "tools"), of(project, "simple")
        if not et:
            continue
        figures[project] = {
            "call": med(paired(et, pt, lambda r: med(r.step_gaps_ms))),
            "tail": med(paired(et, pt, lambda r: r.tail_ms)),
            "hello": med(paired(es, ps, lambda r: r.wall_ms)),
            "cpu": med([(r.cpu_engine_ms + r.cpu_engine_children_ms) / calls for r in et]),
        }
    labels = {
        "call": "added per tool call (gap between LLM requests)",
        "tail": f"added between the last LLM request and exit ({calls}-call run)",
        "hello": "added to `opencode run` with one answer, warm engine",
        "cpu": "engine CPU per tool call, with its hooks and git",
    }
    print("\nWarm starts: medians of differences paired by repetition, against opencode without the plugin")
    print(f"   {'figure':<64} {'warm (after)':>13} {'cold (before)':>14} {'target':>9}")
    after, before = figures.get("evolve", {}), figures.get("evolve-cold", {})

    def shown(f: dict[str, float], key: str) -> str:
        return "-" if key not in f else f"{f[key]:.1f} ms" if key == "cpu" else f"{f[key]:+.1f} ms"

    for key, label in labels.items():
        cells = [shown(f, key) for f in (after, before)]
        print(f"   {label:<64} {cells[0]:>13} {cells[1]:>14} {'< ' + format(TARGETS[key], 'g') + ' ms':>9}")
    print(
        "   (last request to exit: opencode's dispose waits for the shim's requests still in flight, "
        "observe_message and idle, until the engine acknowledges observational work before running it)"
    )

    def verdicts(f: dict[str, float]) -> str:
        return ", ".join(
            f"{key} {shown(f, key)} ({'MEETS' if f[key] < TARGETS[key] else 'MISSES'} < {TARGETS[key]:g})"
            for key in labels
        )

    line = "opencode with evolve, warm starts: " + (verdicts(after) if after else "no runs")
    if before:
        line += "; before (warm starts off): " + ", ".join(f"{key} {shown(before, key)}" for key in labels)
    ab = baseline_figures(runs, calls)
    return line + ("\n" + ab if ab else "")


def baseline_figures(runs: list[Run], calls: int) -> str:
    """The whole plugin now against the --baseline checkout's and against no plugin, from the tools runs
    of the same repetitions: the CPU of the engine, its warm-start servers and hooks per run (until the
    engine was idle again), as a ratio of the baseline's and of opencode's own CPU for that run; the
    added wall per tool call and before exit, medians of differences paired by repetition with their
    spread; evolve-cold (one process per hook run, as a plugin that spawns its hooks) as the reference.
    Printed as a table; returned as the final line ("" without a baseline project)."""

    def of(project: str) -> list[Run]:
        return [r for r in runs if r.project == project and r.kind == "tools"]

    if not of("baseline"):
        return ""
    plain = of("plain")
    rows: dict[str, dict[str, Any]] = {}
    for project in ("evolve", "baseline", "evolve-cold"):
        tools = of(project)
        if not tools:
            continue
        tree = [r.cpu_engine_ms + r.cpu_engine_children_ms for r in tools]
        rows[project] = {
            "tree": med(tree),
            "engine": med([r.cpu_engine_ms for r in tools]),
            "opencode": med([r.cpu_opencode_ms for r in tools]),
            "share": med([t / r.cpu_opencode_ms for t, r in zip(tree, tools, strict=True)]),
            "call": paired(tools, plain, lambda r: med(r.step_gaps_ms)),
            "tail": paired(tools, plain, lambda r: r.tail_ms),
        }
    names = {
        "evolve": "now",
        "baseline": "baseline (--baseline)",
        "evolve-cold": "now, warm starts off (cold)",
    }
    print(f"\nThe whole plugin against no plugin, {calls}-call tools runs (medians; paired by repetition)")
    print(
        f"   {'':<28} {'CPU: engine tree':>16} {'of it the engine':>16} {'opencode':>9} {'tree/opencode':>13} "
        f"{'added per call (spread)':>28} {'added before exit (spread)':>30}"
    )
    for project, row in rows.items():
        call, tail = row["call"], row["tail"]
        print(
            f"   {names[project]:<28} {row['tree']:13.0f} ms {row['engine']:13.0f} ms {row['opencode']:6.0f} ms "
            f"{row['share']:12.3f}x {med(call):+8.1f} ms ({min(call, default=0):+.0f}..{max(call, default=0):+.0f})"
            f" {med(tail):+10.1f} ms ({min(tail, default=0):+.0f}..{max(tail, default=0):+.0f})"
        )
    now, was = rows["evolve"], rows["baseline"]
    ratio = now["tree"] / was["tree"]
    verdict = "meets" if ratio <= 0.5 and now["share"] <= 0.05 else "MISSES"
    line = (
        f"the whole plugin, CPU of the engine, its servers and hooks per {calls}-call run: {now['tree']:.0f} ms, "
        f"baseline {was['tree']:.0f} ms: {ratio:.2f}x; {now['share']:.3f}x of opencode's own CPU "
        f"({now['opencode']:.0f} ms) (targets <= 0.5x and <= 0.05x: {verdict}); added per call "
        f"{med(now['call']):+.1f} ms (baseline {med(was['call']):+.1f} ms), before exit {med(now['tail']):+.1f} ms "
        f"(baseline {med(was['tail']):+.1f} ms)"
    )
    if "evolve-cold" in rows:
        line += f"; cold path {rows['evolve-cold']['tree']:.0f} ms"
    return line + f"; load average {os.getloadavg()[0]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of every run kind (default 5)")
    parser.add_argument("--calls", type=int, default=10, help="read calls per tools run (default 10)")
    parser.add_argument("--hook-calls", type=int, default=5, help="notes_list calls per hook run (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary projects, HOME and workspace")
    parser.add_argument(
        "--no-probe", action="store_true", help="without the timing probe plugins (end-to-end figures only)"
    )
    parser.add_argument(
        "--engine-nodelay",
        action="store_true",
        help="start the engine with its TCP sockets created with IPPROTO_TCP, so that asyncio sets "
        "TCP_NODELAY on its connections (what engine/service.py would do with that fix)",
    )
    parser.add_argument(
        "--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH (slow python3 starts)"
    )
    parser.add_argument(
        "--no-tool-hook",
        dest="tool_hook",
        action="store_false",
        help="without hooks/20-tools.py (a python3 hook handling tool_before, tool_after and "
        "observe_message) beside the example hook",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of an earlier commit with its own .venv (git worktree add --detach DIR COMMIT; "
        "./scripts/bootstrap.sh there): a fourth project with its shim and engine, interleaved with the others",
    )
    parser.add_argument(
        "--no-cold",
        dest="cold",
        action="store_false",
        help="without the third project, evolve with hook_warm_start off (the figures before warm starts)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    bench = Bench(args)
    final = ""
    try:
        bench.same_config()
        print(
            f"opencode {OPENCODE_VERSION} ({bench.bin}); {cores} cores; load average at start "
            f"{os.getloadavg()[0]:.2f}; {args.repeat} repetitions; hooks' python3: "
            f"{shutil.which('python3', path=bench.env['PATH'])}"
        )
        # Warm-up, untimed: opencode's first start in this HOME and in each project directory
        # (database, snapshot repository); the evolve project with --pure, so no engine starts yet.
        bench.run(bench.plain, "warmup", -1)
        bench.run(bench.evolve, "warmup", -1, pure=True)
        bench.run(bench.guarded, "warmup", -1, pure=True)
        cold = bench.run(bench.evolve, "cold", -1)
        bench.run(bench.guarded, "cold", -1)  # starts its engine
        if bench.evolve_cold is not None:
            bench.run(bench.evolve_cold, "warmup", -1, pure=True)
            bench.run(bench.evolve_cold, "cold", -1)
        if bench.baseline is not None:
            bench.run(bench.baseline, "warmup", -1, pure=True)
            bench.run(bench.baseline, "cold", -1)
        print(f"setup done in {time.perf_counter() - started:.0f} s; engine pid {bench.engine_pid()}")
        kinds = [
            (bench.plain, "tools"),
            (bench.evolve, "tools"),
            (bench.plain, "simple"),
            (bench.evolve, "simple"),
            (bench.evolve, "hook"),
            (bench.guarded, "tools"),
        ]
        if bench.evolve_cold is not None:
            kinds += [(bench.evolve_cold, "tools"), (bench.evolve_cold, "simple")]
        if bench.baseline is not None:
            kinds += [(bench.baseline, "tools"), (bench.baseline, "simple")]
        runs: list[Run] = []
        for rep in range(args.repeat):
            order = kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]
            for project, kind in order:
                runs.append(bench.run(project, kind, rep))
            print(
                f"  repetition {rep + 1}/{args.repeat} done ({time.perf_counter() - started:.0f} s; "
                f"load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
        evolve_runs = [r for r in runs if r.project == "evolve"] + [cold]
        api = bench.api_roundtrips()
        api.update(reference_roundtrips())
        bench.fill_user_times(bench.plain, [r for r in runs if r.project == "plain"])
        bench.fill_user_times(bench.evolve, evolve_runs)
        journal = bench.journal_figures(evolve_runs)
        final = report(bench, runs, cold, journal, api, bench.guard_figures())
        figures = warm_start_figures(runs, args.calls)
    finally:
        bench.close()
    print(
        f"\n(total bench time {time.perf_counter() - started:.0f} s; load average at end: {os.getloadavg()[0]:.2f})"
    )
    print(final)
    print(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
