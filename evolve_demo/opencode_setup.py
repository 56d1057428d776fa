"""opencode as evolve runs it, under the name the demo, the end-to-end tests, the benchmarks and
scripts/install_opencode.sh know: the pinned release, its install, the isolated home and its seed,
the provider configuration. It lives in the engine (engine/opencode/setup.py), whose behaviour checks
start opencode too; `python -m evolve_demo.opencode_setup` installs it and prints the binary's path."""

from __future__ import annotations

import sys

from engine.opencode.setup import (
    CACHE_VARIABLE,
    OPENCODE_VERSION,
    PLATFORMS,
    SetupError,
    binary_path,
    cache_dir,
    install,
    install_dir,
    installed_binary,
    isolated_version,
    keep_seed,
    make_dirs,
    make_home,
    opencode_env,
    platform_package,
    plugin_deps_ready,
    prepare_seed,
    provider_config,
    seed_dir,
    source_checkout,
)

__all__ = [
    "CACHE_VARIABLE",
    "OPENCODE_VERSION",
    "PLATFORMS",
    "SetupError",
    "binary_path",
    "cache_dir",
    "install",
    "install_dir",
    "installed_binary",
    "isolated_version",
    "keep_seed",
    "make_dirs",
    "make_home",
    "opencode_env",
    "platform_package",
    "plugin_deps_ready",
    "prepare_seed",
    "provider_config",
    "seed_dir",
    "source_checkout",
]


def main(argv: list[str] | None = None) -> int:
    """`python -m evolve_demo.opencode_setup`: install opencode and print the binary's path (what
    scripts/install_opencode.sh runs)."""
    del argv
    try:
        print(install(progress=lambda text: print(text, file=sys.stderr)))
    except SetupError as exc:
        print(f"install_opencode: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
