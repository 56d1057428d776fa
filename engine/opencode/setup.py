"""opencode as evolve runs it: the pinned release, its install with npm into evolve's cache, an isolated
home for it (with the plugin dependencies it installs on first use, kept as a seed) and the provider
configuration of a local model server. The engine's behaviour checks (engine/evals/) start opencode
with it; the demo, the end-to-end tests and the benchmarks too (through `evolve_demo.opencode_setup`).

The shim is written and tested against exactly OPENCODE_VERSION. npm installs the `opencode-ai` package
without running its postinstall, so its `bin/` wrapper does not work; the real binary is the platform
package npm installs beside it as an optional dependency (opencode-linux-x64 on x86_64, ...).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

OPENCODE_VERSION = "1.18.33"
CACHE_VARIABLE = "EVOLVE_CACHE_DIR"
PLATFORMS = {
    ("Linux", "x86_64"): "linux-x64",
    ("Linux", "amd64"): "linux-x64",
    ("Linux", "aarch64"): "linux-arm64",
    ("Linux", "arm64"): "linux-arm64",
    ("Darwin", "x86_64"): "darwin-x64",
    ("Darwin", "arm64"): "darwin-arm64",
}


class SetupError(RuntimeError):
    """opencode cannot be installed or prepared; the message names the cause and the fix."""


def source_checkout() -> Path | None:
    """The repository this package runs from, when it runs from a checkout (not an installed wheel)."""
    root = Path(__file__).resolve().parents[2]  # engine/opencode/ -> the checkout
    if (root / "pyproject.toml").is_file() and (root / "scripts" / "install_opencode.sh").is_file():
        return root
    return None


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where evolve keeps what it downloads: $EVOLVE_CACHE_DIR; else `.cache/` of the source checkout it
    runs from; else $XDG_CACHE_HOME/evolve (~/.cache/evolve)."""
    env = os.environ if env is None else env
    if env.get(CACHE_VARIABLE):
        return Path(env[CACHE_VARIABLE]).expanduser()
    checkout = source_checkout()
    if checkout is not None:
        return checkout / ".cache"
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "evolve"


