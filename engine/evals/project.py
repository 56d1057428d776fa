"""The opencode project a version of the workspace runs in: a throwaway directory whose `opencode.json`
has the agent's own provider and model, the evolve plugin for the copy, and permissions that keep
opencode's tools inside it.

The provider and the model are the agent's: read from the opencode project the agent runs in (the
directory the connected opencode reported, or `evals_project` in the config), over opencode's global
configuration of the engine's user, the project's winning, as opencode merges them. Only what names
the model and how to reach it is taken (providers, model, small model, the agents' own models and
prompts): nothing that runs something (MCP servers, commands, plugins, LSP, formatters) and none of
the project's permissions, which evals replace with their own.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import json5

from engine.evals.scenarios import OUTSIDE_TOOLS

CONFIG_NAMES: Final = ("opencode.jsonc", "opencode.json")
GLOBAL_NAMES: Final = ("opencode.jsonc", "opencode.json", "config.json")
TAKEN: Final = (
    "provider",
    "model",
    "small_model",
    "enabled_providers",
    "disabled_providers",
    "default_agent",
)
AGENT_KEYS: Final = ("model", "prompt", "description", "mode", "temperature", "top_p", "options", "steps")

# Everything that would reach outside the copy, or wait for a person who is not there, is denied:
# opencode then does not even offer those tools to the model.
PERMISSIONS: Final[dict[str, str]] = {
    **dict.fromkeys(sorted(OUTSIDE_TOOLS), "deny"),
    "external_directory": "deny",  # file tools only inside the throwaway project
    "question": "deny",  # nobody answers
    "doom_loop": "deny",  # nobody is asked to let a repeated call go on
    "lsp": "deny",
}


class ProjectError(RuntimeError):
    """The agent's provider or model cannot be found; the message says where it was looked for."""


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json5.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ProjectError(f"{path}: cannot read it as JSONC: {exc}") from exc
    return data if isinstance(data, dict) else {}


def project_config(project: Path) -> dict[str, Any]:
    for name in CONFIG_NAMES:
        if (project / name).is_file():
            return _read(project / name)
    return {}


def global_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The opencode configuration of the engine's user ($XDG_CONFIG_HOME/opencode, else
    ~/.config/opencode)."""
    home = env.get("HOME") or str(Path.home())
    base = Path(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")) / "opencode"
    for name in GLOBAL_NAMES:
        if (base / name).is_file():
            return _read(base / name)
    return {}


def agent_settings(project: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    """What names the agent's model and how to reach it, from its project over the global config."""
    merged: dict[str, Any] = {}
    for source in (global_config(env), project_config(project) if project else {}):
        for key in TAKEN:
            if key not in source:
                continue
            if key == "provider" and isinstance(source[key], dict):
                providers = merged.setdefault("provider", {})
                for name, spec in source[key].items():
                    providers[name] = copy.deepcopy(spec)
            else:
                merged[key] = copy.deepcopy(source[key])
        agents = source.get("agent")
        if isinstance(agents, dict):
            kept = merged.setdefault("agent", {})
            for name, spec in agents.items():
                if isinstance(spec, dict):
                    kept[name] = {k: copy.deepcopy(v) for k, v in spec.items() if k in AGENT_KEYS}
    return merged


def eval_config(settings: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    """The throwaway project's opencode.json (before the plugin is added): the agent's model, the
    permissions of evals, and nothing that works in the background."""
    config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json", **copy.deepcopy(dict(settings))}
    if model:
        config["model"] = model
    if not config.get("model"):
        raise ProjectError(
            "no model for the agent: its opencode project names none (set `model` in its opencode.json, "
            "or `model` in config/evolve.jsonc)"
        )
    config.setdefault("small_model", config["model"])  # titles and summaries with the agent's own model
    config.update(
        permission=dict(PERMISSIONS),
        autoupdate=False,
        share="disabled",
        snapshot=False,
        lsp=False,
        formatter=False,
    )
    return config


def write_config(project: Path, config: Mapping[str, Any]) -> None:
    project.mkdir(parents=True, exist_ok=True)
    (project / "opencode.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
