"""What every process of a behaviour check is given: opencode's binary and the throwaway project's
configuration, the environment, and the settings that keep a copy's engine to itself."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SETTINGS = ("EVOLVE_", "OPENCODE_")
# The copy's engine keeps to itself: no heartbeat of its own, no behaviour checks of its own (a
# scenario whose agent runs them would start opencode within opencode), no held change replayed.
COPY_SETTINGS: Mapping[str, str] = {
    "EVOLVE_HEARTBEAT_MS": "-1",
    "EVOLVE_EVALS_ON_REVIEW": "false",
    "EVOLVE_EVALS_AGENT_TOOLS": "false",
}
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0


@dataclass
class Setup:
    """What every version's processes are given."""

    binary: Path  # opencode, the pinned release
    config: dict[str, Any]  # the throwaway project's opencode.json, before the plugin
    env: Mapping[str, str]  # the engine's environment (EVOLVE_* and OPENCODE_* are left out)
    python: str = sys.executable  # runs the copy's engine
    start_timeout_s: float = START_TIMEOUT_S

    def copy_env(self) -> dict[str, str]:
        """The environment of a copy's processes: the engine's, without its own settings, with the
        copy's. opencode has it too: an engine a plugin starts in place of a dead one keeps to itself."""
        env = {k: v for k, v in self.env.items() if not k.startswith(SETTINGS)}
        env.update(COPY_SETTINGS)
        return env


@dataclass
class Imported:
    """A recorded conversation given to opencode as a session before it starts (a re-asked turn's
    history): opencode's own export format, `{info, messages}`."""

    session: str
    data: dict[str, Any]
