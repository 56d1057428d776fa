"""How often the heartbeat beats: the config's `heartbeat_ms`, or the agent's own choice of its
cadence (`evolve_heartbeat_set`, kept in the state file so that a restarted engine keeps it). The
operator's force-disable (a negative `heartbeat_ms`) always wins."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from engine.tools.builtins import format_datetime
from engine.workspace.config import Config
from engine.workspace.layout import StateFile

MIN_CHOSEN_MS = 60_000  # the shortest interval the agent may choose for itself


class Cadence:
    """The interval in force and where it comes from; the agent's choice, read and written."""

    def __init__(self, config: Callable[[], Config], state: StateFile) -> None:
        self._config = config
        self._state_file = state

    @property
    def interval_ms(self) -> int:
        """The config's `heartbeat_ms` when it is negative (the operator's force-disable always
        wins), else the agent's own choice (`evolve_heartbeat_set`, kept in the state file), else the
        config's value. Negative: no timer."""
        configured = self._config().heartbeat_ms
        if configured < 0:
            return configured
        choice = self.choice()
        if choice is not None:
            if choice.get("enabled") is False:
                return -1
            chosen = choice.get("interval_ms")
            if isinstance(chosen, int) and not isinstance(chosen, bool) and chosen >= 0:
                return chosen
        return configured

    def choice(self) -> dict[str, Any] | None:
        """The agent's choice of its own cadence (state file `heartbeat_choice`), if it made one."""
        found = self._state_file.read().get("heartbeat_choice")
        return found if isinstance(found, dict) else None

    @property
    def source(self) -> str:
        """Where the interval comes from: `config`, `agent`, or `config (disabled)`, which wins."""
        if self._config().heartbeat_ms < 0:
            return "config (disabled)"
        choice = self.choice()
        if choice is not None and (
            choice.get("enabled") is False or isinstance(choice.get("interval_ms"), int)
        ):
            return "agent"
        return "config"

    def choose(
        self, interval_ms: int | None, enabled: bool | None, reset: bool, session: str | None
    ) -> str | None:
        """Keep the agent's choice (or forget it, `reset`); the error to tell the agent, if any."""
        if reset:
            self._state_file.update({"heartbeat_choice": None})
            return None
        choice = dict(self.choice() or {})
        if interval_ms is not None:
            if interval_ms < MIN_CHOSEN_MS:
                return f"error: interval_ms must be at least {MIN_CHOSEN_MS} (one minute), got {interval_ms}"
            choice["interval_ms"] = interval_ms
        if enabled is not None:
            choice["enabled"] = enabled
        choice["at"] = format_datetime(datetime.now(UTC))
        choice["session"] = session
        self._state_file.update({"heartbeat_choice": choice})
        return None
