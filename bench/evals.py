#!/usr/bin/env python3
"""Behaviour checks end to end: the example workspace's five scenarios (engine/example/evals/) before
and after a prompt edit, through real opencode 1.18.33 with the demo's scripted model (its story reads
the system prompt it is sent), as `evolve eval` runs them when no engine runs: each version in its
throwaway copy with its own engine, both versions in one opencode.

The edit is the demo's scene 6 (prompts/chat.md gets "Never delete a note: ..."), made with `evolve
call evolve_prompt_edit`; `evolve eval HEAD --project <the scripted model's project> --json` checks it.
Expected: `evals 5/5 → 4/5: "forget a note" fails after`.

Printed per repetition: the wall time of `evolve eval` (the command, Python's start included), the
CPU of every process it started (its engines, opencode, the hooks) and the time of the checks; per
version the time to copy it, to start its engine, to connect it in opencode, each scenario's run, and
to stop; for the opencode both share the time to make its home, to import, to start and to stop; and
the share of the checks' time spent starting opencode (to both plugins connected). Target: under 60 s
for the five scenarios on 2 cores. Figures only, never asserted.

`--baseline DIR` (a checkout of an earlier commit with its own `.venv`): its `evolve eval` checks the
same edit in turn with this one's, alternating which goes first, and the medians of both are printed
with their ratio.

Needs opencode installed as for the end-to-end tests (scripts/install_opencode.sh).

Run: .venv/bin/python bench/evals.py [--repeat 2] [--baseline DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evolve_demo import opencode_setup, story  # noqa: E402
from evolve_demo.scripted_model import MockLLM  # noqa: E402

TARGET_S = 60.0
EVOLVE = [sys.executable, "-m", "engine"]


def run(
    argv: list[str], env: dict[str, str], cwd: Path = REPO, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def children_cpu() -> float:
    """CPU of this process's children that have ended and been waited for, and of theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def opencode_start(timings: dict[str, dict[str, float]]) -> float:
    """Seconds from the checks' start of opencode to the plugins connected: one opencode for both
    versions (its start, then the longer of the two versions' connections), or, at an older commit,
    one per version started side by side (the longer of the two)."""
    if "opencode" in timings:
        shared = timings["opencode"].get("start_ms", 0.0)
        return (shared + max(t.get("connect_ms", 0.0) for k, t in timings.items() if k != "opencode")) / 1000
    return max(t.get("opencode_start_ms", 0.0) for t in timings.values()) / 1000


@dataclass
class Side:
    """This checkout or the baseline: how it runs `evolve eval`, and its figures."""

    name: str
    python: str
    cwd: Path
    walls: list[float] = field(default_factory=list)
    checks: list[float] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2, help="checks of the same edit (default 2)")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of an earlier commit with its own .venv: its `evolve eval` alternates with this one's",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if opencode_setup.installed_binary() is None:
        print("bench/evals.py: opencode is not installed; run scripts/install_opencode.sh", file=sys.stderr)
        return 2
    sides = [Side("this", sys.executable, REPO)]
    if args.baseline is not None:
        python = args.baseline / ".venv" / "bin" / "python"
        if not python.is_file():
            print(
                f"bench/evals.py: {python} does not exist; bootstrap the baseline checkout", file=sys.stderr
            )
            return 2
        sides.append(Side("baseline", str(python), args.baseline.resolve()))
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-evals-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVOLVE_", "OPENCODE_"))}
    if os.environ.get("EVOLVE_CACHE_DIR"):
        env["EVOLVE_CACHE_DIR"] = os.environ["EVOLVE_CACHE_DIR"]
    env["TMPDIR"] = str(base / "tmp")
    (base / "tmp").mkdir()
    model = MockLLM(story.Story().respond, model="demo")
    try:
        ws, project = base / "workspace", base / "project"
        run([*EVOLVE, "init", str(ws)], env).check_returncode()
        project.mkdir()
        config = opencode_setup.provider_config(model.url, provider="scripted", model="demo")
        (project / "opencode.json").write_text(json.dumps(config, indent=2))
        edit = {"prompt": "chat.md", "oldString": story.KEEP_OLD, "newString": story.KEEP_NEW}
        made = run(
            [*EVOLVE, "call", "evolve_prompt_edit", "--workspace", str(ws), "--args", json.dumps(edit)], env
        )
        assert made.returncode == 0, made.stderr
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
        for n in range(1, args.repeat + 1):
            for side in sides if n % 2 else reversed(sides):  # alternating which goes first
                argv = [side.python, "-m", "engine", "eval", "HEAD", "--workspace", str(ws)]
                cpu, started = children_cpu(), time.perf_counter()
                done = run([*argv, "--project", str(project), "--json"], env, cwd=side.cwd)
                wall, cpu = time.perf_counter() - started, children_cpu() - cpu
                if done.returncode not in (0, 1):
                    print(
                        f"{side.name}: evolve eval exited {done.returncode}:\n{done.stderr}", file=sys.stderr
                    )
                    return 1
                result: dict[str, Any] = json.loads(done.stdout)
                checked = result["duration_ms"] / 1000
                start = opencode_start(result["timings"])
                side.walls.append(wall)
                side.checks.append(checked)
                side.starts.append(start)
                side.cpus.append(cpu)
                print(f"\nrun {n}, {side.name}: {result['summary']} (exit {done.returncode})")
                print(
                    f"  evolve eval: {wall:.1f} s wall, {cpu:.1f} CPU-s (every process it started); "
                    f"the checks: {checked:.1f} s; starting opencode: {start:.1f} s"
                )
                for part, figures in result["timings"].items():
                    shown = ", ".join(f"{k.removesuffix('_ms')} {v / 1000:.2f} s" for k, v in figures.items())
                    print(f"  {part}: {shown}")
                for scenario in result["scenarios"]:
                    runs = ", ".join(
                        f"{r['version']} {r['duration_ms'] / 1000:.2f} s" for r in scenario["runs"]
                    )
                    print(f"  {scenario['name']}: {scenario['status']} ({runs})")
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        model.close()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    this = sides[0]
    best = min(this.checks)
    verdict = "ok" if best < TARGET_S else "MISSES"
    shares = [start / checked for start, checked in zip(this.starts, this.checks, strict=True) if checked]
    print(
        f"\nevals: 5 scenarios before and after, end to end: best {best:.1f} s (evolve eval {min(this.walls):.1f} s, "
        f"{statistics.median(this.cpus):.1f} CPU-s at the median), "
        f"starting opencode {100 * min(shares):.0f}-{100 * max(shares):.0f}% of it; target < {TARGET_S:.0f} s: {verdict}"
    )
    if len(sides) > 1:
        old = sides[1]
        cpu, checked = statistics.median(this.cpus), statistics.median(this.checks)
        old_cpu, old_checked = statistics.median(old.cpus), statistics.median(old.checks)
        print(
            f"against the baseline ({old.cwd}), medians of {args.repeat} interleaved checks each: "
            f"CPU {cpu:.1f} against {old_cpu:.1f} CPU-s ({cpu / old_cpu:.2f}x), the checks "
            f"{checked:.1f} against {old_checked:.1f} s ({checked / old_checked:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
