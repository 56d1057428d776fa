"""scripts/bootstrap.sh on a machine whose Python cannot make a virtual environment with pip (Debian
without python3-venv), and with a .venv left without pip by such a failed attempt: it says which
package to install, and a broken .venv is made again instead of failing on every run.

The script runs in a copy of its own directory layout with PYTHON pointing at a stand-in whose
`-m venv` behaves like Debian's (or works); nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.environment import REPO

VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
NO_PIP = "#!/bin/sh\necho 'No module named pip' >&2\nexit 1\n"
WITH_PIP = '#!/bin/sh\n[ "$1 $2" = "-m pip" ] && exit 0\nexit 1\n'


def stand_in_python(tmp_path: Path, venv_python: str, venv_ok: bool) -> Path:
    """A `python3` that answers the version checks like this Python and makes a .venv whose python is
    `venv_python`; with `venv_ok` False its `-m venv` fails after that, as Debian's does."""
    script = tmp_path / "python3"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
        '  mkdir -p "$3/bin"\n'
        f"  cat > \"$3/bin/python\" <<'EOF'\n{venv_python}EOF\n"
        '  chmod +x "$3/bin/python"\n'
        + (
            "  exit 0\n"
            if venv_ok
            else "  echo 'The virtual environment was not created successfully because ensurepip is not available.'\n"
            "  exit 1\n"
        )
        + "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    script.chmod(0o755)
    return script


def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "bootstrap.sh", root / "scripts" / "bootstrap.sh")
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    return root


def bootstrap(root: Path, python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "scripts" / "bootstrap.sh")],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_python_without_venv_support_gets_the_package_to_install(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    proc = bootstrap(root, stand_in_python(tmp_path, NO_PIP, venv_ok=False))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"bootstrap: {tmp_path / 'python3'} cannot make a virtual environment with pip; install its venv "
        f"module (Debian/Ubuntu: apt-get install python{VERSION}-venv), then run this again"
    )
    assert not (root / ".venv").exists(), "a half-made .venv was left behind"


def test_a_venv_without_pip_is_made_again(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").write_text(NO_PIP)
    (root / ".venv" / "bin" / "python").chmod(0o755)
    proc = bootstrap(root, stand_in_python(tmp_path, WITH_PIP, venv_ok=True))
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stderr.strip() == "bootstrap: .venv is broken (no working python or pip in it); making it again"
    )
    assert (root / ".venv" / "bin" / "python").read_text() == WITH_PIP
    assert (root / ".venv" / ".evolve-installed").is_file()
    again = bootstrap(root, stand_in_python(tmp_path, WITH_PIP, venv_ok=True))
    assert (again.returncode, again.stderr) == (0, "")
