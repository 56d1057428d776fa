"""Tests for engine.runner: one hook process per run.

Every test runs a real script from tmp_path/hooks in a real subprocess; with warm starts on (the
test run's --warm-start, tests/conftest.py), every Python hook among them is forked from a ready
interpreter, and `run_hook` checks that it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from engine.hooks.runner import KILL_GRACE_S, STDERR_LIMIT, execute
from engine.protocol.records import HookRun, new_id
from tests.support.processes import wait_gone
from tests.support.warm import WarmLoop

# scripts/test.sh runs these tests a second time with warm starts off.
pytestmark = pytest.mark.hooks

PY = sys.executable  # a real python3; the pyenv shim on PATH is slow to start


# --- helpers ---------------------------------------------------------------------------------

WARM: WarmLoop | None = None  # the test run's ready interpreters, when it has warm starts on


@pytest.fixture(autouse=True)
def _warm_starts(warm_loop: WarmLoop | None) -> Any:
    global WARM
    WARM = warm_loop
    yield
    WARM = None


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace root with an empty hooks/ directory."""
    (tmp_path / "hooks").mkdir()
    return tmp_path


def hook(ws: Path, name: str, body: str, mode: int = 0o755, shebang: str | None = "sh") -> Path:
    """Write hooks/<name>; `shebang` "sh" or "py" picks the interpreter, None writes no #! line."""
    path = ws / "hooks" / name
    line = {"sh": "#!/bin/sh\n", "py": f"#!{PY}\n", None: ""}[shebang]
    path.write_text(line + body)
    path.chmod(mode)
    return path


def run_hook(
    path: Path,
    *,
    stage: str = "chat",
    data: dict[str, Any] | None = None,
    cwd: Path | None = None,
    timeout_ms: int = 10_000,
    stdout_limit: int = 1 << 20,
    env: Mapping[str, str] | None = None,
    hard_limit_s: float = 30.0,
) -> HookRun:
    """Run `execute` to completion; fail the test (instead of hanging) if it takes over `hard_limit_s`."""
    run = HookRun(
        id=new_id("run"),
        stage=stage,
        hook=path.name,
        started_at=time.time(),
        input={"hook": stage} if data is None else data,
    )

    where = cwd or path.parent.parent

    async def main() -> HookRun:
        warm = WARM.warm if WARM is not None else None
        ready = warm is not None and await warm.prepare(str(path), cwd=str(where), env=env)
        before = warm.warm_runs if warm is not None else 0
        await asyncio.wait_for(
            execute(
                run, path, cwd=where, timeout_ms=timeout_ms, stdout_limit=stdout_limit, env=env, warm=warm
            ),
            hard_limit_s,
        )
        if ready:
            assert warm is not None and warm.warm_runs == before + 1, f"{path.name} did not start warm"
        return run

    return WARM.run(main()) if WARM is not None else asyncio.run(main())


def timed(fn: Any, *args: Any, **kw: Any) -> tuple[HookRun, float]:
    t0 = time.monotonic()
    out = fn(*args, **kw)
    return out, time.monotonic() - t0


def wait_file(path: Path, within_s: float = 5.0) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def kill_quietly(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 9)


# --- invocation: argv, stdin, cwd, env ----------------------------------------


@pytest.mark.parametrize("stage", ["chat", "discover", "tool_before", "mutate_request"])
def test_argv_is_exactly_the_stage(ws: Path, stage: str) -> None:
    path = hook(ws, "argv.py", 'import json, sys\nprint(json.dumps({"argv": sys.argv[1:]}))\n', shebang="py")
    run = run_hook(path, stage=stage)
    assert run.error is None, run.error
    assert run.result == {"argv": [stage]}
    assert run.stage == stage


