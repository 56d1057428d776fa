"""Which LLM model the heartbeat uses: the config's, else the one last seen in chat (kept in the state
file, so it survives restarts)."""

from __future__ import annotations

from collections.abc import Callable

from engine.workspace.config import Config
from engine.workspace.layout import StateFile


class ModelMemory:
    def __init__(self, config: Callable[[], Config], state: StateFile) -> None:
        self._config = config
        self._state = state
        self._last: dict[str, str] | None = None

    def note(self, model: dict[str, str]) -> None:
        """Remember the last chat model; persisted when it changes."""
        model = {"providerID": model["providerID"], "modelID": model["modelID"]}
        self._last = model
        if self._state.read().get("model") != model:
            self._state.update({"model": model})

    def chat(self) -> dict[str, str] | None:
        """The model of the last chat turn (the state file's, else the one seen since), whatever the
        config says the heartbeat uses."""
        stored = self._state.read().get("model")
        if isinstance(stored, dict) and stored.get("providerID") and stored.get("modelID"):
            return {"providerID": str(stored["providerID"]), "modelID": str(stored["modelID"])}
        return self._last

    def current(self) -> dict[str, str] | None:
        """config.model, else the state file's model, else the last model seen in chat."""
        configured = self._config().model
        if configured is not None:
            return configured.to_dict()
        stored = self._state.read().get("model")
        if isinstance(stored, dict) and stored.get("providerID") and stored.get("modelID"):
            return {"providerID": str(stored["providerID"]), "modelID": str(stored["modelID"])}
        return self._last
