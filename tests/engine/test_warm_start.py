"""Warm starts of Python hooks (engine/warm/starts.py, engine/warm/zygote.py): a hook forked from a ready
interpreter is what a cold start of it is (docs/hooks.md, "Warm start", lists the exceptions), and
nothing that goes wrong with a ready interpreter fails or repeats a run.

Every test runs real hooks in real processes, each side by side cold (as `#!` starts them) and warm
(forked), whatever the test run's --warm-start says.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import re
import runpy
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine.hooks.runner import execute, run_process
from engine.protocol.records import HookRun, new_id
from engine.warm import server as warm_server
from engine.warm import starts as warmstart
from engine.warm.starts import WarmProcess, WarmStarts
from tests.support.environment import REPO
from tests.support.processes import PROC, pid_alive, wait_gone
from tests.support.warm import WarmLoop

PY = sys.executable
EXAMPLE = REPO / "engine" / "example"
T = TypeVar("T")


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "hooks").mkdir()
    return tmp_path


def write_hook(ws: Path, name: str, body: str, shebang: str = f"#!{PY}") -> Path:
    path = ws / "hooks" / name
    path.write_text(f"{shebang}\n{body}")
    path.chmod(0o755)
    return path


def hook_env(**extra: str) -> dict[str, str]:
    """The environment hooks get here: this one, with the test interpreter's directory first on PATH
    (so that `#!/usr/bin/env python3` finds a real python3, not a version manager's shim)."""
    path = [os.path.dirname(PY), *(p for p in os.environ["PATH"].split(os.pathsep) if "shims" not in p)]
    return {**os.environ, "PATH": os.pathsep.join(path), **extra}


async def run(
    path: Path,
    warm: WarmStarts | None,
    *,
    stage: str = "chat",
    data: Any = None,
    env: Mapping[str, str] | None = None,
    timeout_ms: int = 20_000,
) -> HookRun:
    """One run of the hook, warm when `warm` is given: then it must start warm (its interpreter is
    made ready first)."""
    hook = HookRun(
        id=new_id("run"),
        stage=stage,
        hook=path.name,
        started_at=time.time(),
        input={"hook": stage} if data is None else data,
    )
    cwd = path.parent.parent
    before = 0
    if warm is not None:
        assert await warm.prepare(str(path), cwd=str(cwd), env=env), f"no warm start for {path.name}"
        before = warm.warm_runs
    await execute(hook, path, cwd=cwd, timeout_ms=timeout_ms, stdout_limit=1 << 20, env=env, warm=warm)
    if warm is not None:
        assert warm.warm_runs == before + 1, f"{path.name} did not start warm"
    return hook


def with_warm(scratch: Path, scenario: Callable[[WarmStarts], Awaitable[T]]) -> T:
    """Run `scenario` in an event loop with its own ready interpreters, stopped afterwards."""

    async def main() -> T:
        warm = WarmStarts(scratch / "warm")
        try:
            return await scenario(warm)
        finally:
            await warm.close()

    return asyncio.run(main())


def outcome(run: HookRun) -> dict[str, Any]:
    return {
        "error": run.error,
        "exit_code": run.exit_code,
        "signal": run.signal,
        "stdout": run.stdout_lines,
        "stderr": re.sub(r"0x[0-9a-f]+", "0x…", run.stderr),  # object addresses differ anyway
        "result": run.result,
    }


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of the processes whose parent is `pid` (zombies included)."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append((int(entry.name), fields[0]))
    return found


# --- what a hook sees ---------------------------------------------------------------------------

INTROSPECT = '''"""Everything a hook can look at about how it was started."""
import sys
MODULES = sorted(sys.modules)
IMPORTERS = sorted(k for k in sys.path_importer_cache if isinstance(k, str))
EXC = repr(sys.exc_info())
import fcntl, gc, json, os, resource, signal, stat, threading

state = {
    "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "flags": str(sys.flags),
    "executable": sys.executable, "prefix": sys.prefix, "warnoptions": sys.warnoptions,
    "xoptions": repr(sys._xoptions), "name": __name__, "file": __file__, "doc": __doc__,
    "globals": [(k, type(v).__name__) for k, v in list(globals().items())],
    "loader": [type(__loader__).__name__, __loader__.name, __loader__.path], "spec": repr(__spec__),
    "cached": repr(__cached__), "package": repr(__package__), "annotations": repr(__annotations__),
    "builtins": __builtins__ is sys.modules["builtins"],
    "main": sys.modules["__main__"].__dict__ is globals(),
    "cwd": os.getcwd(), "env": dict(os.environ), "own_group": os.getpgrp() == os.getpid(),
    "sid": os.getsid(0), "exc_info": EXC, "importers": IMPORTERS,
    "meta_path": [getattr(f, "__name__", type(f).__name__) for f in sys.meta_path],
    "path_hooks": [repr(h).split(" at ")[0] for h in sys.path_hooks],
    "recursion": sys.getrecursionlimit(), "gc": [gc.isenabled(), gc.get_threshold()],
    "threads": threading.active_count(), "main_thread": threading.main_thread().ident == threading.get_ident(),
    "comm": open("/proc/self/comm").read(),
    "rlimits": [resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")],
    "signals": {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals() if isinstance(s, signal.Signals)},
    "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "stdio": [
        [s.encoding, s.errors, s.line_buffering, s.isatty(), s.mode, s.name, type(s.buffer).__name__,
         stat.S_IFMT(os.fstat(s.fileno()).st_mode), os.get_blocking(s.fileno()), os.get_inheritable(s.fileno())]
        for s in (sys.stdin, sys.stdout, sys.stderr)
    ],
    "stdin": sys.stdin.read(),
}
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
state["fds"] = [fd for fd in fds if os.path.exists(f"/proc/self/fd/{fd}")]
state["umask"] = os.umask(0o22)
os.umask(state["umask"])
state["modules"] = MODULES
state["ppid"] = os.getppid()
print(json.dumps(state))
'''

# What may differ between a cold and a warm start (docs/hooks.md, "Warm start").
DIFFERENT = {"ppid", "modules"}


@pytest.mark.parametrize(
    "shebang",
    [f"#!{PY}", f"#!{PY} -S", f"#!{PY} -I", f"#!{PY} -u", f"#!{PY} -EB", "#!/usr/bin/env python3"],
)
def test_a_warm_start_sees_what_a_cold_start_sees(ws: Path, tmp_path: Path, shebang: str) -> None:
    hook = write_hook(ws, "introspect.py", INTROSPECT, shebang)
    env = hook_env(EVOLVE_TEST_SEEN="yes ✓")
    data = {"hook": "chat", "x": "é"}

    async def scenario(warm: WarmStarts) -> tuple[dict[str, Any], dict[str, Any]]:
        cold = await run(hook, None, data=data, env=env)
        hot = await run(hook, warm, data=data, env=env)
        assert cold.error is None, cold.stderr
        assert hot.error is None, hot.stderr
        assert hot.stderr == cold.stderr == ""
        return cold.result or {}, hot.result or {}

    cold, hot = with_warm(tmp_path, scenario)
    assert set(cold) == set(hot)
    # Each run carries its own tag (EVOLVE_RUN), warm or cold; the rest of the environment is the same.
    warm_tag, cold_tag = hot["env"].pop("EVOLVE_RUN"), cold["env"].pop("EVOLVE_RUN")
    assert warm_tag and cold_tag and warm_tag != cold_tag
    for key in sorted(set(cold) - DIFFERENT):
        assert hot[key] == cold[key], f"{key}: warm {hot[key]!r}, cold {cold[key]!r}"
    assert hot["stdin"] == json.dumps(data, ensure_ascii=False)
    assert hot["argv"] == [str(hook), "chat"]
    assert hot["own_group"] is True
    assert hot["ppid"] != cold["ppid"] == os.getpid()  # the warm one's parent is its server
    # A warm start may find more modules loaded (what its server imported for all hooks), never fewer.
    assert set(cold["modules"]) <= set(hot["modules"])
    extra = {m.partition(".")[0] for m in set(hot["modules"]) - set(cold["modules"])}
    assert extra <= set(sys.stdlib_module_names), extra - set(sys.stdlib_module_names)


EXITS = {
    "exit code": "import sys\nprint('{\"a\": 1}')\nsys.exit(3)\n",
    "exit message": "import sys\nsys.exit('going away')\n",
    "exit None": "raise SystemExit\n",
    "uncaught": "def f():\n    raise ValueError('broken ✓')\nprint('{\"before\": 1}')\nf()\n",
    "chained": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e\n",
    "syntax error": "print('{}')\ndef (:\n",
    "compile warning": "x = 1\nif x is 1:\n    print('{\"is\": true}')\n",
    "keyboard interrupt": "raise KeyboardInterrupt\n",
    "killed": "import os, signal\nprint('{\"a\": 1}', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "os._exit": "import os\nprint('{\"lost\": 1}')\nos._exit(5)\n",
    "excepthook": (
        "import sys\nsys.excepthook = lambda t, v, tb: print('hooked', t.__name__, tb.tb_frame.f_code.co_name,"
        " file=sys.stderr)\nraise RuntimeError('x')\n"
    ),
    "exit in excepthook": "import sys\ndef h(*a):\n    sys.exit(7)\nsys.excepthook = h\nraise RuntimeError\n",
    "atexit": "import atexit, sys\natexit.register(lambda: print('{\"atexit\": true}'))\nsys.exit(0)\n",
    "atexit fails": "import atexit\natexit.register(lambda: 1 / 0)\n",
    "unflushed file": (
        "f = open('written.txt', 'w')\nf.write('kept at exit')\nimport sys\nprint('{\"opened\": true}')\n"
    ),
    "del at exit": (
        "import sys\nclass D:\n    def __del__(self):\n        print('{\"deleted\": true}')\n"
        "d = D()\ncycle = [D()]\ncycle.append(cycle)\n"
    ),
    "del at exit, from the oldest generation": (
        "import gc\nclass D:\n    def __del__(self):\n        print('{\"deleted\": true}')\n"
        "cycle = [D()]\ncycle.append(cycle)\ngc.collect()\n"
    ),
    "del at exit, frozen and unfrozen": (
        "import gc\nclass D:\n    def __del__(self):\n        print('{\"deleted\": true}')\n"
        "cycle = [D()]\ncycle.append(cycle)\ngc.freeze()\ngc.unfreeze()\n"
    ),
    "garbage collected before the modules are cleared": (
        "import sys\nclass D:\n    def __del__(self):\n        sys.stdout.write('{\"deleted\": true}\\n')\n"
        "c = [D()]\nc.append(c)\ndel c\n"
    ),
    "gc callbacks at exit": (
        "import gc, sys\ngc.callbacks.append(lambda phase, info: print(phase, info['generation'], file=sys.stderr))\n"
    ),
    "thread": (
        "import threading, time\ndef late():\n    time.sleep(0.2)\n    print('{\"thread\": true}')\n"
        "threading.Thread(target=late).start()\n"
    ),
    "no newline": "import sys\nsys.stdout.write('{\"partial\": 1}')\n",
    "stderr and stdout": "import sys\nprint('warn', file=sys.stderr)\nprint('{\"ok\": 1}')\n",
    "file deleted at exit": "import sys\nprint(sorted(k for k in globals() if k.startswith('__')), file=sys.stderr)\n",
}


@pytest.mark.parametrize("case", sorted(EXITS))
def test_a_warm_run_ends_as_a_cold_run_ends(ws: Path, tmp_path: Path, case: str) -> None:
    hook = write_hook(ws, "ends.py", EXITS[case])

    async def scenario(warm: WarmStarts) -> tuple[dict[str, Any], dict[str, Any], str, str]:
        cold = await run(hook, None)
        cold_file = (ws / "written.txt").read_text() if (ws / "written.txt").exists() else ""
        (ws / "written.txt").unlink(missing_ok=True)
        hot = await run(hook, warm)
        hot_file = (ws / "written.txt").read_text() if (ws / "written.txt").exists() else ""
        return outcome(cold), outcome(hot), cold_file, hot_file

    cold, hot, cold_file, hot_file = with_warm(tmp_path, scenario)
    assert hot == cold
    assert hot_file == cold_file
    if case == "killed":
        assert hot["error"] == "exit SIGKILL"
    if case == "keyboard interrupt":
        assert hot["signal"] == "SIGINT" and "KeyboardInterrupt" in hot["stderr"]
    if case == "unflushed file":
        assert hot_file == "kept at exit"
    if case == "uncaught":  # its traceback shows the hook's frames only
        assert "Traceback (most recent call last):" in hot["stderr"]
        assert "evolve-warm" not in hot["stderr"] and "zygote" not in hot["stderr"]


# --- one run is not seen by the next -----------------------------------------------------------


def test_what_a_run_changes_is_gone_in_the_next(ws: Path, tmp_path: Path) -> None:
    body = """import json, os, random, sys
first = not os.path.exists("ran")
seen = {
    "json_dumps": json.dumps is not None,
    "mine": "mine" in sys.modules,
    "env": os.environ.get("SET_BY_A_RUN"),
    "path": [p for p in sys.path if p.endswith("added")],
    "marker": getattr(json, "marker", None),
    "random": random.random(),
}
open("ran", "a").write("x")
dumps = json.dumps
json.marker = "set by a run"
sys.modules["mine"] = sys
os.environ["SET_BY_A_RUN"] = "1"
sys.path.append("added")
json.dumps = None
print(dumps(seen))
"""
    hook = write_hook(ws, "changes.py", body)

    async def scenario(warm: WarmStarts) -> list[dict[str, Any]]:
        runs = [await run(hook, warm) for _ in range(3)]
        assert [r.error for r in runs] == [None] * 3, [r.stderr for r in runs]
        return [r.result or {} for r in runs]

    results = with_warm(tmp_path, scenario)
    for result in results:
        assert {k: v for k, v in result.items() if k != "random"} == {
            "json_dumps": True,
            "mine": False,
            "env": None,
            "path": [],
            "marker": None,
        }
    assert len({r["random"] for r in results}) == 3  # every run has its own random state


def test_an_edited_hook_and_its_edited_module_run_as_edited(ws: Path, tmp_path: Path) -> None:
    helper = ws / "hooks" / "helper.py"
    helper.write_text("VALUE = 'first'\n")
    hook = write_hook(
        ws, "edited.py", "import json, helper\nprint(json.dumps({'v': helper.VALUE, 'c': 1}))\n"
    )

    async def scenario(warm: WarmStarts) -> list[Any]:
        seen = [(await run(hook, warm)).result]
        helper.write_text("VALUE = 'second'\n")
        seen.append((await run(hook, warm)).result)
        write_hook(ws, "edited.py", "import json, helper\nprint(json.dumps({'v': helper.VALUE, 'c': 2}))\n")
        seen.append((await run(hook, warm)).result)
        return seen

    assert with_warm(tmp_path, scenario) == [
        {"v": "first", "c": 1},
        {"v": "second", "c": 1},
        {"v": "second", "c": 2},
    ]


def test_a_module_beside_the_hook_wins_over_a_preloaded_one(ws: Path, tmp_path: Path) -> None:
    """hooks/json.py is what `import json` gives a hook there, cold and warm (and what the other
    preloaded modules importing json would get)."""
    (ws / "hooks" / "json.py").write_text("def dumps(value):\n    return '{\"local\": true}'\n")
    hook = write_hook(ws, "shadowed.py", "import json\nprint(json.dumps({}))\n")

    async def scenario(warm: WarmStarts) -> tuple[Any, Any]:
        return (await run(hook, None)).result, (await run(hook, warm)).result

    assert with_warm(tmp_path, scenario) == ({"local": True}, {"local": True})


# --- through the engine's own test of the example workspace ------------------------------------


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_the_example_workspace_test_passes_with_its_hook_run_by_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], warm: bool
) -> None:
    """tests/notes_test.py of the example workspace, with every run of the hook made by
    engine.runner (warm or cold) instead of subprocess.run."""
    ws = tmp_path / "example"
    shutil.copytree(EXAMPLE, ws)
    loop = WarmLoop(tmp_path / "warm")
    runs: list[bool] = []
    real = subprocess.run

    def via_runner(args: Any, *rest: Any, **kw: Any) -> subprocess.CompletedProcess[bytes]:
        argv = [str(a) for a in args] if isinstance(args, list) else []
        if len(argv) != 2 or not argv[0].endswith("/hooks/notes.py"):
            return real(args, *rest, **kw)
        timeout = kw.get("timeout") or 20.0

        async def one() -> Any:
            pool = loop.warm if warm else None
            if pool is not None:
                assert await pool.prepare(argv[0], cwd=str(kw["cwd"]), env=kw.get("env"))
            before = pool.warm_runs if pool is not None else 0
            done = await run_process(
                argv,
                cwd=Path(kw["cwd"]),
                env=kw.get("env"),
                stdin=kw.get("input") or b"",
                timeout_ms=int(timeout * 1000),
                stdout_limit=1 << 20,
                warm=pool,
            )
            runs.append(pool is not None and pool.warm_runs == before + 1)
            return done

        done = loop.run(one())
        assert done.spawn_error is None and done.failure is None, done
        return subprocess.CompletedProcess(args, done.returncode or 0, done.stdout, done.stderr)

    monkeypatch.setattr(subprocess, "run", via_runner)
    monkeypatch.setenv("OPENCODE_EVOLVE_WORKSPACE", str(ws))
    try:
        with pytest.raises(SystemExit) as exited:
            runpy.run_path(str(ws / "tests" / "notes_test.py"), run_name="__main__")
    finally:
        loop.close()
    out = capsys.readouterr()
    assert exited.value.code == 0, out.err
    assert "4 checks, 4 passed" in out.out
    assert len(runs) >= 10
    assert all(runs) if warm else not any(runs)


