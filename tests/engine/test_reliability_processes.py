"""No process of a hook run outlives it, by any route, and none survives the engine (docs/reliability.md,
"Nothing escapes a copy" and "After a crash"): attacks on real engines (`evolve serve`) with real
hooks, warm and cold, and kill -9.

Each hook writes the pid of what it leaves behind into the test's `pids/` directory; the test
checks that the engine ended it (and ends it itself at the end, whatever happened)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.attacks import Engines, engines, warnings_in_journal, write
from tests.support.engine_process import EngineProcess
from tests.support.processes import pid_alive
from tests.support.waiting import wait_for

pytestmark = pytest.mark.hooks

# A Python hook that forks a child which takes a session of its own and never runs another program
# (its environment is the one its parent started with), then: `hang` waits past the timeout, `leave`
# exits at once, leaving the child behind. The child closes its copies of the run's pipes, so that
# nothing ties it to the run but its tag.
FORKER = f"""#!{sys.executable}
import os, sys, time
sys.stdin.read()
if sys.argv[1] == "discover":
    print('{{"stages": ["idle", "observe_message"]}}')
    sys.exit(0)
report = os.path.join(os.environ["EVOLVE_TEST_PIDS"], sys.argv[1] + ".forked")
with open(report + ".cmdline", "wb") as f:  # a warm start shows the server's command line
    f.write(open("/proc/self/cmdline", "rb").read())
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork():  # a double fork: the grandchild is nobody's child
        os._exit(0)
    for fd in (0, 1, 2):
        os.close(fd)
    with open(report + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(report + ".tmp", report)
    time.sleep(300)
    os._exit(0)
os.waitpid(pid, 0)
while not os.path.exists(report):  # the run ends once its fork is there to be found
    time.sleep(0.01)
if sys.argv[1] == "idle":
    time.sleep(300)  # hang past the timeout
print("{{}}")
"""

# The same in sh, started cold: a child in a session of its own that outlives the hook.
SH_LEAVER = """#!/bin/sh
cat >/dev/null
if [ "$1" = discover ]; then echo '{"stages": ["observe_message"]}'; exit 0; fi
setsid sh -c 'echo $$ > "$EVOLVE_TEST_PIDS/sh.tmp"; mv "$EVOLVE_TEST_PIDS/sh.tmp" "$EVOLVE_TEST_PIDS/sh.left"; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ ! -e "$EVOLVE_TEST_PIDS/sh.left" ]; do sleep 0.01; done
echo '{}'
"""

# A cold hook that records itself and a child in a session of its own, then hangs (for kill -9).
SH_HANGER = """#!/bin/sh
cat >/dev/null
if [ "$1" = discover ]; then echo '{"stages": ["idle"]}'; exit 0; fi
setsid sh -c 'echo $$ > "$EVOLVE_TEST_PIDS/hanger.child"; exec sleep 300' </dev/null >/dev/null 2>&1 &
echo $$ > "$EVOLVE_TEST_PIDS/hanger.hook"
sleep 300
"""


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


def test_a_warm_hooks_fork_that_never_execs_dies_at_the_timeout(tmp_path: Path, started: Engines) -> None:
    """The fork of a warm-started hook carries the run's tag in its environment although it never
    ran another program (the server writes the tag into the environment block the fork inherits)."""
    ws = tmp_path / "ws"
    write(ws / "hooks" / "forker.py", FORKER)
    engine = started.start(ws, EVOLVE_HOOK_TIMEOUT="2500", EVOLVE_HOOK_WARM_START="1")
    left = _warm_fork(engine, started)
    result = engine.stage("idle", {}, session="ses_w")
    (run,) = result["run_records"]
    assert run["error"].startswith("timeout after 2500 ms")
    hung = wait_for("the hanging run's fork to report", lambda: started.reported("idle.forked"))
    assert b"evolve-warm-" in (started.pids / "idle.forked.cmdline").read_bytes()  # warm: no exec
    wait_for("the timed-out run's fork to be ended", lambda: not pid_alive(hung), timeout=10)
    wait_for("the finished run's fork to be ended", lambda: not pid_alive(left), timeout=10)


@pytest.mark.parametrize("hook", ["forker.py", "leaver.sh"])
def test_what_a_run_leaves_running_is_ended_with_it(tmp_path: Path, started: Engines, hook: str) -> None:
    """A hook that exits at once and leaves a process in a session of its own (forked warm without
    exec, or started cold with setsid): the run succeeds, and the process is ended with it."""
    ws = tmp_path / "ws"
    write(ws / "hooks" / hook, FORKER if hook.endswith(".py") else SH_LEAVER)
    engine = started.start(ws)
    for _ in range(2):  # the first run of a Python hook may start cold, the second one warm
        result = engine.stage("observe_message", {}, session="ses_l")
        (run,) = result["run_records"]
        assert run["error"] is None, run
        name = "observe_message.forked" if hook.endswith(".py") else "sh.left"
        left = wait_for("the process the run left", lambda name=name: started.reported(name))
        wait_for("the process to be ended with its run", lambda left=left: not pid_alive(left), timeout=10)
        (started.pids / name).unlink()


def test_a_killed_engines_hook_processes_are_ended_at_the_next_start(
    tmp_path: Path, started: Engines
) -> None:
    ws = tmp_path / "ws"
    write(ws / "hooks" / "hanger.sh", SH_HANGER)
    engine = started.start(ws, EVOLVE_HOOK_TIMEOUT="120000")
    request = threading.Thread(
        target=lambda: _quietly(lambda: engine.stage("idle", {}, session="ses_k")), daemon=True
    )
    request.start()
    hook = wait_for("the hook to start", lambda: started.reported("hanger.hook"))
    child = wait_for("its child to start", lambda: started.reported("hanger.child"))
    engine.kill()
    request.join(10)
    assert pid_alive(hook) and pid_alive(child)  # what the attack leaves: runs nobody supervises
    started.start(ws)
    assert not pid_alive(hook) and not pid_alive(child)  # ended before the engine answers
    warning = wait_for(
        "the warning in the journal",
        lambda: next((w for w in warnings_in_journal(ws, "recovery") if w.startswith("ended")), None),
    )
    assert "process(es) that hook runs of an engine that died left running" in warning
    assert f"{hook} (" in warning and f"{child} (" in warning


def test_a_replay_killed_with_the_engine_leaves_no_process_and_no_copy(
    tmp_path: Path, started: Engines
) -> None:
    """kill -9 during a replay: at the next start its hook processes are ended and its three copies
    of the workspace removed."""
    ws = tmp_path / "ws"
    hook = """#!/bin/sh
cat >/dev/null
if [ "$1" = discover ]; then echo '{"stages": ["mutate_request"]}'; exit 0; fi
case "$PWD" in
  */evolve-replay-*) echo $$ > "$EVOLVE_TEST_PIDS/replay.$$"; exec sleep 300 ;;
