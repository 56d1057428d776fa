"""`evolve shim install|uninstall`: add the evolve plugin to an opencode project's configuration.

The project's `opencode.json` (or `opencode.jsonc`) gets a plugin entry
`["file:///…/shim/evolve.js", {"workspace": …, "command": […]}]`. When the configured
`heartbeat_agent` is not defined, an agent of that name is added too, because opencode refuses
prompts for an unknown agent. Both are done idempotently and leave every other setting alone.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import json5

from engine.workspace.config import load_config
from engine.workspace.layout import Workspace, write_atomic

AGENT_NOTE = "evolve: the agent for heartbeats and notifications (added by evolve shim install)"
SCHEMA = "https://opencode.ai/config.json"


class InstallError(RuntimeError):
    pass


def shim_file() -> Path:
    """The plugin file shipped with this evolve: `evolve.js` of the package `evolve_shim`, which is the
    repository's shim/ directory installed under that name. An editable install (or a checkout run
    without installing) uses the checkout's shim/evolve.js: Python 3.11 cannot read a namespace
    package of an editable install through importlib.resources."""
    try:
        installed = resources.files("evolve_shim").joinpath("evolve.js")
    except (ModuleNotFoundError, NotADirectoryError):
        installed = None
    if isinstance(installed, Path) and installed.is_file():
        return installed.resolve()
    checkout = Path(__file__).resolve().parents[2] / "shim" / "evolve.js"  # engine/opencode/ -> the checkout
    if checkout.is_file():
        return checkout
    raise InstallError(
        "cannot find the evolve plugin (evolve_shim/evolve.js) in this installation; reinstall evolve"
    )


def config_path(project: Path) -> Path:
    for name in ("opencode.jsonc", "opencode.json"):
        if (project / name).is_file():
            return project / name
    return project / "opencode.json"


def read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"$schema": SCHEMA}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {"$schema": SCHEMA}
    try:
        data = json5.loads(text)
    except ValueError as exc:
        raise InstallError(
            f"{path} is not valid JSON/JSONC ({exc}); fix it first, nothing was changed"
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(f"{path} must hold a JSON object; nothing was changed")
    return data


def _is_ours(entry: object) -> bool:
    """A plugin entry of evolve: a checkout's shim/evolve.js or an installed evolve_shim/evolve.js."""
    spec = entry[0] if isinstance(entry, list) and entry else entry
    return isinstance(spec, str) and spec.rstrip("/").endswith("shim/evolve.js")


def defined_agents(project: Path, data: dict[str, Any], home: Path | None = None) -> set[str]:
    """Agents opencode will know: built-in ones, the project config's and the global config's."""
    names = {"build", "plan", "general", "explore"}
    for source in (data, global_config(home)):
        for key in ("agent", "mode"):
            section = source.get(key)
            if isinstance(section, dict):
                names.update(section)
    for folder in (project / ".opencode" / "agent", project / ".opencode" / "agents"):
        if folder.is_dir():
            names.update(p.stem for p in folder.glob("*.md"))
    return names


def global_config(home: Path | None = None) -> dict[str, Any]:
    """The global opencode configuration (every project's), or {}."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or (home or Path.home()) / ".config") / "opencode"
    for name in ("opencode.jsonc", "opencode.json", "config.json"):
        try:
            data = json5.loads((base / name).read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return data
        except (OSError, ValueError):
            continue
    return {}


def install(project: Path, workspace: Path, command: list[str] | None = None) -> dict[str, Any]:
    path = config_path(project)
    data = read_config(path)
    command = command or [sys.executable, "-m", "engine"]
    entry = [shim_file().as_uri(), {"workspace": str(workspace), "command": command}]
    plugins = data.get("plugin")
    if plugins is None:
        plugins = []
    if not isinstance(plugins, list):
        raise InstallError(f"{path}: 'plugin' must be a list; nothing was changed")
    kept = [p for p in plugins if not _is_ours(p)]
    changed = [*kept, entry] != plugins
    data["plugin"] = [*kept, entry]
    agent = load_config(Workspace(workspace).config_file).config.heartbeat_agent
    added_agent = None
    if agent not in defined_agents(project, data):
        agents = data.setdefault("agent", {})
        if not isinstance(agents, dict):
            raise InstallError(f"{path}: 'agent' must be an object; nothing was changed")
        agents[agent] = {"description": AGENT_NOTE, "mode": "primary"}
        added_agent = agent
        changed = True
    if changed:
        write_config(path, data)
    return {"config": str(path), "changed": changed, "plugin": entry, "agent_added": added_agent}


def uninstall(project: Path) -> dict[str, Any]:
    path = config_path(project)
    if not path.is_file():
        return {"config": str(path), "changed": False}
    data = read_config(path)
    plugins = data.get("plugin")
    changed = False
    if isinstance(plugins, list):
        kept = [p for p in plugins if not _is_ours(p)]
        if kept != plugins:
            changed = True
            if kept:
                data["plugin"] = kept
            else:
                del data["plugin"]
    agents = data.get("agent")
    if isinstance(agents, dict):
        for name in [
            n for n, v in agents.items() if isinstance(v, dict) and v.get("description") == AGENT_NOTE
        ]:
            del agents[name]
            changed = True
        if not agents:
            del data["agent"]
    if changed:
        write_config(path, data)
    return {"config": str(path), "changed": changed}


def write_config(path: Path, data: dict[str, Any]) -> None:
    """Write an opencode config file, keeping a `.jsonc` file's original (its comments) beside it."""
    if path.suffix == ".jsonc" and path.is_file():
        # Comments cannot survive a rewrite: keep the original beside it.
        backup = path.with_name(path.name + ".bak")
        backup.write_bytes(path.read_bytes())
    # The file keeps its mode (write_atomic's temporary file is 0600); a new one gets the usual mode.
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        mode = 0o666 & ~umask
    write_atomic(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(), mode=mode)


def installed(project: Path) -> list[Any]:
    try:
        data = read_config(config_path(project))
    except InstallError:
        return []
    plugins = data.get("plugin")
    return [p for p in plugins if _is_ours(p)] if isinstance(plugins, list) else []