def install_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where npm installs opencode-ai@OPENCODE_VERSION."""
    return cache_dir(env) / f"opencode-{OPENCODE_VERSION}"


def seed_dir(env: Mapping[str, str] | None = None) -> Path:
    """A copy of opencode's config directory once it has installed its plugin dependencies
    (@opencode-ai/plugin, 63 MB): each new isolated home starts from it, so that opencode needs
    neither the network nor 5-15 s for that install again."""
    return install_dir(env) / "config-seed"


def platform_package() -> str:
    key = (platform.system(), platform.machine())
    if key not in PLATFORMS:
        raise SetupError(f"no opencode build is known for {key[0]} {key[1]}")
    return f"opencode-{PLATFORMS[key]}"


def binary_path(env: Mapping[str, str] | None = None) -> Path:
    return install_dir(env) / "node_modules" / platform_package() / "bin" / "opencode"


def _installed(binary: Path) -> bool:
    """The package's manifest says the pinned version (cheaper than `opencode --version`, ~1 s)."""
    try:
        manifest = json.loads((binary.parent.parent / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return os.access(binary, os.X_OK) and manifest.get("version") == OPENCODE_VERSION


def installed_binary(env: Mapping[str, str] | None = None) -> Path | None:
    """The installed opencode binary, or None when it is not (or not the pinned version)."""
    binary = binary_path(env)
    return binary if _installed(binary) else None


def _say(progress: Callable[[str], None] | None, text: str) -> None:
    if progress is not None:
        progress(text)


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError(
            f"npm is needed to install opencode-ai@{OPENCODE_VERSION}: install Node.js with npm "
            "(Debian/Ubuntu: apt-get install npm; elsewhere: https://nodejs.org), then run this again"
        )
    return npm


@contextlib.contextmanager
def _locked(directory: Path) -> Any:
    """Several processes (test sessions, a demo) may install at once: one does, the others wait."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run_npm(args: list[str], cwd: Path, quiet: bool) -> None:
    proc = subprocess.run(
        [_npm(), *args, "--no-audit", "--no-fund", "--update-notifier=false", "--loglevel=error"],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else None,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        detail = (proc.stderr or "").strip().splitlines()[-5:] if quiet else []
        raise SetupError(
            f"npm {' '.join(args)} failed (exit {proc.returncode}) in {cwd}"
            + ("".join(f"\n  {line}" for line in detail) if detail else "")
        )


def isolated_version(binary: Path) -> str:
    """`opencode --version`, run with a throwaway HOME and TMPDIR: opencode creates its directories
    there on any start, and must leave none in the user's home or the system temp directory."""
    with tempfile.TemporaryDirectory(prefix="evolve-opencode-") as scratch:
        home = Path(scratch)
        env = opencode_env(dict(os.environ), home, home)
        make_dirs(home)
        proc = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=120, env=env, cwd=home
        )
    return proc.stdout.strip()


def install(progress: Callable[[str], None] | None = None, quiet: bool = False) -> Path:
    """The opencode binary of OPENCODE_VERSION, installed with npm into install_dir() unless it is
    there already. SetupError when npm is missing or the install fails."""
    binary = binary_path()
    if _installed(binary):
        return binary
    _npm()  # before anything is created or announced
    base = install_dir()
    with _locked(base):
        if not _installed(binary):
            _say(progress, f"installing opencode-ai@{OPENCODE_VERSION} into {base} (npm, about 350 MB)")
            # --ignore-scripts: the postinstall of opencode-ai only sets up its bin/ wrapper (not used)
            # and creates opencode's directories in the user's HOME.
            _run_npm(
                ["install", "--ignore-scripts", "--prefix", str(base), f"opencode-ai@{OPENCODE_VERSION}"],
                base,
                quiet,
            )
            if not _installed(binary) or isolated_version(binary) != OPENCODE_VERSION:
                raise SetupError(
                    f"{binary} is missing, broken or not version {OPENCODE_VERSION} after npm install"
                )
    return binary


def plugin_deps_ready(config_dir: Path) -> bool:
    """Whether opencode's install of @opencode-ai/plugin into this config directory is complete."""
    try:
        manifest = json.loads((config_dir / "node_modules/@opencode-ai/plugin/package.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(manifest.get("version") == OPENCODE_VERSION and (config_dir / "package-lock.json").is_file())


def prepare_seed(progress: Callable[[str], None] | None = None, quiet: bool = False) -> Path:
    """The config seed, made with npm when there is none: the same package.json opencode writes
    (`{"dependencies": {"@opencode-ai/plugin": VERSION}}`), installed without scripts, as opencode does.
    Made in a staging directory and renamed into place, so nobody ever sees half a seed."""
    seed = seed_dir()
    if plugin_deps_ready(seed):
        return seed
    _npm()
    with _locked(seed.parent):
        if plugin_deps_ready(seed):
            return seed
        _say(progress, f"installing opencode's plugin dependencies into {seed} (npm, 63 MB)")
        staging = seed.with_name(f"config-seed.{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            (staging / "package.json").write_text(
                json.dumps({"dependencies": {"@opencode-ai/plugin": OPENCODE_VERSION}}, indent=2) + "\n"
            )
            (staging / ".gitignore").write_text(
                "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"
            )
            _run_npm(["install", "--ignore-scripts"], staging, quiet)
            if not plugin_deps_ready(staging):
                raise SetupError(f"npm did not install @opencode-ai/plugin@{OPENCODE_VERSION} into {staging}")
            shutil.rmtree(seed, ignore_errors=True)
            staging.rename(seed)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return seed


def make_dirs(home: Path) -> None:
    for sub in (".config", ".local/share", ".cache", ".local/state", ".tmp"):
        (home / sub).mkdir(parents=True, exist_ok=True)


def make_home(home: Path, share_deps: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """An isolated HOME for opencode (its XDG directories and its TMPDIR inside it). Before it loads
    any plugin, opencode installs @opencode-ai/plugin into $XDG_CONFIG_HOME/opencode; when the seed is
    complete, the home starts from a copy of it. Returns whether it did.

    `share_deps`: the seed's `node_modules` (63 MB) is linked, not copied: opencode only reads it when
    its version is the seed's, and a home made for a few seconds (a behaviour check's) then costs
    milliseconds instead of a copy (one to ten seconds on a busy disk)."""
    make_dirs(home)
    seed = seed_dir(env)
    target = home / ".config" / "opencode"
    if not plugin_deps_ready(seed) or target.exists():
        return False
    if not share_deps:
        shutil.copytree(seed, target, symlinks=True)
        return True
    target.mkdir(parents=True)
    for entry in seed.iterdir():
        if entry.name == "node_modules":
            (target / entry.name).symlink_to(entry.resolve(), target_is_directory=True)
        elif entry.is_file():
            shutil.copy2(entry, target / entry.name)
    return True


def keep_seed(home: Path) -> None:
    """When there is no seed yet and opencode completed its install in `home`, keep a copy of it as
    the seed (replaced in one rename, so a concurrent session never sees half a seed)."""
    seed = seed_dir()
    config_dir = home / ".config" / "opencode"
    if plugin_deps_ready(seed) or not plugin_deps_ready(config_dir):
        return
    staging = seed.with_name(f"config-seed.{os.getpid()}")
    with contextlib.suppress(OSError):
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(config_dir, staging, symlinks=True)
        shutil.rmtree(seed, ignore_errors=True)
        staging.rename(seed)
    shutil.rmtree(staging, ignore_errors=True)


def opencode_env(base: Mapping[str, str], home: Path, cwd: Path) -> dict[str, str]:
    """`base` with HOME, XDG_* and TMPDIR in `home`, and PWD at `cwd`: opencode takes its project
    directory from $PWD, not from the real working directory, and writes $TMPDIR/opencode."""
    env = dict(base)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        TMPDIR=str(home / ".tmp"),
        PWD=str(cwd),
    )
    return env


def provider_config(
    url: str, provider: str = "mock", name: str = "Mock", model: str = "mock", api_key: str = "test"
) -> dict[str, Any]:
    """An opencode.json whose model (and small model) is the OpenAI-compatible server at `url`."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            provider: {
                "name": name,
                "options": {"apiKey": api_key, "baseURL": url},
                "models": {model: {"name": name}},
            }
        },
        "model": f"{provider}/{model}",
        "small_model": f"{provider}/{model}",
    }
