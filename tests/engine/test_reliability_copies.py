"""Nothing escapes a copy (docs/reliability.md, "Nothing escapes a copy"): attacks on real engines with
real hooks and real git. A replay's or a validation's copy holds no link that leads out of it; a
hook's declared test must be a script in `tests/`; replays and validations run a bounded number at
once, the others waiting their turn without a copy."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.runtime import Engine
from tests.support.attacks import Engines, engines, write
from tests.support.environment import isolated_env
from tests.support.in_process import run_engine

pytestmark = pytest.mark.hooks


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


# ---- links in a replay's copies ---------------------------------------------------------------

# During a replay (its cwd is a copy), writes through the workspace's links: `linkdir` (an absolute
# link to a folder of the live workspace) and `outlink` (a link to a file outside the workspace).
LINK_WRITER = """#!/bin/sh
cat >/dev/null
if [ "$1" = discover ]; then echo '{"stages": ["mutate_request"]}'; exit 0; fi
case "$PWD" in
  */evolve-replay-*)
    echo "replayed" > "$OPENCODE_EVOLVE_WORKSPACE/linkdir/x.$$"
    echo "appended" >> "$OPENCODE_EVOLVE_WORKSPACE/outlink"
    ;;
esac
echo '{"system": ["VERSION"]}'
"""


def test_a_replay_writes_nothing_through_the_workspaces_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    outside = write(tmp_path / "outside.txt", "outside\n", 0o644)
    write(ws / "data" / "keep.txt", "kept\n", 0o644)
    write(ws / "hooks" / "w.sh", LINK_WRITER.replace("VERSION", "v1"))
    os.symlink(ws / "data", ws / "linkdir")  # absolute, into the live workspace
    os.symlink(outside, ws / "outlink")

    async def body(engine: Engine) -> dict[str, Any]:
        for i in range(3):
            await engine.stages.dispatch("mutate_request", {"system": []}, session=f"ses_{i}")
        assert engine.journal is not None
        await asyncio.to_thread(engine.journal.flush)
        done = await engine.tools.call(
            "evolve_hook_write",
            {"hook": "w.sh", "content": LINK_WRITER.replace("VERSION", "v2")},
            origin="operator",
        )
        assert done.error is None, done.output
        replay = await engine.replays.replay(await engine.replays.commit("HEAD"))
        await engine.commits.commit_external()  # what a hook left in the live workspace, if anything
        return {"replay": replay, "log": engine.git.log(20)}

    got = run_engine(ws, body, env=isolated_env(tmp_path / "home"))
    replay = got["replay"]
    assert replay.state == "done", replay.error
    assert replay.done == replay.total == 9
    assert sorted(p.name for p in (ws / "data").iterdir()) == ["keep.txt"]  # nothing in the live data/
    assert outside.read_text() == "outside\n"  # nothing appended outside the workspace
    assert not [c for c in got["log"] if str(c["message"]).startswith("external change")]
    assert any("outlink: a link that leads out of the workspace" in w for w in replay.warnings)
    errors = [e for s in replay.stages for c in s.comparisons for e in (*c.errors_before, *c.errors_after)]
    assert errors == []  # the link into the workspace works in the copy: the copy's data/


# ---- a hook's declared test -------------------------------------------------------------------

VICTIM = '#!/bin/sh\necho ran > "$(dirname "$0")/victim_ran"\n'
HELLO_TEST = "#!/bin/sh\necho hello test passed\n"


def declaring(test: str) -> str:
    """A hook whose discover answer names `test` as its test."""
    return (
        f"#!/bin/sh\ncat >/dev/null\nif [ \"$1\" = discover ]; then echo '{json.dumps({'test': test})}'; fi\n"
    )


@pytest.mark.parametrize(
    "test",
    [
        "../../../outside/victim_test.sh",  # hooks' form, leading out
        "tests/../../../outside/victim_test.sh",  # hcp's form, leading out
        "sh ../outside/victim_test.sh",  # a command whose script leads out
        "evil_test.sh",  # a link in tests/ to the file outside
        "{outside}/victim_test.sh",  # an absolute path
    ],
)
def test_a_test_that_leads_out_of_tests_is_refused(tmp_path: Path, started: Engines, test: str) -> None:
    """The validation's copy is made in `<tmp>/evolve-validate-*`: `../../../outside` from its
    tests/ is `<tmp>/../outside`, where the victim waits."""
    ws = tmp_path / "ws"
    temp = tmp_path / "t"
    temp.mkdir()
    outside = tmp_path / "outside"
    victim = write(outside / "victim_test.sh", VICTIM, 0o644)
    test = test.format(outside=outside)
    write(ws / "hooks" / "h.sh", declaring(test))
    write(ws / "tests" / "hello_test.sh", HELLO_TEST)
    os.symlink(victim, ws / "tests" / "evil_test.sh")
    engine = started.start(ws, TMPDIR=str(temp))
    call = engine.call_tool("evolve_hook_validate", {"hook": "h.sh", "content": "#!/bin/sh\necho {}\n"})
    assert call["output"].startswith("validation failed:"), call["output"]
    assert "leads out of tests/" in call["output"] and "refused" in call["output"]
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644  # never made executable
    assert not (outside / "victim_ran").exists()  # never run


@pytest.mark.parametrize(
    "test",
    ["hello_test.sh", "tests/hello_test.sh", "python3 tests/hello_test.py", "tests/run_test.sh --quick"],
)
def test_a_test_in_tests_runs_in_every_form(tmp_path: Path, started: Engines, test: str) -> None:
    """hooks' form (a file in tests/), and hcp's (a command relative to the workspace)."""
    ws = tmp_path / "ws"
    write(ws / "hooks" / "h.sh", declaring(test))
    write(ws / "tests" / "hello_test.sh", HELLO_TEST)
    write(ws / "tests" / "hello_test.py", "print('hello test passed')\n", 0o644)
    write(ws / "tests" / "run_test.sh", '#!/bin/sh\n[ "$1" = --quick ] && echo hello test passed\n')
    engine = started.start(ws)
    call = engine.call_tool("evolve_hook_validate", {"hook": "h.sh", "content": "#!/bin/sh\necho {}\n"})
    assert call["output"].startswith("validation passed"), call["output"]


def test_a_validations_test_writes_nothing_through_a_link_out(tmp_path: Path, started: Engines) -> None:
    ws = tmp_path / "ws"
    outside = write(tmp_path / "outside.txt", "outside\n", 0o644)
    os.symlink(outside, write(ws / "data" / "placeholder", "").parent / "out.txt")
    write(ws / "hooks" / "h.sh", declaring("t.sh"))
    write(ws / "tests" / "t.sh", '#!/bin/sh\necho appended >> "$OPENCODE_EVOLVE_WORKSPACE/data/out.txt"\n')
    engine = started.start(ws)
    call = engine.call_tool("evolve_hook_validate", {"hook": "h.sh", "content": "#!/bin/sh\necho {}\n"})
    assert call["output"].startswith("validation passed"), call["output"]
    assert outside.read_text() == "outside\n"


# ---- bounded: replays and validations wait their turn -----------------------------------------


def _copies(kind: str, pid: int) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"evolve-{kind}-{pid}-*"))


class Sampler:
    """The most copies of a kind seen at once, sampled every 10 ms in a thread."""

    def __init__(self, kind: str, pid: int) -> None:
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(kind, pid), daemon=True)
        self._thread.start()

    def _run(self, kind: str, pid: int) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, len(_copies(kind, pid)))
            time.sleep(0.01)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.most


SLOW = """#!/bin/sh
cat >/dev/null
if [ "$1" = discover ]; then echo '{"stages": ["mutate_request"]}'; exit 0; fi
case "$PWD" in */evolve-replay-*) sleep 0.3 ;; esac
echo '{"system": ["VERSION"]}'
"""


def test_replays_beyond_the_limit_wait_without_a_copy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "hooks" / "slow.sh", SLOW.replace("VERSION", "v0"))
    write(ws / "config" / "evolve.jsonc", json.dumps({"max_replays": 2}), 0o644)

    async def body(engine: Engine) -> list[Any]:
        await engine.stages.dispatch("mutate_request", {"system": []}, session="ses_1")
        assert engine.journal is not None
        await asyncio.to_thread(engine.journal.flush)
        shas = []
        for i in range(1, 6):
            done = await engine.tools.call(
                "evolve_hook_write",
                {"hook": "slow.sh", "content": SLOW.replace("VERSION", f"v{i}")},
                origin="operator",
            )
            assert done.error is None, done.output
            shas.append(engine.git.log(1)[0]["sha"])
        sampler = Sampler("replay", os.getpid())
        records = [engine.replays.start(await engine.replays.commit(sha)) for sha in shas]
        finished = [await engine.replays.wait(r.id) for r in records]
        return [sampler.stop(), finished]

    most, finished = run_engine(ws, body, env=isolated_env(tmp_path / "home"))
    assert [r.state for r in finished] == ["done"] * 5
    assert 1 <= most <= 2  # two replays (three copies each, in one directory) at once, never more
    assert not _copies("replay", os.getpid())


def test_validations_beyond_the_limit_wait_without_a_copy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "hooks" / "slow.sh", SLOW.replace('"stages"', '"test": "slow_test.sh", "stages"'))
    write(ws / "tests" / "slow_test.sh", "#!/bin/sh\nsleep 0.4\necho ok\n")
    write(ws / "config" / "evolve.jsonc", json.dumps({"max_validations": 2}), 0o644)

    async def body(engine: Engine) -> list[Any]:
        sampler = Sampler("validate", os.getpid())
        calls = [
            engine.tools.call("evolve_hook_validate", {"hook": "slow.sh", "content": SLOW}, origin="operator")
            for _ in range(5)
        ]
        done = await asyncio.gather(*calls)
        return [sampler.stop(), [c.output for c in done]]

    most, outputs = run_engine(ws, body, env=isolated_env(tmp_path / "home"))
    assert all(str(o).startswith("validation passed") for o in outputs), outputs
    assert 1 <= most <= 2


def test_copies_are_made_for_their_owner_only(tmp_path: Path) -> None:
    """A copy holds the workspace (prompts, hooks, data): its directory is 0700, as `state/` is."""
    from engine.workspace.copies import copy_workspace, new_copy_dir

    ws = tmp_path / "ws"
    write(ws / "prompts" / "chat.md", "chat\n", 0o644)
    for kind in ("validate", "replay"):
        copy = new_copy_dir(kind)
        try:
            assert stat.S_IMODE(copy.stat().st_mode) == 0o700
            assert copy.name.startswith(f"evolve-{kind}-{os.getpid()}-")
            copied = copy_workspace(ws, copy)
            assert copied.files == 1 and (copy / "prompts" / "chat.md").read_text() == "chat\n"
        finally:
            shutil.rmtree(copy)
