#!/usr/bin/env python3
"""How long a newcomer waits: from `evolve demo` typed in a terminal to the agent at work on screen.

The real command in a tmux window of 160x48 with an empty HOME, its screen read every 0.1 s. Printed,
in seconds from the command: the console drawn, opencode connected, the agent's first turn (its first
LLM request, `mutate_request`, in the hook runs view), its first tool call (`execute_tool`), and the
demo's notice of the bad hook edit. Then `q`, and the time the demo takes to stop everything.

Warm (default): opencode as the demo finds it in evolve's cache (installed by an earlier demo or test
run). `--cold`: a cache of its own, empty, so the demo first installs opencode with npm (a download of
about 350 MB from the registry; the figure depends on the network). Target: the agent at work within a
minute, warm.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/support is not an installed package

from tests.support.environment import evolve_command, isolated_env
from tests.support.terminal import Terminal

MILESTONES = (  # what, seen when the screen shows
    ("console drawn", "Hook runs"),
    ("opencode connected", "opencode ● 1 connected"),
    ("first agent turn (mutate_request)", "mutate_request"),
    ("first tool call (execute_tool)", "execute_tool"),
    ("notice of the bad hook edit", "passed its test, but"),
)
TARGET_S = 60.0


def shows(text: str) -> Callable[[str], bool]:
    return lambda screen: text in screen


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cold", action="store_true", help="an empty cache: the demo installs opencode first"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each milestone")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("demo_start: needs tmux (apt-get install tmux)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="evolve-bench-demo-"))
    extra = {"TERM": "xterm-256color"}
    if args.cold:
        extra["EVOLVE_CACHE_DIR"] = str(tmp / "cache")
    env = isolated_env(tmp / "home", drop=("TMUX", "PYTHON"), **extra)
    term = Terminal(tmp, env, size=(160, 48))
    status = tmp / "status"
    print(
        f"evolve demo, {'cold (empty cache)' if args.cold else 'warm'}; load average {os.getloadavg()[0]:.1f}"
    )
    started = time.monotonic()
    term.start(f"{evolve_command()} demo --dir {tmp / 'demo'}; echo $? > {status}", cwd=tmp)
    seen: dict[str, float] = {}
    try:
        for what, text in MILESTONES:
            term.wait_for(what, shows(text), timeout=args.timeout, interval=0.1)
            seen[what] = time.monotonic() - started
            print(f"  {what:<36} {seen[what]:6.1f} s", flush=True)
        term.keys("q")
        stopping = time.monotonic()
        deadline = stopping + 120
        while not (status.is_file() and status.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        code = status.read_text().strip() if status.is_file() else "(not exited)"
        print(f"  {'q to everything stopped':<36} {time.monotonic() - stopping:6.1f} s (exit {code})")
    except AssertionError as exc:
        print(f"demo_start: {exc}", file=sys.stderr)
        return 1
    finally:
        term.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    at_work = seen["first tool call (execute_tool)"]
    verdict = "meets" if at_work < TARGET_S else "MISSES"
    print(f"demo_start: agent at work after {at_work:.1f} s (target < {TARGET_S:.0f} s warm): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
