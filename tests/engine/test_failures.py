"""Failures name their cause: when a hook starts failing at a stage, the engine says the error's own
last line and the change that most likely caused it (origin, age, session), publishes it, puts it on
the failed run, on the heartbeat's tick and status and on the change, and clears it when the hook
runs fine again; after a restart it finds the failures still under way in the journal.

Real workspaces (the example one, made by `evolve init`, and small ones of these tests), real git,
real hooks and their tests; opencode is replaced only where a heartbeat tick sends its message."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.protocol.events import Event
from engine.protocol.records import Failure
from engine.runtime import Engine
from tests.support.heartbeat_opencode import QuietOpencode

pytestmark = pytest.mark.hooks

MODEL = {"providerID": "prov", "modelID": "mod"}
SAID = {"text": "The heartbeat should say how many notes there are more simply.", "reasoning": ""}
# Passes the hook's test (which does not run the heartbeat stage) and breaks the heartbeat.
BREAKS_THE_HEARTBEAT = {
    "hook": "notes.py",
    "oldString": "count = f\"You have {len(notes)} note{'' if len(notes) == 1 else 's'}.\"",
    "newString": 'count = "You have " + len(notes) + " notes."',
}
TYPE_ERROR = 'TypeError: can only concatenate str (not "int") to str'


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "engine", "init", str(root)], check=True, capture_output=True)
    return root


class Seen:
    """The events an engine published, kept from its start."""

    def __init__(self, engine: Engine) -> None:
        self.events: list[Event] = []
        engine.bus.listen(self.events.append)

    def failures(self, state: str | None = None) -> list[Failure]:
        found = [Failure.from_dict(e.data) for e in self.events if e.kind == "failure"]
        return [f for f in found if state is None or f.state == state]


def with_engine(ws: Path, body: Callable[[Engine, Seen, QuietOpencode], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVOLVE_")}
        opencode = QuietOpencode()
        engine = Engine(ws, env={**env, "EVOLVE_MODEL": "prov/mod"}, opencode=opencode)
        seen = Seen(engine)
        await engine.start()
        try:
            return await asyncio.wait_for(body(engine, seen, opencode), 120)
        finally:
            await engine.close()

    return asyncio.run(main())


async def until(what: str, probe: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not probe():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_a_hook_edit_that_passes_its_test_and_breaks_the_heartbeat_is_named_and_reverting_it_heals(
    ws: Path,
) -> None:
    async def body(engine: Engine, seen: Seen, opencode: QuietOpencode) -> None:
        first = await engine.heartbeat.fire()
        assert (first.outcome, first.prompt, first.failures) == ("ok", "hooks", [])
        engine.sessions.update("ses_err", title="Errands")
        edit = await engine.tools.call(
            "evolve_hook_edit", BREAKS_THE_HEARTBEAT, session="ses_err", call_id="c1", context=SAID
        )
        assert edit.error is None and edit.commit, edit.output
        assert edit.validation is not None and edit.validation.ok, "the edit passes its test"

        tick = await engine.heartbeat.fire()
        assert tick.outcome == "degraded"
        assert tick.prompt == "prompts/recover.md"
        [failure] = tick.failures
        assert (failure.hook, failure.stage, failure.error) == ("notes.py", "heartbeat", TYPE_ERROR)
        assert failure.exit == "exit 1" and failure.where is not None
        assert failure.where.startswith("hooks/notes.py:")
        suspect = failure.suspect
        assert suspect is not None and suspect.sha == edit.commit
        assert (suspect.origin, suspect.session, suspect.session_title) == ("agent", "ses_err", "Errands")
        assert suspect.files == ["hooks/notes.py"] and "the hook itself" in suspect.because
        assert failure.cause.startswith(f"since {edit.commit[:7]}, agent, ")
        assert failure.cause.endswith('before the first failure, session "Errands"')
        assert failure.fallback is not None and "recover defaults" in failure.fallback
        assert tick.reason == (
            f"hooks/notes.py failed at heartbeat: {TYPE_ERROR}; the message came from "
            f"prompts/recover.md (the recover defaults) ({failure.cause})"
        )
        assert opencode.sent[-1][1].startswith("[heartbeat] One of your hooks failed")
        status = engine.heartbeat.status()
        assert status.last is not None and status.last.outcome == "degraded"
        assert status.degraded == tick.reason

        # published once, with what the alert needs: the message, the change to open and revert
        [started] = seen.failures("started")
        assert started.id == failure.id and started.suspect is not None
        assert (
            started.message == f"hooks/notes.py started failing at heartbeat: {TYPE_ERROR} ({failure.cause})"
        )
        # on the change that caused it, and on the failed run
        change = next(c for c in engine.changes.history(10) if c.sha == edit.commit)
        assert [(f.hook, f.stage, f.runs) for f in change.failing] == [("notes.py", "heartbeat", 1)]
        assert engine.journal is not None
        engine.journal.flush()
        [run] = engine.journal.runs(hook="notes.py", stage="heartbeat", failed=True)
        found = await engine.failures.of_run(run)
        assert found is not None and found.id == failure.id
        assert found.suspect is not None and found.suspect.sha == edit.commit

        again = await engine.heartbeat.fire()
        assert again.outcome == "degraded"
        assert seen.failures("failing")[-1].runs == 2
        change = next(c for c in engine.changes.history(10) if c.sha == edit.commit)
        assert [f.runs for f in change.failing] == [2], "failing since: 2 runs"

        reverted = await engine.changes.revert(edit.commit)
        healed = await engine.heartbeat.fire()
        assert (healed.outcome, healed.prompt, healed.reason) == ("ok", "hooks", None)
        [cleared] = seen.failures("cleared")
        assert cleared.id == failure.id and cleared.cleared_by is not None
        assert engine.failures.active() == []
        assert engine.heartbeat.status().degraded is None
        assert all(c.failing == [] for c in engine.changes.history(10)), reverted
        # the heartbeat session shows the model its ticks used
        session = engine.sessions.find(str(healed.session))
        assert session is not None and session.model == MODEL
        # the history tells the truth too
        history = await asyncio.to_thread(engine.heartbeat.ticks, 10)
        assert [t.outcome for t in history] == ["ok", "degraded", "degraded", "ok"]
        assert history[1].failures[0].suspect is not None

    with_engine(ws, body)


# A hook that fails at mutate_request when data/flag.txt says so, naming the file; or when a file
# outside the workspace ($FAIL_WHEN) exists, which no change of the workspace explains.
FLAG_HOOK = (
    f"#!{sys.executable}\n"
    + """import json, os, sys
