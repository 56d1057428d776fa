"""opencode for the end-to-end tests and the benchmarks, as the product installs and runs it
(evolve_demo/opencode_setup.py): the pinned version, its install into .cache/, an isolated home whose
one-time plugin install is paid once per machine, and a project configuration whose model is the
scripted model (evolve_demo/scripted_model.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evolve_demo import opencode_setup
from evolve_demo.opencode_setup import OPENCODE_VERSION, keep_seed, make_home, opencode_env, plugin_deps_ready

__all__ = [
    "CONFIG_SEED",
    "OPENCODE_VERSION",
    "install_opencode",
    "keep_seed",
    "make_home",
    "mock_provider",
    "opencode_env",
    "plugin_deps_ready",
]

CONFIG_SEED = opencode_setup.seed_dir()
"""A copy of opencode's config directory after its one-time install of @opencode-ai/plugin."""


def install_opencode() -> Path:
    """The opencode binary, installed into .cache/ with npm unless it is there already.
    RuntimeError (opencode_setup.SetupError) when that fails."""
    return opencode_setup.install(quiet=True)


def mock_provider(url: str) -> dict[str, Any]:
    """An opencode.json whose model (and small model) is the scripted model at `url`."""
    return opencode_setup.provider_config(url)