# --- when a ready interpreter cannot be had --------------------------------------------------


def test_hooks_that_are_not_python_start_cold(ws: Path, tmp_path: Path) -> None:
    sh = write_hook(ws, "a.sh", "echo '{\"sh\": 1}'\n", "#!/bin/sh")
    node_like = write_hook(ws, "b.py", "print('{}')\n", "#!/usr/bin/env -i python3")  # env changing the env

    async def scenario(warm: WarmStarts) -> list[Any]:
        found = [await warm.prepare(str(p), cwd=str(ws), env=None) for p in (sh, node_like)]
        return [
            *found,
            (await execute(_run(), sh, cwd=ws, timeout_ms=5000, stdout_limit=1000, warm=warm)).result,
        ]

    assert with_warm(tmp_path, scenario) == [False, False, {"sh": 1}]


def _run(stage: str = "chat") -> HookRun:
    return HookRun(id=new_id("run"), stage=stage, hook="h", started_at=time.time(), input={"hook": stage})


def test_an_interpreter_that_cannot_serve_leaves_its_hooks_cold_and_says_why(
    ws: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nexec {PY} -c "print(\'{{\\"fake\\": 1}}\')"\n')  # runs no script it is given
    fake.chmod(0o755)
    interactive = write_hook(ws, "i.py", "print('{\"i\": 1}')\n", f"#!{PY} -i")
    faked = write_hook(ws, "f.py", "print('{\"real\": 1}')\n", f"#!{fake}")
    caplog.set_level(logging.WARNING, "evolve")
    # An interactive interpreter writes its history into $HOME when it exits: the test's own HOME,
    # never the person's running the tests.
    home = tmp_path / "home"
    home.mkdir()
    env = hook_env(HOME=str(home))

    async def scenario(warm: WarmStarts) -> list[Any]:
        ready = [await warm.prepare(str(p), cwd=str(ws), env=env) for p in (interactive, faked)]
        runs = [
            await execute(_run(), p, cwd=ws, timeout_ms=10_000, stdout_limit=1000, warm=warm, env=env)
            for p in (interactive, faked)
        ]
        cold = [
            await execute(_run(), p, cwd=ws, timeout_ms=10_000, stdout_limit=1000, env=env)
            for p in (interactive, faked)
        ]
        assert [outcome(r) for r in runs] == [outcome(r) for r in cold]
        return [ready, [r.result for r in runs], warm.warm_runs, warm.zygote_pids()]

    ready, results, warm_runs, pids = with_warm(tmp_path, scenario)
    assert ready == [False, False]
    assert results[1] == {"fake": 1}  # what its interpreter makes of it, as for a cold start
    assert (warm_runs, pids) == (0, [])
    logged = caplog.text
    assert "no warm start for" in logged and "interactive mode" in logged
    assert str(fake) in logged
    if importlib.util.find_spec("readline") is not None:  # what writes the history
        assert (home / ".python_history").is_file()


def test_turned_off_no_interpreter_is_kept_ready(tmp_path: Path) -> None:
    from engine.runtime import Engine

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)

    async def main() -> tuple[list[int], int, list[str]]:
        engine = Engine(ws, env={**hook_env(), "EVOLVE_HOOK_WARM_START": "off"}, journal=False)
        await engine.start()
        try:
            result = await engine.stages.dispatch("mutate_request", {"session": {"id": "s"}, "system": ["x"]})
            assert engine.warm is not None
            return engine.warm.zygote_pids(), engine.warm.warm_runs, result.failed
        finally:
            await engine.close()

    assert asyncio.run(main()) == ([], 0, [])


