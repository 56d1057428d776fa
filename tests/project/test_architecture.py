"""The boundaries of the code base, checked on its import graph (every import, also those inside
functions and under TYPE_CHECKING), on what a program really loads, and on the shim's copy of the
wire contract. docs/architecture.md explains each rule."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.environment import REPO, bare_env

PROBE = """
import json, sys
from engine.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"textual", "starlette", "uvicorn"})
print(json.dumps(heavy), file=sys.stderr)
"""


def loaded_by(args: list[str], tmp_path: Path) -> list[str]:
    """The heavy packages a command line run loaded (it runs in a fresh interpreter)."""
    env = bare_env(HOME=str(tmp_path), PATH="/usr/bin:/bin", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    last = proc.stderr.strip().splitlines()[-1]
    heavy: list[str] = json.loads(last)
    return heavy


def test_import_engine_loads_neither_textual_nor_starlette() -> None:
    # A module marked missing (None: engine/__init__.py marks httpx's command-line client so) is not loaded.
    code = "import sys, engine, engine.protocol; print(sorted(m for m, v in sys.modules.items() if v is not None and m.split('.')[0] in ('textual', 'starlette', 'uvicorn', 'httpx')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["heartbeat", "status"],
        ["init", "{ws}"],
        ["tools", "--json", "--workspace", "{ws}"],
        ["stage", "discover", "--workspace", "{ws}"],
        ["doctor", "--workspace", "{ws}"],
        ["replay", "HEAD", "--workspace", "{ws}"],
        ["console", "--help"],
        ["demo", "--help"],
        ["opencode", "path"],
    ],
    ids=lambda a: " ".join(a),
)
def test_commands_load_no_server_and_no_console(args: list[str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    if "{ws}" in args and args[0] != "init":
        loaded_by(["init", str(ws)], tmp_path)
    heavy = loaded_by([a.replace("{ws}", str(ws)) for a in args], tmp_path)
    assert heavy == [], f"`evolve {' '.join(args)}` loaded {heavy}"


def test_the_model_imports_neither_textual_nor_rich() -> None:
    code = (
        "import sys, evolve_console.model\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_fast_tier_refuses_to_start_a_process(tmp_path: Path) -> None:
    """tests/unit/conftest.py makes a test that starts a process fail, naming the tiers it belongs in
    (run on a copy of that conftest, so that nothing is written into the source tree)."""
    tier = tmp_path / "unit"
    tier.mkdir()
    shutil.copy(REPO / "tests" / "unit" / "conftest.py", tier / "conftest.py")
    (tier / "test_probe.py").write_text(
        "import subprocess\n\ndef test_spawns():\n    subprocess.run(['true'])\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--basetemp",
            str(tmp_path / "base"),
            str(tier),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "started a process (subprocess)" in proc.stdout
    assert "move the test to tests/engine, tests/console or tests/project" in proc.stdout
