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


def inner_pytest(tmp_path: Path, cases: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    """pytest with `options`, in a process of its own, on the modules `cases` (file name under
    tmp_path/cases/ -> its text); the tiers' folder is `cases`."""
    (tmp_path / "cases").mkdir()
    for name, text in cases.items():
        (tmp_path / "cases" / name).write_text(text)
    env = isolated_env(tmp_path / "home", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options,
         f"--basetemp={tmp_path / 'base'}", f"--rootdir={tmp_path}", str(tmp_path / "cases")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_run_prints_each_tier_with_its_tests_time_and_cpu(tmp_path: Path, workers: list[str]) -> None:
    proc = inner_pytest(tmp_path, {"test_case.py": CASES}, "-q", "-p", "tests.support.tiers", *workers)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "time per tier" in proc.stdout, proc.stdout
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("cases "))
    tests, seconds, cpu = int(row[1]), float(row[2].rstrip("s")), float(row[3].rstrip("s"))
    assert tests == 2 and seconds >= 0.3 and cpu > 0, proc.stdout


def test_a_tier_is_the_folder_under_tests() -> None:
    assert tier_of("tests/engine/test_x.py::test_y[a/b]") == "tests/engine"
    assert tier_of("tests/unit/engine/test_x.py::test_y") == "tests/unit"
    assert tier_of("tier/test_case.py::test_y") == "tier"


GROUPED = """
import os, pytest

pytestmark = pytest.mark.xdist_group("costly")

@pytest.mark.parametrize("i", range(6))
def test_in_the_group(i):
    print(os.environ["PYTEST_XDIST_WORKER"])
"""

ALONE = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    pass
"""


def test_the_tests_of_an_xdist_group_run_in_one_worker(tmp_path: Path) -> None:
    """Under `--dist loadgroup` (scripts/test.sh), tests/support/groups.py keeps a group in one worker,
    so that a module's costly fixture is built once."""
    proc = inner_pytest(
        tmp_path,
        {"test_grouped.py": GROUPED, "test_alone.py": ALONE},
        *("-v", "-p", "tests.support.groups", "-n", "3", "--dist", "loadgroup"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    grouped = [line for line in proc.stdout.splitlines() if "PASSED" in line and "test_in_the_group" in line]
    assert len(grouped) == 6, proc.stdout
    assert len({line.split()[0] for line in grouped}) == 1, "\n".join(grouped)  # [gwN]: one worker
    alone = [line for line in proc.stdout.splitlines() if "PASSED" in line and "test_alone" in line]
    assert len({line.split()[0] for line in alone}) > 1, proc.stdout  # the others are spread
