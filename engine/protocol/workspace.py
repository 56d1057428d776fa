"""Which workspace a program means when it is not told: the same rule for the command line, the
console and the opencode plugin (which repeats it in JavaScript)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def resolve_workspace(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path:
    """`explicit`, else `$OPENCODE_EVOLVE_WORKSPACE`, else the legacy `$OPENCODE_SIDECAR_WORKSPACE`,
    else `~/workspace`. Empty strings count as unset."""
    env = os.environ if env is None else env
    chosen = (
        str(explicit or "")
        or env.get("OPENCODE_EVOLVE_WORKSPACE", "")
        or env.get("OPENCODE_SIDECAR_WORKSPACE", "")
        or "~/workspace"
    )
    return Path(chosen).expanduser().absolute()