# --- a server that dies, hangs, or goes stale -------------------------------------------------


def test_a_killed_server_is_replaced_and_no_run_fails_for_it(
    ws: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook = write_hook(ws, "h.py", "import json, os\nprint(json.dumps({'pid': os.getpid()}))\n")
    caplog.set_level(logging.WARNING, "evolve")

    async def scenario(warm: WarmStarts) -> tuple[int, int, HookRun, int]:
        await run(hook, warm)
        (first,) = warm.zygote_pids()
        os.kill(first, signal.SIGKILL)
        await asyncio.sleep(0.2)
        cold = await execute(_run(), hook, cwd=ws, timeout_ms=10_000, stdout_limit=1000, warm=warm)
        again = await run(hook, warm)  # a new server is made ready, and the hook starts warm again
        (second,) = warm.zygote_pids()
        assert again.error is None
        return first, second, cold, warm.warm_runs

    first, second, cold, warm_runs = with_warm(tmp_path, scenario)
    assert cold.error is None and cold.result is not None
    assert second != first and warm_runs == 2
    assert not pid_alive(first)
    assert "warm start server" in caplog.text and "gone" in caplog.text


def test_a_server_killed_during_a_run_ends_the_run_clearly_and_leaves_nothing(
    ws: Path, tmp_path: Path
) -> None:
    body = """import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
open("pids", "w").write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""
    hook = write_hook(ws, "slow.py", body)

    async def scenario(warm: WarmStarts) -> tuple[HookRun, list[int], int]:
        running = asyncio.ensure_future(run(hook, warm, timeout_ms=30_000))
        while not (ws / "pids").exists() or len((ws / "pids").read_text().split()) < 2:
            await asyncio.sleep(0.02)
        (server,) = warm.zygote_pids()
        os.kill(server, signal.SIGKILL)
        return (
            await asyncio.wait_for(running, 10),
            [int(p) for p in (ws / "pids").read_text().split()],
            server,
        )

    done, pids, server = with_warm(tmp_path, scenario)
    assert done.error is not None and "warm start server died" in done.error, done.error
    assert "process group was killed" in done.error
    assert wait_gone(*pids, server), "a process of the run outlived it"
    assert not [p for p, state in children_of(os.getpid()) if state == "Z"]


def test_a_hung_server_is_given_up_and_the_hook_runs_once(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that had not said it started when the engine gave up on its server never runs the
    hook: the cold start the engine makes instead is the only run."""
    hook = write_hook(ws, "once.py", "open('runs', 'a').write('x')\nprint('{}')\n")
    monkeypatch.setattr(warm_server, "START_TIMEOUT_S", 0.5)

    async def scenario(warm: WarmStarts) -> tuple[HookRun, int]:
        assert await warm.prepare(str(hook), cwd=str(ws), env=None)
        (server,) = warm.zygote_pids()
        os.kill(server, signal.SIGSTOP)
        try:
            done = await execute(_run(), hook, cwd=ws, timeout_ms=10_000, stdout_limit=1000, warm=warm)
        finally:
            os.kill(server, signal.SIGCONT)
        await asyncio.sleep(1.0)  # time enough for a late child to run the hook, if it could
        return done, server

    done, server = with_warm(tmp_path, scenario)
    assert done.error is None, done.error
    assert (ws / "runs").read_text() == "x"
    assert wait_gone(server)


class Ignored:
    """An OutputSink that keeps nothing."""

    def received(self, fd: int, data: bytes) -> None:
        pass

    def closed(self, fd: int) -> None:
        pass


def test_a_hook_whose_line_is_edited_runs_as_its_new_line_says_at_its_next_run(
    ws: Path, tmp_path: Path
) -> None:
    """The engine remembers a hook's `#!` line while the file is unchanged: an edit of that line
    (to a shell script and back) is what the very next run starts."""
    hook = write_hook(ws, "edited.py", "print('{\"py\": 1}')\n")

    async def scenario(warm: WarmStarts) -> list[Any]:
        seen: list[Any] = []
        for shebang, body in [
            (f"#!{PY}", "print('{\"py\": 1}')\n"),
            ("#!/bin/sh", "echo '{\"sh\": 1}'\n"),
            (f"#!{PY}", "print('{\"py\": 2}')\n"),
        ]:
            write_hook(ws, "edited.py", body, shebang)
            ready = await warm.prepare(str(hook), cwd=str(ws), env=None)
            before = warm.warm_runs
            run = await execute(_run(), hook, cwd=ws, timeout_ms=20_000, stdout_limit=1000, warm=warm)
            seen.append((ready, warm.warm_runs - before, run.result))
        return seen

    assert with_warm(tmp_path, scenario) == [
        (True, 1, {"py": 1}),
        (False, 0, {"sh": 1}),
        (True, 1, {"py": 2}),
    ]


def test_a_changed_environment_in_the_same_dict_gets_its_own_interpreter(ws: Path, tmp_path: Path) -> None:
    """The engine passes the same dict for every run; a variable changed in it is seen by the next
    run, from a server started in the changed environment."""
    hook = write_hook(
        ws, "env.py", "import json, os\nprint(json.dumps({'x': os.environ.get('EVOLVE_T_X')}))\n"
    )
    env = hook_env(EVOLVE_T_X="1")

    async def scenario(warm: WarmStarts) -> list[Any]:
        first = await run(hook, warm, env=env)
        env["EVOLVE_T_X"] = "2"
        second = await run(hook, warm, env=env)
        return [first.result, second.result, len(warm._slots)]

    assert with_warm(tmp_path, scenario) == [{"x": "1"}, {"x": "2"}, 2]


def test_a_hook_rewritten_meanwhile_is_not_run_warm(ws: Path, tmp_path: Path) -> None:
    """The server reads the hook when it forks: when its #! line is no longer the one the engine
    saw (the file was rewritten in between), it runs nothing, and the engine starts the hook cold."""
    hook = write_hook(ws, "moving.py", "open('ran', 'a').write('x')\nprint('{}')\n")

    async def scenario(warm: WarmStarts) -> tuple[WarmProcess | None, bool]:
        assert await warm.prepare(str(hook), cwd=str(ws), env=None)
        zygote = next(s.zygote for s in warm._slots.values() if s.zygote is not None)
        started = await zygote.spawn(str(hook), "chat", str(ws), b"{}", b"#!/bin/sh", output=Ignored())
        await asyncio.sleep(0.3)
        return started, (ws / "ran").exists()

    assert with_warm(tmp_path, scenario) == (None, False)


def test_a_changed_interpreter_gets_a_new_server(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `#!` line through a script (a version manager's shim) is resolved again now and then: when
    it leads to another interpreter, the hooks start with that one."""
    shim = tmp_path / "bin" / "python3"
    shim.parent.mkdir()
    target = tmp_path / "target"
    target.write_text(PY)
    shim.write_text(f'#!/bin/sh\nexec "$(cat {target})" "$@"\n')
    shim.chmod(0o755)
    hook = write_hook(
        ws, "which.py", "import json, sys\nprint(json.dumps({'exe': sys.executable}))\n", f"#!{shim}"
    )
    monkeypatch.setattr(warmstart, "REPROBE_EVERY_S", 0.0)
    other = shutil.which("python3", path="/usr/bin:/bin")
    if other is None or os.path.realpath(other) == os.path.realpath(PY):
        pytest.skip("needs a second python3 in /usr/bin")

    async def scenario(warm: WarmStarts) -> list[Any]:
        seen = [(await run(hook, warm)).result]
        target.write_text(other)
        # Each run asks for a new look at what the line starts (at most one at a time); once one
        # has seen the change, the server is replaced and the next warm run is the other python.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = await execute(_run(), hook, cwd=ws, timeout_ms=10_000, stdout_limit=1000, warm=warm)
            assert done.error is None, done.error
            if done.result == {"exe": other}:
                break
            await asyncio.sleep(0.05)
        seen.append((await run(hook, warm)).result)
        return seen

    first, second = with_warm(tmp_path, scenario)
    assert first == {"exe": PY}
    assert second == {"exe": other}


def test_a_changed_file_of_the_interpreter_gets_a_new_server(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warmstart, "CHECK_EVERY_S", 0.0)
    site = tmp_path / "site"
    site.mkdir()
    hook = write_hook(ws, "p.py", "import json, os\nprint(json.dumps({'pid': os.getpid()}))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}

    async def scenario(warm: WarmStarts) -> tuple[int, int, HookRun]:
        await run(hook, warm, env=env)
        (first,) = warm.zygote_pids()
        (site / "new_module.py").write_text("")  # the directory on its sys.path changed
        changed = await execute(
            _run(), hook, cwd=ws, timeout_ms=10_000, stdout_limit=1000, env=env, warm=warm
        )
        await run(hook, warm, env=env)
        (second,) = warm.zygote_pids()
        return first, second, changed

    first, second, changed = with_warm(tmp_path, scenario)
    assert changed.error is None
    assert first != second


def test_no_more_servers_than_the_limit(ws: Path, tmp_path: Path) -> None:
    hooks = [
        write_hook(ws, f"h{i}.py", "print('{}')\n", f"#!{PY} {flag}")
        for i, flag in enumerate(["-B", "-O", "-OO", "-b", "-q", "-s"])
    ]

    async def scenario(warm: WarmStarts) -> list[int]:
        counts = []
        for hook in hooks:
            await run(hook, warm)
            await asyncio.sleep(0.1)
            counts.append(len(warm.zygote_pids()))
        return counts

    counts = with_warm(tmp_path, scenario)
    assert max(counts) <= warmstart.LIMIT
    assert counts[-1] == warmstart.LIMIT


def test_closing_ends_the_servers_and_their_runs_and_reaps_them(ws: Path, tmp_path: Path) -> None:
    hook = write_hook(
        ws, "sleepy.py", "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    )
    quick = write_hook(ws, "quick.py", "print('{}')\n")

    async def main() -> tuple[list[int], int, HookRun | BaseException]:
        warm = WarmStarts(tmp_path / "warm")
        for _ in range(3):
            await run(quick, warm)
        running = asyncio.ensure_future(run(hook, warm, timeout_ms=60_000))
        while not (ws / "pid").exists() or not (ws / "pid").read_text():
            await asyncio.sleep(0.02)
        servers = warm.zygote_pids()
        await warm.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(running), 10)
        result: HookRun | BaseException = running.result() if running.done() else TimeoutError()
        return servers, int((ws / "pid").read_text()), result

    servers, hook_pid, result = asyncio.run(main())
    assert servers
    assert wait_gone(hook_pid, *servers)
    assert isinstance(result, HookRun) and result.error is not None
    assert not [p for p, state in children_of(os.getpid()) if state == "Z"]


def test_a_run_cancelled_while_its_child_starts_leaves_no_process(ws: Path, tmp_path: Path) -> None:
    """The engine may give a run up (the heartbeat stopping, the engine closing) at any moment,
    also between asking the server for a child and hearing that it started: whenever it does, the
    hook does not go on running unsupervised."""
    hook = write_hook(
        ws,
        "sleepy.py",
        "import os, sys, time\nopen(sys.argv[1] + '.pid', 'w').write(str(os.getpid()))\ntime.sleep(60)\n",
    )

    async def main(warm: WarmStarts) -> tuple[list[int], list[int]]:
        assert await warm.prepare(str(hook), cwd=str(ws), env=None)
        # Cancelled after 0 to 39 turns of the event loop (before the request, between the request
        # and the start), then after real time (while it runs).
        waits: list[int | float] = [*range(40), 0.005, 0.02, 0.1]
        for number, wait in enumerate(waits):
            running = asyncio.ensure_future(
                run_process(
                    [str(hook), f"s{number}"],
                    cwd=ws,
                    env=None,
                    stdin=b"{}",
                    timeout_ms=60_000,
                    stdout_limit=1 << 20,
                    warm=warm,
                )
            )
            if isinstance(wait, float):
                await asyncio.sleep(wait)
            for _ in range(wait if isinstance(wait, int) else 0):
                await asyncio.sleep(0)
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
        await asyncio.sleep(1)  # a child that started writes its pid at once
        pids = [int(f.read_text()) for f in ws.glob("s*.pid") if f.read_text()]
        # Checked while the servers still run: closing them ends whatever they started.
        await asyncio.to_thread(wait_gone, *pids)
        left = [p for p in pids if pid_alive(p)]
        return pids, left

    pids, left = with_warm(tmp_path, main)
    assert pids, "no run got as far as starting its hook: the test cancels too early"
    assert not left, f"{len(left)} of {len(pids)} cancelled hooks still run"