stage = sys.argv[1]
json.load(sys.stdin)
if stage == "discover":
    print(json.dumps({"name": "flag", "stages": ["mutate_request"]}))
    sys.exit(0)
if os.path.exists(os.environ["FAIL_WHEN"]):
    raise RuntimeError("told to fail")
with open("data/flag.txt") as f:
    if f.read().strip() == "bad":
        raise ValueError("data/flag.txt says bad")
print(json.dumps({"system": ["fine"]}))
"""
)


def flag_workspace(tmp_path: Path) -> Path:
    root = tmp_path / "flag"
    for part in ("hooks", "prompts", "config", "data"):
        (root / part).mkdir(parents=True)
    hook = root / "hooks" / "flag.py"
    hook.write_text(FLAG_HOOK, encoding="utf-8")
    hook.chmod(0o755)
    (root / "data" / "flag.txt").write_text("good\n", encoding="utf-8")
    (root / "config" / "evolve.jsonc").write_text("{}\n", encoding="utf-8")
    return root


def flag_engine(root: Path, tmp_path: Path) -> Engine:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOLVE_")}
    return Engine(root, env={**env, "FAIL_WHEN": str(tmp_path / "fail-now")})


async def request(engine: Engine) -> None:
    await engine.stages.dispatch("mutate_request", {"session": {"id": "s"}, "system": []}, session="s")


def test_a_file_the_error_names_is_suspected_and_a_failure_no_change_explains_says_so(tmp_path: Path) -> None:
    root = flag_workspace(tmp_path)

    async def main() -> None:
        engine = flag_engine(root, tmp_path)
        seen = Seen(engine)
        await engine.start()
        try:
            await request(engine)  # runs fine
            (root / "data" / "flag.txt").write_text("bad\n", encoding="utf-8")
            external = await engine.commits.commit_external()  # a person's edit
            assert external is not None
            await request(engine)
            await until("the failure", lambda: seen.failures("started"))
            [named] = seen.failures("started")
            assert named.error == "ValueError: data/flag.txt says bad"
            assert named.suspect is not None and named.suspect.sha == external.sha
            assert named.suspect.origin == "external" and named.suspect.files == ["data/flag.txt"]
            assert named.suspect.because == "it changed data/flag.txt, a file its error names"

            (root / "data" / "flag.txt").write_text("good\n", encoding="utf-8")
            await engine.commits.commit_external()
            await request(engine)
            await until("it clears", lambda: seen.failures("cleared"))

            (tmp_path / "fail-now").write_text("", encoding="utf-8")  # outside the workspace
            await request(engine)
            await until("the second failure", lambda: len(seen.failures("started")) == 2)
            unexplained = seen.failures("started")[-1]
            assert unexplained.error == "RuntimeError: told to fail"
            assert unexplained.suspect is None and unexplained.recurs
            assert unexplained.cause.startswith("no change explains it: nothing it depends on")
            assert "since it last ran fine at mutate_request" in unexplained.cause
        finally:
            await engine.close()

    asyncio.run(asyncio.wait_for(main(), 120))


def test_a_restarted_engine_finds_the_hooks_still_failing_and_rebuilds_an_old_failure(tmp_path: Path) -> None:
    root = flag_workspace(tmp_path)

    async def fail_twice() -> str:
        engine = flag_engine(root, tmp_path)
        await engine.start()
        try:
            await request(engine)
            (root / "data" / "flag.txt").write_text("bad\n", encoding="utf-8")
            external = await engine.commits.commit_external()
            assert external is not None
            await request(engine)
            await request(engine)
            return external.sha
        finally:
            await engine.close()

    async def restarted(sha: str) -> None:
        engine = flag_engine(root, tmp_path)
        seen = Seen(engine)
        await engine.start()
        try:
            await until("the failure found again", lambda: engine.failures.active())
            [failure] = engine.failures.active()
            assert (failure.hook, failure.stage, failure.runs) == ("flag.py", "mutate_request", 2)
            assert failure.error == "ValueError: data/flag.txt says bad"
            assert failure.suspect is not None and failure.suspect.sha == sha
            assert [f.id for f in seen.failures("started")] == [failure.id]
            change = next(c for c in engine.changes.history(10) if c.sha == sha)
            assert [f.runs for f in change.failing] == [2]

            (root / "data" / "flag.txt").write_text("good\n", encoding="utf-8")
            await engine.commits.commit_external()
            await request(engine)
            assert engine.failures.active() == []
            assert engine.journal is not None
            engine.journal.flush()
            oldest = engine.journal.runs(hook="flag.py", failed=True)[-1]
            engine.failures._cleared.clear()  # as long after: rebuilt from the journal alone
            rebuilt = await engine.failures.of_run(oldest)
            assert rebuilt is not None and rebuilt.state == "cleared" and rebuilt.runs == 1
            assert rebuilt.suspect is not None and rebuilt.suspect.sha == sha
            assert rebuilt.message.startswith("hooks/flag.py started failing at mutate_request: ValueError")
        finally:
            await engine.close()

    sha = asyncio.run(fail_twice())
    asyncio.run(asyncio.wait_for(restarted(sha), 120))
