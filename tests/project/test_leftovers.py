"""The check after the suite (tests/support/leftovers.py): a run whose tests leave a file in HOME or
in the temporary directory fails, naming each; a run that leaves nothing passes; npm's and pip's
caches are theirs. Each case is a pytest run of its own, with its own HOME."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.environment import REPO, isolated_env

LEAVES = """
import os, subprocess, tempfile
from pathlib import Path

def test_leaves_a_temporary_file():
    tempfile.mkstemp(prefix="forgotten-")

def test_a_process_leaves_a_directory():
    subprocess.run(["mktemp", "-d"], check=True)

def test_leaves_a_file_in_home():
    (Path.home() / ".some_history").write_text("x")
"""

TIDY = """
import os, shutil, tempfile
from pathlib import Path

def test_cleans_up(tmp_path):
    fd, name = tempfile.mkstemp()
    os.close(fd)
    os.remove(name)
    (Path.home() / ".npm" / "_cacache").mkdir(parents=True)  # npm's own cache
    (Path.home() / ".cache" / "pip").mkdir(parents=True)
    assert os.environ["TMPDIR"] == tempfile.gettempdir() != "/tmp"
"""


def run(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_case.py").write_text(source)
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    env.pop("TMPDIR", None)
    # On CI (the variable CI set) pytest repeats each message whole in its short summary.
    for ci in ("CI", "BUILD_NUMBER"):
        env.pop(ci, None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.leftovers", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'base'}", f"--rootdir={tmp_path}", str(tmp_path / "test_case.py")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip


def test_a_run_that_leaves_files_fails_naming_each(tmp_path: Path) -> None:
    proc = run(tmp_path, LEAVES)
    assert proc.returncode == 1, proc.stdout
    assert "3 passed, 1 error" in proc.stdout, proc.stdout
    temp = tmp_path / "base" / "TMPDIR"
    named = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("in ")]
    assert "in HOME: ~/.some_history" in named, proc.stdout
    left = sorted(
        {line.removeprefix("in the temporary directory: ") for line in named if "temporary" in line}
    )
    assert len(left) == 2 and all(Path(p).parent == temp for p in left), proc.stdout
    assert sorted(os.listdir(temp)) == sorted(Path(p).name for p in left)
    assert any(Path(p).name.startswith("forgotten-") for p in left)


def test_a_tidy_run_passes(tmp_path: Path) -> None:
    proc = run(tmp_path, TIDY)
    assert proc.returncode == 0, proc.stdout
    assert "left files behind" not in proc.stdout


def test_this_suite_gives_its_tests_a_temporary_directory_of_its_own(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    own = tmp_path_factory.getbasetemp() / "TMPDIR"
    assert os.environ["TMPDIR"] == tempfile.gettempdir() == str(own) and own.is_dir()
