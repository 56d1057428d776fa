"""scripts/run.sh refuses an option that neither it nor the command it runs knows, before it installs
anything, and names the nearest one it knows (`--dmeo`: did you mean --demo?); its lists of options
are those of `evolve console` and `evolve demo`.

The script runs from a copy of scripts/ whose bootstrap.sh only notes that it ran and whose
.venv/bin/evolve prints what it was given: nothing is installed, nothing starts."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.cli.parser import build_parser
from tests.support.environment import REPO


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy2(REPO / "scripts" / "run.sh", tmp_path / "scripts" / "run.sh")
    bootstrap = tmp_path / "scripts" / "bootstrap.sh"
    bootstrap.write_text("#!/bin/sh\ntouch bootstrapped\n")
    evolve = tmp_path / ".venv" / "bin" / "evolve"
    evolve.parent.mkdir(parents=True)
    evolve.write_text('#!/bin/sh\necho "evolve $*"\n')
    for script in (bootstrap, evolve):
        script.chmod(0o755)
    return tmp_path


def run(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(checkout / "scripts" / "run.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=checkout,
    )


@pytest.mark.parametrize(
    ("args", "unknown", "nearest"),
    [
        (["--dmeo"], "--dmeo", "--demo"),
        (["--workspace", "/tmp/ws", "--no-bel"], "--no-bel", "--no-bell"),
        (["--wrkspace=/tmp/ws"], "--wrkspace", "--workspace"),
        (["--demo", "--dri", "/tmp/d"], "--dri", "--dir"),
        (["--demo", "--heartbeat", "100"], "--heartbeat", "--heartbeat-ms"),
    ],
)
def test_an_unknown_option_gets_the_nearest_one_and_nothing_is_installed(
    checkout: Path, args: list[str], unknown: str, nearest: str
) -> None:
    proc = run(checkout, *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"run.sh: unknown option {unknown}; did you mean {nearest}? (it knows: "), (
        proc.stderr
    )
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert not (checkout / "bootstrapped").exists()


def test_an_option_like_none_is_refused_without_a_guess(checkout: Path) -> None:
    proc = run(checkout, "--zzzzzz")
    assert proc.returncode == 2 and proc.stderr.startswith("run.sh: unknown option --zzzzzz (it knows: ")


def test_known_options_go_to_the_console_or_the_demo(checkout: Path) -> None:
    assert (
        run(checkout, "--workspace", "/tmp/ws", "--no-bell").stdout
        == "evolve console --workspace /tmp/ws --no-bell\n"
    )
    assert run(checkout, "--demo", "--dir=/tmp/d").stdout == "evolve demo --dir=/tmp/d\n"
    assert (checkout / "bootstrapped").exists()
    late = run(checkout, "--no-bell", "--demo")
    assert late.returncode == 2 and "--demo comes first" in late.stderr


def options_of(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {o for action in sub.choices[command]._actions for o in action.option_strings}


def test_the_scripts_lists_are_the_commands_options() -> None:
    text = (REPO / "scripts" / "run.sh").read_text()
    listed = {
        name: set(re.search(rf'{name}="([^"]*)"', text)[1].split())
        for name in ("CONSOLE_OPTIONS", "DEMO_OPTIONS")
    }  # type: ignore[index]
    assert listed["CONSOLE_OPTIONS"] - {"--demo"} == options_of("console")
    assert listed["DEMO_OPTIONS"] == options_of("demo")
