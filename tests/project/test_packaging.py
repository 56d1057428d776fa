"""evolve as a user installs it: a wheel built from this tree, installed (not editable) into a fresh
virtual environment, and the installed `evolve` run from there, outside the repository.

The wheel must carry what the code loads beside itself at run time: the console's stylesheet, the
opencode plugin (the repository's shim/, installed as the package `evolve_shim`) and the example
workspace that `evolve init` copies, hidden files included. A file that loses its mode bits on the
way (package data does) must still come out of `evolve init` executable.

The build and runtime requirements come as pip finds them: from its own cache, the configured package
index and find-links; nothing is kept in the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.support.environment import REPO, isolated_env

# One worker builds the wheel and the venv (a minute) and runs every test of this module on them.
pytestmark = [pytest.mark.packaging, pytest.mark.xdist_group("packaging")]

CONSOLE_START = """
import asyncio, sys
import evolve_console
from evolve_console.app import EvolveConsole
from evolve_console.client import Target

async def main() -> None:
    app = EvolveConsole(Target("http://127.0.0.1:9", "token", sys.argv[1]))
    async with app.run_test() as pilot:
        await pilot.pause()

asyncio.run(main())
print(evolve_console.__file__)
"""


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def pip_ok(*args: str) -> None:
    """`pip ARGS`; a failure shows pip's output."""
    done = pip(*args)
    assert done.returncode == 0, f"pip {' '.join(args)}:\n{done.stdout}\n{done.stderr}"


def copy_tree(dest: Path) -> None:
    """The files of this checkout as they are (tracked and new, nothing git ignores), so that no
    build/ or egg-info left from another build can slip into the wheel."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        if (REPO / rel).is_file():  # not one deleted since the last commit
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)


@dataclass
class Installed:
    wheel: Path
    venv: Path
    home: Path
    env: dict[str, str]

    def evolve(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The installed `evolve ARGS`, run in a temporary directory with nothing of the checkout on
        the path."""
        proc = subprocess.run(
            [str(self.venv / "bin" / "evolve"), *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"evolve {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
        return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    copy_tree(src)
    pip_ok("wheel", "--quiet", "--no-deps", "--wheel-dir", str(base / "dist"), str(src))
    (wheel,) = (base / "dist").glob("evolve-*.whl")
    venv.create(base / "venv", with_pip=False)
    python = str(base / "venv" / "bin" / "python")
    pip_ok("--python", python, "install", "--quiet", str(wheel))
    # No PYTHON* variables: nothing of the checkout is importable, only what the wheel installed.
    env = isolated_env(base / "home", drop=("PYTHON",))
    return Installed(wheel, base / "venv", base / "home", env)


@pytest.fixture(scope="module")
def workspace(installed: Installed) -> Path:
    ws = installed.home / "ws"
    installed.evolve("init", str(ws))
    return ws


def test_the_wheel_carries_every_package_the_stylesheet_the_plugin_and_the_example(
    installed: Installed,
) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    missing_data = {"evolve_console/console.tcss", "evolve_shim/evolve.js"} - names
    assert not missing_data, f"not in the wheel: {missing_data}"
    example = REPO / "engine" / "example"
    files = [p for p in example.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    missing = [p for p in files if p.relative_to(REPO).as_posix() not in names]
    assert files and not missing, f"example files not in the wheel: {missing}"
    # pyproject.toml lists the packages by name: a new subpackage must be listed there too.
    packages = [
        p.parent for d in ("engine", "evolve_console", "evolve_demo") for p in (REPO / d).rglob("__init__.py")
    ]
    unlisted = [p for p in packages if (p / "__init__.py").relative_to(REPO).as_posix() not in names]
    assert not unlisted, f"packages missing from the wheel (add them to pyproject.toml): {unlisted}"


def test_installed_evolve_starts_and_inits_a_workspace_whose_hook_is_discovered(
    installed: Installed, workspace: Path
) -> None:
    assert "usage: evolve" in installed.evolve("--help").stdout
    for rel in ("hooks/notes.py", "tests/notes_test.py"):
        assert os.access(workspace / rel, os.X_OK), f"{rel} of `evolve init` is not executable"
    tools = json.loads(installed.evolve("tools", "--json", "--workspace", str(workspace)).stdout)
    assert "notes_add" in [t["name"] for t in tools]


def test_installed_shim_install_points_at_the_installed_plugin(installed: Installed, workspace: Path) -> None:
    project = installed.home / "project"
    project.mkdir()
    installed.evolve("shim", "install", "--project", str(project), "--workspace", str(workspace))
    (entry,) = json.loads((project / "opencode.json").read_text())["plugin"]
    url = urlparse(entry[0])
    plugin = Path(unquote(url.path))
    assert url.scheme == "file" and plugin.is_file(), entry
    assert plugin.is_relative_to(installed.venv), f"{plugin} is not the installed plugin"
    assert plugin.read_bytes() == (REPO / "shim" / "evolve.js").read_bytes()


def test_installed_console_starts_with_its_stylesheet(installed: Installed, workspace: Path) -> None:
    proc = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", CONSOLE_START, str(workspace)],
        cwd=installed.home,
        env=installed.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).is_relative_to(installed.venv), proc.stdout
