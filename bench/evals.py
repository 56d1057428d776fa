#!/usr/bin/env python3
"""Behaviour checks end to end: the example workspace's five scenarios (engine/example/evals/) before
and after a prompt edit, through real opencode 1.18.33 with the demo's scripted model (its story reads
the system prompt it is sent), as `evolve eval` runs them when no engine runs: each version in its
throwaway copy with its own engine and one opencode, started once per version.

The edit is the demo's scene 6 (prompts/chat.md gets "Never delete a note: ..."), made with `evolve
call evolve_prompt_edit`; `evolve eval HEAD --project <the scripted model's project> --json` checks it.
Expected: `evals 5/5 → 4/5: "forget a note" fails after`.

Printed per repetition: the wall time of `evolve eval` (the command, Python's start included) and of
the checks; per version the time to copy it, to make opencode's home, to start its engine, to start
its opencode (to the plugin connected), each scenario's run, and to stop; and the share of the checks'
time spent starting opencode (the two versions start side by side: the longer of the two). Target:
under 60 s for the five scenarios on 2 cores. Figures only, never asserted.

Needs opencode installed as for the end-to-end tests (scripts/install_opencode.sh).

Run: .venv/bin/python bench/evals.py [--repeat 2] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evolve_demo import opencode_setup, story  # noqa: E402
from evolve_demo.scripted_model import MockLLM  # noqa: E402

TARGET_S = 60.0
EVOLVE = [sys.executable, "-m", "engine"]


def run(argv: list[str], env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2, help="checks of the same edit (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if opencode_setup.installed_binary() is None:
        print("bench/evals.py: opencode is not installed; run scripts/install_opencode.sh", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-evals-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVOLVE_", "OPENCODE_"))}
    if os.environ.get("EVOLVE_CACHE_DIR"):
        env["EVOLVE_CACHE_DIR"] = os.environ["EVOLVE_CACHE_DIR"]
    env["TMPDIR"] = str(base / "tmp")
    (base / "tmp").mkdir()
    model = MockLLM(story.Story().respond, model="demo")
    totals: list[float] = []
    checks: list[float] = []
    shares: list[float] = []
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
            started = time.perf_counter()
            done = run(
                [*EVOLVE, "eval", "HEAD", "--workspace", str(ws), "--project", str(project), "--json"], env
            )
            wall = time.perf_counter() - started
            if done.returncode not in (0, 1):
                print(f"evolve eval exited {done.returncode}:\n{done.stderr}", file=sys.stderr)
                return 1
            result: dict[str, Any] = json.loads(done.stdout)
            checked = result["duration_ms"] / 1000
            start = max(t.get("opencode_start_ms", 0.0) for t in result["timings"].values()) / 1000
            totals.append(wall)
            checks.append(checked)
            shares.append(start / checked if checked else 0.0)
            print(f"\nrun {n}: {result['summary']} (exit {done.returncode})")
            print(
                f"  evolve eval: {wall:.1f} s wall; the checks: {checked:.1f} s; starting opencode: {start:.1f} s"
            )
            for version, figures in result["timings"].items():
                shown = ", ".join(f"{k.removesuffix('_ms')} {v / 1000:.2f} s" for k, v in figures.items())
                print(f"  {version}: {shown}")
            for scenario in result["scenarios"]:
                runs = ", ".join(f"{r['version']} {r['duration_ms'] / 1000:.2f} s" for r in scenario["runs"])
                print(f"  {scenario['name']}: {scenario['status']} ({runs})")
    finally:
        model.close()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    best = min(checks)
    verdict = "ok" if best < TARGET_S else "MISSES"
    print(
        f"\nevals: 5 scenarios before and after, end to end: best {best:.1f} s (evolve eval {min(totals):.1f} s), "
        f"starting opencode {100 * min(shares):.0f}-{100 * max(shares):.0f}% of it; target < {TARGET_S:.0f} s: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
