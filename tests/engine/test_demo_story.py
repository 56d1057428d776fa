"""The demo's scripted agent (evolve_demo/story.py) against the example workspace it plays in, and the
scripted model server answering over real HTTP.

- The story's edits match the example's files, so a change to the example cannot silently break the
  demo: the rejected hook edit really fails the example's test, the bad one really passes it and
  really changes what the heartbeat stage sends.
- The story reads the requests: tool results decide its next answer, the heartbeat's system prompt
  decides whether it forgets notes, and the bad edit is announced once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evolve_demo import story
from tests.support.environment import REPO, isolated_env

# ---- the story and the example workspace ---------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    env = isolated_env(tmp_path / "home", drop=("PYTHON",), PYTHONPATH=str(REPO))
    ws = tmp_path / "ws"
    subprocess.run(
        [sys.executable, "-m", "engine", "init", str(ws)], env=env, check=True, capture_output=True
    )
    return ws, env


def evolve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_the_rejected_edit_fails_the_hooks_test_and_the_bad_one_passes_and_takes_effect(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    ws, env = workspace
    rejected = {"hook": "notes.py", "oldString": story.REJECTED_OLD, "newString": story.REJECTED_NEW}
    proc = evolve(env, "call", "evolve_hook_edit", "--workspace", str(ws), "--args", json.dumps(rejected))
    assert proc.returncode == 1
    assert proc.stdout.startswith("validation failed:") and "tool 'list' is missing" in proc.stdout

    bad = {"hook": "notes.py", "oldString": story.BAD_OLD, "newString": story.BAD_NEW}
    proc = evolve(env, "call", "evolve_hook_edit", "--workspace", str(ws), "--args", json.dumps(bad))
    assert (proc.returncode, proc.stdout.strip()) == (0, "successfully edited notes.py"), proc.stderr

    proc = evolve(env, "stage", "heartbeat", "--workspace", str(ws), "--input", "{}")
    (system,) = json.loads(proc.stdout)["system"]
    assert story.BAD_RULE in system


def test_the_keep_edit_puts_its_rule_in_every_new_chat_sessions_system_prompt(
    workspace: tuple[Path, dict[str, str]],
) -> None:
    ws, env = workspace
    keep = {"prompt": "chat.md", "oldString": story.KEEP_OLD, "newString": story.KEEP_NEW}
    proc = evolve(env, "call", "evolve_prompt_edit", "--workspace", str(ws), "--args", json.dumps(keep))
    assert (proc.returncode, proc.stdout.strip()) == (0, "successfully edited chat.md"), proc.stderr
    context = json.dumps({"session": {"id": "ses_new"}, "system": ["opencode's own"]})
    proc = evolve(env, "stage", "mutate_request", "--workspace", str(ws), "--input", context)
    (system,) = json.loads(proc.stdout)["system"]
    assert story.KEEP_RULE in system


# ---- the story reads the requests ------------------------------------------------------------------


# ---- the scripted model over HTTP ---------------------------------------------------------------------