def test_stdin_is_exactly_the_json_document_without_newline(ws: Path) -> None:
    data = {
        "hook": "chat",
        "prompts": {"chat": "héllo ✓\n", "preamble": ""},
        "zeta": [1, 2.5, None, True, {"x": "y"}],
        "alpha": "last key written last",
        "quote": 'a "q" \\ b',
    }
    path = hook(
        ws,
        "stdin.py",
        "import sys\nopen('stdin.bin', 'wb').write(sys.stdin.buffer.read())\n",
        shebang="py",
    )
    run = run_hook(path, data=data)
    assert run.error is None, run.error
    raw = (ws / "stdin.bin").read_bytes()
    assert raw == json.dumps(data, ensure_ascii=False).encode("utf-8")
    assert not raw.endswith(b"\n")
    decoded = json.loads(raw.decode("utf-8"))
    assert decoded == data
    assert list(decoded) == list(data)  # key order kept
    assert "héllo ✓".encode() in raw  # UTF-8 as is, like JSON.stringify
    assert run.input is data


def test_stdin_closed_after_document(ws: Path) -> None:
    """The hook sees EOF: a `cat` that would otherwise block finishes."""
    path = hook(ws, "cat.sh", 'n=$(cat | wc -c)\necho "{\\"bytes\\": $n}"\n')
    data = {"hook": "idle", "x": "y"}
    run = run_hook(path, data=data, timeout_ms=5000)
    assert run.error is None, run.error
    assert run.result == {"bytes": len(json.dumps(data).encode())}


