"""evolve gives every opencode it starts a temporary directory of its own: opencode unpacks a 5.6 MB
native library into $TMPDIR at each start (`.<hex>-00000000.so`) and makes `$TMPDIR/opencode/`, and
leaves both. Checked where evolve starts opencode: `evolve opencode install` asks the installed binary
its version (below); the demo runs `opencode serve` (tests/e2e/test_demo_signals.py); the end-to-end
tests and the benchmarks use the same environment (`opencode_setup.opencode_env`)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from evolve_demo import opencode_setup
from tests.e2e.conftest import Project
from tests.support.opencode import OPENCODE_VERSION


def test_asking_opencode_its_version_leaves_nothing_in_the_temporary_directory(
    opencode_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)  # read $TMPDIR again
    assert opencode_setup.isolated_version(opencode_bin) == OPENCODE_VERSION
    assert os.listdir(temp) == []


def test_opencode_run_plainly_leaves_its_library_in_the_temporary_directory(
    project: Project, tmp_path: Path
) -> None:
    """What the README says of an opencode started by hand, and why evolve gives its own a directory."""
    temp = tmp_path / "plain-tmp"
    temp.mkdir()
    ran = subprocess.run(
        project.run_argv(("hello",)),
        cwd=project.dir,
        env={**project.env, "TMPDIR": str(temp)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    left = {p.name: p for p in temp.iterdir()}
    libraries = [p for name, p in left.items() if re.fullmatch(r"\.[0-9a-f]{16}-00000000\.so", name)]
    assert len(libraries) == 1 and libraries[0].stat().st_size > 4_000_000, sorted(left)
    assert sorted(left) == sorted([libraries[0].name, "opencode"])