esac
echo '{"system": ["VERSION"]}'
"""
    write(ws / "hooks" / "h.sh", hook.replace("VERSION", "v1"))
    engine = started.start(ws)
    engine.stage("mutate_request", {"system": []}, session="ses_r")  # a recorded input
    engine.call_tool(
        "evolve_hook_write", {"hook": "h.sh", "content": hook.replace("VERSION", "v2")}, origin="operator"
    )
    engine.post("/v1/changes/HEAD/replay", {})
    running = wait_for("the replay's hooks to start", lambda: _replay_pids(started), timeout=30)
    (scratch,) = _copies(engine.pid)
    assert sorted(p.name for p in scratch.iterdir()) == ["after", "again", "before"]
    engine.kill()
    assert all(pid_alive(p) for p in running) and scratch.exists()
    started.start(ws)
    assert not any(pid_alive(p) for p in running)
    assert not scratch.exists()


def test_runs_are_tagged_with_their_workspace_and_engine(tmp_path: Path) -> None:
    """The tag prefix says whose run it is: another workspace's engine never ends it."""
    from engine.hooks.groups import run_owner

    one, two = run_owner(tmp_path / "a"), run_owner(tmp_path / "b")
    assert one.split(".")[1:] == two.split(".")[1:] == [str(os.getpid()), one.split(".")[2]]
    assert one.split(".")[0] != two.split(".")[0]


def _warm_fork(engine: EngineProcess, started: Engines) -> int:
    """Run observe_message until a run is warm (the first ones start cold while the server starts);
    the pid of the fork that warm run left."""
    for _ in range(50):
        (started.pids / "observe_message.forked").unlink(missing_ok=True)
        engine.stage("observe_message", {}, session="ses_w")
        left = wait_for("the fork to report", lambda: started.reported("observe_message.forked"))
        if b"evolve-warm-" in (started.pids / "observe_message.forked.cmdline").read_bytes():
            return left
        time.sleep(0.1)
    raise AssertionError("no run of the hook started warm")


def _replay_pids(started: Engines) -> list[int]:
    return [int(p.read_text()) for p in started.pids.glob("replay.*") if p.read_text().strip().isdigit()]


def _copies(engine_pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"evolve-replay-{engine_pid}-*"))


def _quietly(call: Callable[[], object]) -> None:
    with contextlib.suppress(httpx.HTTPError, AssertionError):  # the engine was killed under it
        call()