def test_cwd_is_the_given_directory(ws: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    other = tmp_path_factory.mktemp("elsewhere")
    path = hook(ws, "cwd.py", 'import json, os\nprint(json.dumps({"cwd": os.getcwd()}))\n', shebang="py")
    assert run_hook(path).result == {"cwd": str(ws.resolve())}
    assert run_hook(path, cwd=other).result == {"cwd": str(other.resolve())}


def test_env_is_passed_exactly(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNNER_TEST_HOST_ONLY", "host")
    body = (
        "import json, os\n"
        'print(json.dumps({k: os.environ.get(k) for k in ("RUNNER_TEST_GIVEN", "RUNNER_TEST_HOST_ONLY")}))\n'
    )
    path = hook(ws, "env.py", body, shebang="py")
    given = run_hook(path, env={"PATH": os.environ["PATH"], "RUNNER_TEST_GIVEN": "given ✓"})
    assert given.result == {"RUNNER_TEST_GIVEN": "given ✓", "RUNNER_TEST_HOST_ONLY": None}
    inherited = run_hook(path, env=None)
    assert inherited.result == {"RUNNER_TEST_GIVEN": None, "RUNNER_TEST_HOST_ONLY": "host"}


# --- stdout parsing -----------------------------------------------------


def test_jsonl_merge_logs_and_blank_lines(ws: Path) -> None:
    body = r"""cat >/dev/null
printf '\n'
echo '{"a": 1, "b": "first"}'
printf '   \t \n'
echo '{"log": "hello"}'
echo '{"log": {"level": "warn"}, "a": "dropped with the log line"}'
echo '{"b": "second", "c": [1, 2]}'
echo '{"log": ""}'
echo ''
echo '{"c": {"nested": true}}'
"""
    run = run_hook(hook(ws, "jsonl.sh", body))
    assert run.error is None, run.error
    assert run.result == {"a": 1, "b": "second", "c": {"nested": True}, "log": ""}
    assert run.logs == ["hello", {"level": "warn"}]
    assert run.stdout_lines == [
        '{"a": 1, "b": "first"}',
        '{"log": "hello"}',
        '{"log": {"level": "warn"}, "a": "dropped with the log line"}',
        '{"b": "second", "c": [1, 2]}',
        '{"log": ""}',
        '{"c": {"nested": true}}',
    ]
    assert run.exit_code == 0 and run.signal is None
    assert run.ok
    assert run.duration_ms > 0


@pytest.mark.parametrize("stdout", [b"", b"\n", b"  \n\t\n \n"])
def test_empty_stdout_is_an_empty_result(ws: Path, stdout: bytes) -> None:
    out = ws / "out.bin"
    out.write_bytes(stdout)
    run = run_hook(hook(ws, "empty.sh", f"cat >/dev/null\ncat '{out}'\n"))
    assert run.error is None, run.error
    assert run.ok
    assert run.result == {}
    assert run.stdout_lines == []
    assert run.exit_code == 0


def test_result_with_error_key_is_not_a_failure(ws: Path) -> None:
    run = run_hook(hook(ws, "err.sh", 'echo \'{"error": "reported by the hook"}\'\n'))
    assert run.ok
    assert run.result == {"error": "reported by the hook"}


def test_last_line_without_newline_parses(ws: Path) -> None:
    run = run_hook(hook(ws, "partial.sh", 'printf \'{"a": 1}\\n{"b": 2}\'\n'))
    assert run.error is None, run.error
    assert run.result == {"a": 1, "b": 2}


def test_non_json_line_names_line_number_and_text(ws: Path) -> None:
    body = "echo '{\"a\": 1}'\necho ''\necho 'this is not json at all, really'\necho '{\"b\": 2}'\n"
    run = run_hook(hook(ws, "bad.sh", body))
    assert not run.ok
    assert run.error is not None
    assert "line 3" in run.error
    assert "not JSON" in run.error
    assert "this is not json" in run.error
    assert run.result is None
    assert run.exit_code == 0
    # the raw output is kept for the console/journal
    assert "this is not json at all, really" in run.stdout_lines


@pytest.mark.parametrize(
    ("line", "shown"),
    [("null", "null"), ('"a string"', "a string"), ("[1, 2]", "[1, 2]"), ("42", "42"), ("true", "true")],
)
def test_non_object_line_fails(ws: Path, line: str, shown: str) -> None:
    out = ws / "out.txt"
    out.write_text('{"ok": true}\n' + line + "\n")
    run = run_hook(hook(ws, "nonobj.sh", f"cat '{out}'\n"))
    assert run.error is not None
    assert "line 2" in run.error
    assert "not a JSON object" in run.error
    assert shown in run.error
    assert run.result is None


def test_non_utf8_line_fails(ws: Path) -> None:
    run = run_hook(hook(ws, "latin.sh", 'echo \'{"a": 1}\'\nprintf \'{"b": "\\377\\376"}\\n\'\n'))
    assert run.error is not None
    assert "line 2" in run.error
    assert "UTF-8" in run.error
    assert run.result is None


# --- exit codes, signals, timeouts -------------------------------------------


def test_non_zero_exit(ws: Path) -> None:
    run = run_hook(hook(ws, "exit3.sh", "echo '{\"a\": 1}'\necho oops >&2\nexit 3\n"))
    assert run.error == "exit 3"
    assert run.exit_code == 3
    assert run.signal is None
    assert run.result is None
    assert run.stderr == "oops\n"
    assert run.stdout_lines == ['{"a": 1}']


def test_killed_by_own_signal(ws: Path) -> None:
    run = run_hook(hook(ws, "suicide.sh", "echo '{\"a\": 1}'\nkill -KILL $$\n"))
    assert run.error == "exit SIGKILL"
    assert run.signal == "SIGKILL"
    assert run.exit_code is None
    assert run.result is None


def test_timeout(ws: Path) -> None:
    path = hook(
        ws, "slow.py", "import time\nprint('{\"early\": 1}', flush=True)\ntime.sleep(30)\n", shebang="py"
    )
    run, took = timed(run_hook, path, timeout_ms=400)
    assert run.error is not None
    assert run.error.startswith("timeout after 400 ms")
    assert run.result is None
    assert run.stdout_lines == ['{"early": 1}']  # what it printed before is kept
    assert took < 400 / 1000 + KILL_GRACE_S + 2


HANGING = {
    "sh": "echo $$ > hook.pid\nsleep 60 &\necho $! > grandchild.pid\necho '{\"started\": true}'\nwait\n",
    "py": (
        "import os, subprocess\nopen('hook.pid', 'w').write(str(os.getpid()))\n"
        "child = subprocess.Popen(['sleep', '60'])\nopen('grandchild.pid', 'w').write(str(child.pid))\n"
        "print('{\"started\": true}', flush=True)\nchild.wait()\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(HANGING))
def test_timeout_kills_hook_and_grandchild(ws: Path, kind: str) -> None:
    path = hook(ws, f"hang.{kind}", HANGING[kind], shebang=kind)
    run, took = timed(run_hook, path, timeout_ms=500)
    hook_pid = int(wait_file(ws / "hook.pid"))
    grandchild = int(wait_file(ws / "grandchild.pid"))
    try:
        assert run.error is not None and run.error.startswith("timeout after 500 ms")
        assert took < 0.5 + KILL_GRACE_S + 2
        assert wait_gone(hook_pid), "the hook survived its timeout"
        # gone: os.kill(pid, 0) raises, or (before init reaps it) a zombie
        assert wait_gone(grandchild), "the grandchild survived the timeout"
    finally:
        kill_quietly(grandchild)


def test_timeout_kills_hook_that_ignores_sigterm(ws: Path) -> None:
    body = """import os, signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "60"])  # inherits the ignored SIGTERM
open("pids", "w").write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""
    path = hook(ws, "stubborn.py", body, shebang="py")
    run, took = timed(run_hook, path, timeout_ms=500)
    pids = [int(p) for p in wait_file(ws / "pids").split()]
    try:
        assert run.error is not None and run.error.startswith("timeout after 500 ms")
        assert run.signal == "SIGKILL"
        assert took < 0.5 + KILL_GRACE_S + 2
        for pid in pids:
            assert wait_gone(pid), f"pid {pid} survived"
    finally:
        for pid in pids:
            kill_quietly(pid)


LEAVING = {
    "sh": "sleep 30 &\necho $! > bg.pid\necho '{\"done\": true}'\nexit 0\n",
    "py": (
        "import subprocess\nbg = subprocess.Popen(['sleep', '30'])  # it inherits stdout and stderr\n"
        "open('bg.pid', 'w').write(str(bg.pid))\nprint('{\"done\": true}')\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(LEAVING))
def test_background_process_holding_stdout_does_not_block(ws: Path, kind: str) -> None:
    run, took = timed(run_hook, hook(ws, f"bg.{kind}", LEAVING[kind], shebang=kind), timeout_ms=10_000)
    bg = int(wait_file(ws / "bg.pid"))
    try:
        assert run.error is None, run.error
        assert run.result == {"done": True}
        assert run.exit_code == 0
        assert took < 4, f"took {took:.1f}s for a hook that exited at once"
        assert wait_gone(bg), "the leftover background process is still running"
    finally:
        kill_quietly(bg)


def test_background_process_does_not_hide_a_failure(ws: Path) -> None:
    body = "sleep 30 &\necho $! > bg.pid\necho '{\"a\": 1}'\nexit 5\n"
    run, took = timed(run_hook, hook(ws, "bgfail.sh", body), timeout_ms=10_000)
    bg = int(wait_file(ws / "bg.pid"))
    try:
        assert run.error == "exit 5"
        assert took < 4
    finally:
        kill_quietly(bg)


# --- output bounds and pipes ------------------------------------------------------------------


def test_stdout_over_limit_fails_quickly(ws: Path) -> None:
    body = """import sys
chunk = b'{"k": "' + b"x" * (1 << 20) + b'"}\\n'
for _ in range(50):
    sys.stdout.buffer.write(chunk)
sys.stdout.flush()
"""
    path = hook(ws, "huge.py", body, shebang="py")
    run, took = timed(run_hook, path, stdout_limit=1 << 20, timeout_ms=20_000, hard_limit_s=15)
    assert run.error is not None
    assert run.error.startswith(f"stdout exceeded {1 << 20} bytes")
    assert run.result is None
    assert took < 5, f"took {took:.1f}s"


def test_stdout_at_limit_is_fine(ws: Path) -> None:
    payload = '{"k": "' + "x" * 1000 + '"}\n'
    out = ws / "out.txt"
    out.write_text(payload)
    run = run_hook(hook(ws, "exact.sh", f"cat '{out}'\n"), stdout_limit=len(payload))
    assert run.error is None, run.error
    assert run.result == {"k": "x" * 1000}


def test_stdout_under_the_limit_arrives_whole_however_it_is_written(ws: Path) -> None:
    """Written in thousands of small pieces and faster than it is read (reading pauses while the
    engine holds more than it takes in), the output still arrives whole and in order."""
    body = """import sys
parts = [str(i).rjust(8, "0") for i in range(100_000)]
sys.stdout.write('{"parts": "')
for part in parts:
    sys.stdout.write(part)
sys.stdout.write('"}\\n')
sys.stderr.write("e" * 200_000)
"""
    path = hook(ws, "many.py", body, shebang="py")
    run = run_hook(path, stdout_limit=1 << 20)
    assert run.error is None, run.error
    assert run.result == {"parts": "".join(str(i).rjust(8, "0") for i in range(100_000))}
    assert run.stderr == "e" * 200_000


def test_stderr_over_limit_is_truncated_and_run_succeeds(ws: Path) -> None:
    body = """import sys
sys.stderr.write("e" * (1024 * 1024))
sys.stderr.flush()
print('{"ok": true}')
"""
    run = run_hook(hook(ws, "noisy.py", body, shebang="py"))
    assert run.error is None, run.error
    assert run.result == {"ok": True}
    assert run.stderr_truncated is True
    assert len(run.stderr) == STDERR_LIMIT == 256 * 1024
    assert set(run.stderr) == {"e"}


def test_stderr_is_kept_and_not_mixed_into_the_result(ws: Path) -> None:
    run = run_hook(hook(ws, "warn.sh", 'echo "warning: x" >&2\necho \'{"a": 1}\'\necho "more" >&2\n'))
    assert run.ok
    assert run.result == {"a": 1}
    assert run.stderr == "warning: x\nmore\n"
    assert run.stderr_truncated is False


def test_hook_not_reading_large_stdin_succeeds(ws: Path) -> None:
    data = {"hook": "chat", "big": "y" * (6 * 1024 * 1024)}
    run, took = timed(run_hook, hook(ws, "noread.sh", "echo '{\"ok\": true}'\n"), data=data)
    assert run.error is None, run.error
    assert run.result == {"ok": True}
    assert took < 5


def test_hook_reading_large_stdin_gets_it_all(ws: Path) -> None:
    data = {"hook": "chat", "big": "z" * (4 * 1024 * 1024)}
    body = 'import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({"n": len(d["big"])}))\n'
    run = run_hook(hook(ws, "read.py", body, shebang="py"), data=data)
    assert run.error is None, run.error
    assert run.result == {"n": 4 * 1024 * 1024}


# --- spawn errors ------------------------------------------------------------------------


def test_not_executable(ws: Path) -> None:
    run = run_hook(hook(ws, "plain.sh", "echo '{}'\n", mode=0o644))
    assert run.error is not None
    assert run.error.startswith("cannot start hooks/plain.sh")
    assert "Permission denied" in run.error
    assert run.result is None


def test_missing_shebang(ws: Path) -> None:
    run = run_hook(hook(ws, "noshebang", "echo '{}'\n", shebang=None))
    assert run.error is not None
    assert run.error.startswith("cannot start hooks/noshebang")
    assert "Exec format error" in run.error
    assert "#!" in run.error
    assert run.result is None


def test_missing_file(ws: Path) -> None:
    run = run_hook(ws / "hooks" / "gone.sh")
    assert run.error is not None
    assert run.error.startswith("cannot start hooks/gone.sh")
    assert run.result is None
