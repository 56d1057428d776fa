#!/usr/bin/env python3
"""Validating a hook edit in a workspace with a long git history versus the test's own run time.

Builds two workspaces with the same files (the example workspace plus a 20-note notebook):
  * history: a git repository with ~5000 commits (made in one go with `git fast-import`: notebook
    updates, and every tenth commit a hook revision, with the engine's trailers);
  * fresh:   the same files, no history (the engine makes its `initial` commit).
Both engines are started (journal on, as in production). Then, interleaved and after a warm-up:
  * validate: `await engine.tools.call("evolve_hook_validate", {"hook": "notes.py", "content": ...})`
              (the candidate is the current hook with a harmless comment appended);
  * direct:   tests/notes_test.py run directly (cwd = workspace, OPENCODE_EVOLVE_WORKSPACE set,
              in a new session as the engine runs tests).
The figure of merit is median(validate - direct), per workspace.
Prints figures only; never asserts on timing.

Run: .venv/bin/python bench/validation_history.py [--commits 5000] [--reps 12] [--keep-shims]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/support is not an installed package

from engine.hooks.validation import copy_workspace  # noqa: E402
from engine.runtime import Engine  # noqa: E402
from tests.support.environment import drop_shims  # noqa: E402

TARGET_S = 1.0
EXAMPLE = REPO / "engine" / "example"
IDENT = "evolve <evolve@localhost>"


def notebook(upto: int) -> bytes:
    notes = [
        {"id": i, "text": f"note number {i}: remember thing {i * 7 % 101}", "priority": "normal", "tags": []}
        for i in range(max(1, upto - 19), upto + 1)
    ]
    return (json.dumps({"next_id": upto + 1, "notes": notes}, indent=2) + "\n").encode()


def example_files() -> dict[str, tuple[str, bytes]]:
    """Path -> (git mode, content) of the example workspace."""
    files: dict[str, tuple[str, bytes]] = {}
    for path in sorted(EXAMPLE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            mode = "100755" if os.access(path, os.X_OK) else "100644"
            files[path.relative_to(EXAMPLE).as_posix()] = (mode, path.read_bytes())
    return files


def fast_import_stream(commits: int, files: dict[str, tuple[str, bytes]]) -> bytes:
    hook_mode, hook = files["hooks/notes.py"]
    out: list[bytes] = []
    t0 = 1_700_000_000

    def commit(n: int, message: str, changes: list[tuple[str, str, bytes]], deleteall: bool = False) -> None:
        msg = message.encode()
        out.append(b"commit refs/heads/main\n")
        out.append(f"committer {IDENT} {t0 + n * 60} +0000\n".encode())
        out.append(b"data %d\n%s\n" % (len(msg), msg))
        if deleteall:
            out.append(b"deleteall\n")
        for path, mode, data in changes:
            out.append(f"M {mode} inline {path}\n".encode())
            out.append(b"data %d\n%s\n" % (len(data), data))

    commit(0, "initial\n\nEvolve-Origin: initial", [(p, m, d) for p, (m, d) in files.items()])
    for n in range(1, commits - 1):
        if n % 10 == 0:
            revised = hook + f"# revision {n}\n".encode()
            msg = (
                "edit hook notes.py\n\nEvolve-Origin: tool\nEvolve-Tool: evolve_hook_edit\n"
                f"Evolve-Session: ses_{n // 100}\nEvolve-Call: call_{n}\nEvolve-File: hooks/notes.py"
            )
            commit(n, msg, [("hooks/notes.py", hook_mode, revised)])
        else:
            msg = (
                "update add\n\nEvolve-Origin: tool\nEvolve-Tool: notes_add\n"
                f"Evolve-Session: ses_{n // 100}\nEvolve-Call: call_{n}\nEvolve-Hook: notes.py"
            )
            commit(n, msg, [("notes/notes.json", "100644", notebook(n))])
    final = [(p, m, d) for p, (m, d) in files.items()] + [("notes/notes.json", "100644", notebook(commits))]
    commit(commits - 1, "update add\n\nEvolve-Origin: tool\nEvolve-Tool: notes_add", final, deleteall=True)
    return b"".join(out)


def git(root: Path, *args: str, data: bytes | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True, check=True)
    return proc.stdout.decode()


def make_history_workspace(root: Path, commits: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "fast-import", "--quiet", data=fast_import_stream(commits, example_files()))
    git(root, "reset", "-q", "--hard", "main")  # a scratch repository of this benchmark


def make_fresh_workspace(root: Path, like: Path) -> None:
    shutil.copytree(like, root, symlinks=True, ignore=shutil.ignore_patterns(".git", "state"))


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


async def run_test_directly(root: Path) -> float:
    env = dict(os.environ, OPENCODE_EVOLVE_WORKSPACE=str(root))
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        str(root / "tests" / "notes_test.py"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(root),
        env=env,
        # As engine/hooks/validation.py runs tests: in a new session. With the kernel's autogroup
        # scheduling a new session is also a new CPU-share group, which matters on a busy machine.
        start_new_session=True,
    )
    out, err = await proc.communicate()
    elapsed = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"notes_test.py failed when run directly:\n{out.decode()}{err.decode()}")
    return elapsed


async def run_validate(engine: Engine, candidate: str) -> float:
    t0 = time.perf_counter()
    call = await engine.tools.call(
        "evolve_hook_validate", {"hook": "notes.py", "content": candidate}, origin="operator"
    )
    elapsed = (time.perf_counter() - t0) * 1000
    if call.output != "validation passed":
        raise RuntimeError(f"evolve_hook_validate did not pass: {call.output}")
    return elapsed


def time_copy(root: Path) -> float:
    """What validation copies of the workspace, timed on its own (median of 5)."""
    times = []
    for _ in range(5):
        tmp = Path(tempfile.mkdtemp(prefix="evolve-bench-copy-"))
        try:
            t0 = time.perf_counter()
            copy_workspace(root, tmp)
            times.append((time.perf_counter() - t0) * 1000)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return statistics.median(times)


async def main_async(args: argparse.Namespace) -> int:
    python3 = "(PATH unchanged)" if args.keep_shims else drop_shims(os.environ)
    print(f"python3 for the test and hook: {python3}; load average at start: {os.getloadavg()[0]:.2f}")
    base = Path(tempfile.mkdtemp(prefix="evolve-bench-validation-"))
    engines: dict[str, Engine] = {}
    try:
        roots = {"history": base / "history", "fresh": base / "fresh"}
        t0 = time.perf_counter()
        make_history_workspace(roots["history"], args.commits)
        built = time.perf_counter() - t0
        make_fresh_workspace(roots["fresh"], roots["history"])
        for name, root in roots.items():
            t0 = time.perf_counter()
            engine = Engine(root)  # journal on, as in production
            await engine.start()
            started = (time.perf_counter() - t0) * 1000
            engines[name] = engine
            count = git(root, "rev-list", "--count", "HEAD").strip()
            print(
                f"{name:7}: {count:>5} commits, .git {tree_size(root / '.git') / 1e6:5.1f} MB, "
                f"engine start {started:6.0f} ms, copy for validation {time_copy(root):5.1f} ms"
                + (f" (history built in {built:.1f} s)" if name == "history" else "")
            )
        candidate = (roots["history"] / "hooks" / "notes.py").read_text() + "# candidate edit\n"

        for _ in range(args.warmup):
            for name in roots:
                await run_validate(engines[name], candidate)
                await run_test_directly(roots[name])
        samples: dict[str, dict[str, list[float]]] = {n: {"validate": [], "direct": []} for n in roots}
        for i in range(args.reps):
            # Rotate the order of the four measurements every iteration.
            jobs = [(n, kind) for n in roots for kind in ("validate", "direct")]
            jobs = jobs[i % len(jobs) :] + jobs[: i % len(jobs)]
            for name, kind in jobs:
                if kind == "validate":
                    samples[name][kind].append(await run_validate(engines[name], candidate))
                else:
                    samples[name][kind].append(await run_test_directly(roots[name]))
    finally:
        for engine in engines.values():
            await engine.close()
        shutil.rmtree(base, ignore_errors=True)

    extra: dict[str, float] = {}
    for name, s in samples.items():
        diffs = [v - d for v, d in zip(s["validate"], s["direct"], strict=True)]
        extra[name] = statistics.median(diffs)
        print(
            f"{name:7}: evolve_hook_validate median {statistics.median(s['validate']):6.0f} ms | "
            f"test run directly median {statistics.median(s['direct']):6.0f} ms | "
            f"difference median {extra[name]:+6.0f} ms (min {min(diffs):+.0f}, max {max(diffs):+.0f}) "
            f"over {len(diffs)} pairs | fastest: validate {min(s['validate']):.0f} ms, "
            f"direct {min(s['direct']):.0f} ms"
        )
    print(
        f"history vs fresh: {extra['history'] - extra['fresh']:+.0f} ms difference in validation overhead; "
        f"load average at end: {os.getloadavg()[0]:.2f}"
    )
    worst = max(extra.values()) / 1000
    verdict = "meets" if worst < TARGET_S else "MISSES"
    print(
        f"validation with history: {extra['history'] / 1000:+.2f} s beyond the test's own run time "
        f"({extra['fresh'] / 1000:+.2f} s in a fresh workspace; target < {TARGET_S:g} s; {verdict} target)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=5000, help="commits in the history (default 5000)")
    parser.add_argument("--reps", type=int, default=12, help="measured pairs per workspace (default 12)")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds (default 1)")
    parser.add_argument(
        "--keep-shims", action="store_true", help="leave pyenv/asdf shims on PATH (slow python3 starts)"
    )
    args = parser.parse_args()
    if args.commits < 3:
        parser.error("--commits must be at least 3")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
