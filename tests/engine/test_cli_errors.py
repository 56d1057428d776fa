"""Mistakes a newcomer makes get one clear line naming the problem and the fix, never a traceback, and
change nothing: git missing, a bad log level, an unknown stage (with and without a running engine), a
project or workspace directory that does not exist, options without help, and `shim install` keeping
the mode of the project's config file.

Every command runs as the real `evolve` in a subprocess, with HOME in the test's directory."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.protocol.stages import STAGES
from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env

EVOLVE = [sys.executable, "-m", "engine"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(
        tmp_path / "home", drop=("PYTHON",), PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1"
    )


def evolve(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EVOLVE, *args],
        env=env,
        cwd=cwd or REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    """stderr, which must be exactly one line and no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    return lines[0]


# ---- git missing ----------------------------------------------------------------------------------


def test_without_git_help_works_and_commands_that_need_it_say_so(env: dict[str, str], tmp_path: Path) -> None:
    """GitPython cannot be imported without the git program: `--help` must not need it, and `init`
    names the missing program and how to install it."""
    bin_dir = tmp_path / "bin"  # a PATH with Python and a shell, but no git
    bin_dir.mkdir()
    for tool in ("sh", "env"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    nogit = {**env, "PATH": str(bin_dir)}

    helped = evolve(nogit, "--help")
    assert helped.returncode == 0 and "usage: evolve" in helped.stdout, helped.stderr

    ws = tmp_path / "ws"
    init = evolve(nogit, "init", str(ws))
    assert init.returncode == 1
    assert one_line(init) == (
        "evolve init: git is not installed (or not on PATH); install it (Debian/Ubuntu: apt-get install git) "
        "and run again"
    )
    assert not ws.exists()


# ---- log level ------------------------------------------------------------------------------------


def test_a_bad_log_level_names_where_it_came_from(env: dict[str, str], tmp_path: Path) -> None:
    flag = evolve(env, "--log-level", "LOUD", "stop", "--workspace", str(tmp_path))
    assert flag.returncode == 2
    assert one_line(flag) == (
        "evolve: --log-level 'LOUD' is not a log level; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    )
    variable = evolve({**env, "EVOLVE_LOG_LEVEL": "LOUD"}, "stop", "--workspace", str(tmp_path))
    assert variable.returncode == 2
    assert one_line(variable) == (
        "evolve: EVOLVE_LOG_LEVEL 'LOUD' is not a log level; use one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
    )
    fine = evolve({**env, "EVOLVE_LOG_LEVEL": "info"}, "stop", "--workspace", str(tmp_path))
    assert fine.returncode == 1 and one_line(fine) == f"no engine runs for {tmp_path}"


# ---- unknown stage --------------------------------------------------------------------------------


def test_an_unknown_stage_lists_the_stages_with_and_without_an_engine(
    env: dict[str, str], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    assert evolve(env, "init", str(ws)).returncode == 0
    wanted = f"evolve stage: unknown stage 'mutate-request'; the stages are: {', '.join(STAGES)}"

    alone = evolve(env, "stage", "mutate-request", "--workspace", str(ws))
    assert (alone.returncode, alone.stdout) == (2, "")
    assert one_line(alone) == wanted

    engine = EngineProcess(ws, env, tmp_path / "engine.log")
    try:
        engine.start(timeout=60)
        runs_before = engine.get("/v1/runs", limit=1)["counts"]["runs"]
        served = evolve(env, "stage", "mutate-request", "--workspace", str(ws))
        assert (served.returncode, served.stdout) == (2, "")
        assert one_line(served) == wanted
        assert engine.get("/v1/runs", limit=1)["counts"]["runs"] == runs_before
    finally:
        engine.stop()


# ---- directories that do not exist ----------------------------------------------------------------


def test_shim_install_and_doctor_refuse_a_project_that_does_not_exist(
    env: dict[str, str], tmp_path: Path
) -> None:
    typo = tmp_path / "typo"
    for args in (
        ["shim", "install", "--project", str(typo)],
        ["shim", "uninstall", "--project", str(typo)],
        ["doctor", "--project", str(typo), "--workspace", str(tmp_path)],
    ):
        proc = evolve(env, *args)
        assert proc.returncode == 2, proc.stderr
        assert one_line(proc) == (
            f"evolve {args[0]}: --project {typo}: no such directory (check the path; nothing was created)"
        )
        assert not typo.exists()


def test_console_refuses_a_named_workspace_that_is_not_one(env: dict[str, str], tmp_path: Path) -> None:
    """`console --workspace TYPO` (no terminal to ask on) creates neither a workspace nor an engine."""
    for typo, where in ((tmp_path / "TYPO", "flag"), (tmp_path / "empty", "variable")):
        if where == "variable":
            typo.mkdir()
            proc = evolve({**env, "OPENCODE_EVOLVE_WORKSPACE": str(typo)}, "console")
        else:
            proc = evolve(env, "console", "--workspace", str(typo))
        assert proc.returncode == 1
        assert one_line(proc) == (
            f"evolve console: {typo} is not an evolve workspace (no hooks/ or config/); check the path, "
            f"or create it with: evolve init {typo}"
        )
        assert not typo.exists() or list(typo.iterdir()) == []


# ---- help texts -----------------------------------------------------------------------------------


# ---- shim install keeps the file's mode -----------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o664, 0o600])
def test_shim_install_keeps_the_project_configs_mode(env: dict[str, str], tmp_path: Path, mode: int) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = project / "opencode.json"
    config.write_text(json.dumps({"$schema": "https://opencode.ai/config.json"}))
    config.chmod(mode)
    proc = evolve(env, "shim", "install", "--project", str(project), "--workspace", str(tmp_path / "ws"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["changed"] is True
    assert stat.S_IMODE(config.stat().st_mode) == mode


def test_shim_install_creates_a_new_config_with_the_usual_mode(env: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    umask = os.umask(0o022)
    os.umask(umask)
    proc = evolve(env, "shim", "install", "--project", str(project), "--workspace", str(tmp_path / "ws"))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE((project / "opencode.json").stat().st_mode) == 0o666 & ~umask


# ---- npm missing ---------------------------------------------------------------------------------


def test_without_npm_the_demo_and_opencode_install_say_what_to_install(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Only what needs opencode needs npm: with opencode not installed and no npm on PATH, `evolve
    opencode install` and `evolve demo` name the missing program and stop, leaving nothing behind."""
    bin_dir = tmp_path / "bin"  # git and a shell, no npm
    bin_dir.mkdir()
    for tool in ("sh", "env", "git"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    cache = tmp_path / "cache"
    nonpm = {**env, "PATH": str(bin_dir), "EVOLVE_CACHE_DIR": str(cache), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    wanted = (
        "npm is needed to install opencode-ai@1.18.33: install Node.js with npm (Debian/Ubuntu: apt-get "
        "install npm; elsewhere: https://nodejs.org), then run this again"
    )

    install = evolve(nonpm, "opencode", "install")
    assert install.returncode == 1
    assert one_line(install) == f"evolve opencode: {wanted}"
    path = evolve(nonpm, "opencode", "path")
    assert path.returncode == 1 and "install it with: evolve opencode install" in one_line(path)

    demo = evolve(nonpm, "demo")
    assert demo.returncode == 1
    assert "Traceback" not in demo.stderr
    assert f"evolve demo: {wanted}" in demo.stderr.splitlines()
    assert list((tmp_path / "tmp").iterdir()) == [], "the demo left its directory behind"
