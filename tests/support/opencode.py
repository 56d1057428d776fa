"""opencode for the end-to-end tests and the benchmarks: the pinned version and its install, an
isolated home whose one-time plugin install is paid once per machine, and a project configuration
whose model is the mock LLM (tests/e2e/mock_llm.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.environment import REPO

OPENCODE_VERSION = "1.18.33"
INSTALL_SCRIPT = REPO / "scripts" / "install_opencode.sh"
CONFIG_SEED = REPO / ".cache" / f"opencode-{OPENCODE_VERSION}" / "config-seed"
"""A copy of opencode's config directory after its one-time install of @opencode-ai/plugin."""


def install_opencode() -> Path:
    """The opencode binary, installed into .cache/ by scripts/install_opencode.sh (with npm, unless it
    is there already). RuntimeError with the script's output when that fails."""
    proc = subprocess.run(
        [str(INSTALL_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OPENCODE_VERSION": OPENCODE_VERSION},
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"scripts/install_opencode.sh failed: exit {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    path = Path(proc.stdout.strip().splitlines()[-1])
    if not path.is_file():
        raise RuntimeError(f"scripts/install_opencode.sh printed {path}, which is not a file")
    return path


def plugin_deps_ready(config_dir: Path) -> bool:
    """Whether opencode's own install of @opencode-ai/plugin into this config dir is complete."""
    try:
        manifest = json.loads((config_dir / "node_modules/@opencode-ai/plugin/package.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(manifest.get("version") == OPENCODE_VERSION and (config_dir / "package-lock.json").is_file())


def make_home(home: Path) -> bool:
    """An isolated HOME for opencode (its XDG directories inside it). Before it loads any plugin,
    opencode installs @opencode-ai/plugin (63 MB, 5-15 s, from the npm registry) into
    $XDG_CONFIG_HOME/opencode; when CONFIG_SEED holds a complete copy, the home starts from it.
    Returns whether it did."""
    for sub in (".config", ".local/share", ".cache", ".local/state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    if not plugin_deps_ready(CONFIG_SEED):
        return False
    shutil.copytree(CONFIG_SEED, home / ".config" / "opencode", symlinks=True)
    return True


def keep_seed(home: Path) -> None:
    """When there is no CONFIG_SEED yet and opencode completed its install in `home`, keep a copy of
    it as the seed (replaced in one rename, so a concurrent session never sees half a seed)."""
    config_dir = home / ".config" / "opencode"
    if plugin_deps_ready(CONFIG_SEED) or not plugin_deps_ready(config_dir):
        return
    staging = CONFIG_SEED.with_name(f"config-seed.{os.getpid()}")
    with contextlib.suppress(OSError):
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(config_dir, staging, symlinks=True)
        shutil.rmtree(CONFIG_SEED, ignore_errors=True)
        staging.rename(CONFIG_SEED)
    shutil.rmtree(staging, ignore_errors=True)


def opencode_env(base: dict[str, str], home: Path, cwd: Path) -> dict[str, str]:
    """`base` with HOME and XDG_* in `home`, and PWD at `cwd`: opencode takes its project directory
    from $PWD, not from the real working directory."""
    env = dict(base)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        PWD=str(cwd),
    )
    return env


def mock_provider(url: str) -> dict[str, Any]:
    """An opencode.json whose model (and small model) is the mock LLM at `url`."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "name": "Mock",
                "options": {"apiKey": "test", "baseURL": url},
                "models": {"mock": {"name": "Mock"}},
            }
        },
        "model": "mock/mock",
        "small_model": "mock/mock",
    }
