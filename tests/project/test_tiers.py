"""The time per tier printed after a run (tests/support/tiers.py): each tier's tests counted once,
with the time spent in them and the CPU of their processes, also when the tests run in workers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import REPO, isolated_env
from tests.support.tiers import tier_of

CASES = """
import subprocess, sys, time

def test_sleeps():
    time.sleep(0.3)

def test_computes_in_a_child():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_run_prints_each_tier_with_its_tests_time_and_cpu(tmp_path: Path, workers: list[str]) -> None:
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "test_case.py").write_text(CASES)
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.tiers", "-p", "no:cacheprovider", *workers,
         f"--basetemp={tmp_path / 'base'}", f"--rootdir={tmp_path}", str(tmp_path / "slow")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "time per tier" in proc.stdout, proc.stdout
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("slow "))
    tests, seconds, cpu = int(row[1]), float(row[2].rstrip("s")), float(row[3].rstrip("s"))
    assert tests == 2 and seconds >= 0.3 and cpu > 0, proc.stdout


def test_a_tier_is_the_folder_under_tests() -> None:
    assert tier_of("tests/engine/test_x.py::test_y[a/b]") == "tests/engine"
    assert tier_of("tests/unit/engine/test_x.py::test_y") == "tests/unit"
    assert tier_of("tier/test_case.py::test_y") == "tier"
