"""The agents file: every agent one console shows, with names. JSONC, in the user's config directory
(`$XDG_CONFIG_HOME/evolve/agents.jsonc`, else `~/.config/evolve/agents.jsonc`):

    {
      "agents": [
        {"name": "notes", "workspace": "~/workspace"},
        {"name": "persona", "url": "https://server:8765", "token_file": "persona.token", "ca": "server.pem"},
      ],
    }

An agent is a local workspace (its engine found, or started, through its announcement) or an engine
by URL with the file that holds its token (and, for a certificate no system authority signed, the
certificate to trust). Paths are relative to the agents file. A mistake is an `AgentsFileError` that
names the file, the line and the column, and what to write instead.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import json5

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")  # short enough for a fleet row and the bar
FIELDS = frozenset({"name", "workspace", "url", "token_file", "ca"})
_JSON5_AT = re.compile(r"<string>:(\d+) Unexpected (.*) at column (\d+)$", re.S)


class AgentsFileError(ValueError):
    """A problem of the agents file (or of an agent given on the command line), where it is."""

    def __init__(self, source: str, message: str, line: int | None = None, column: int | None = None) -> None:
        where = source + (f":{line}" if line else "") + (f":{column}" if line and column else "")
        super().__init__(f"{where}: {message}")
        self.source, self.line, self.column = source, line, column


@dataclass(frozen=True)
class AgentSpec:
    """One agent as the operator named it: a workspace, or an engine's URL with its token file."""

    name: str
    workspace: Path | None = None
    url: str | None = None
    token_file: Path | None = None
    ca: Path | None = None  # the certificate (or authority) to trust for an https URL

    def read_token(self) -> str:
        """The token in `token_file` (its first line); an AgentsFileError says what is wrong."""
        assert self.token_file is not None
        source = str(self.token_file)
        try:
            mode = self.token_file.stat().st_mode
            text = self.token_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise AgentsFileError(
                source, f"the token file of {self.name} cannot be read: {exc.strerror}"
            ) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            # As ssh does with keys: a token others can read is a token others have.
            raise AgentsFileError(
                source, f"the token file of {self.name} is readable by others; chmod 600 {source}"
            )
        token = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not token:
            raise AgentsFileError(
                source, f"the token file of {self.name} is empty; put the engine's token in it"
            )
        return token


def default_path(env: dict[str, str] | None = None) -> Path:
    """Where the agents file is: `$XDG_CONFIG_HOME/evolve/agents.jsonc`, else `~/.config/evolve/…`."""
    env = dict(os.environ) if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "evolve" / "agents.jsonc"


def _position(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _where_value(text: str, key: str, value: Any, after: int = 0) -> tuple[int, int] | None:
    """Line and column of `"key": value` in the file (from `after`), to name where a field is wrong."""
    shown = re.escape(json5.dumps(value)) if isinstance(value, str) else r"\S"
    found = re.compile(rf"""["']?{re.escape(key)}["']?\s*:\s*({shown})""").search(text, after)
    return _position(text, found.start(1)) if found else None


def _path(value: str, base: Path) -> Path:
    expanded = Path(os.path.expanduser(value))
    return expanded if expanded.is_absolute() else base / expanded


def parse(text: str, source: str) -> list[AgentSpec]:
    """The agents of an agents file's `text` (`source`: its path, for the errors)."""
    try:
        data = json5.loads(text)
    except (ValueError, RecursionError) as exc:
        at = _JSON5_AT.match(str(exc))
        if at is None:
            raise AgentsFileError(source, f"not valid JSONC: {exc}") from None
        found = "the end of the file (a '}' or ']' missing?)" if at[2] == "end of input" else at[2]
        raise AgentsFileError(
            source, f"not valid JSONC: unexpected {found}", int(at[1]), int(at[3])
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("agents"), list):
        raise AgentsFileError(
            source, 'expected an object with a list "agents": {"agents": [{"name": …}, …]}', 1, 1
        )
    base = Path(source).parent
    specs: list[AgentSpec] = []
    after = 0  # where the entry being read starts in the text: its fields are searched from there
    searched = 0  # past the previous entry's name: the next name is searched from there
    for number, entry in enumerate(data["agents"], 1):
        name = entry.get("name") if isinstance(entry, dict) else None
        here = _where_value(text, "name", name, searched) if name is not None else None
        if here is not None:
            after = sum(len(line) + 1 for line in text.split("\n")[: here[0] - 1])
            searched = after + here[1]
        spot = _Spot(text, source, number, after, here)
        specs.append(_entry(entry, spot, base, {spec.name for spec in specs}))
    return specs


@dataclass(frozen=True)
class _Spot:
    """Where an entry of the file is, to say where a mistake in it is."""

    text: str
    source: str
    number: int
    after: int
    here: tuple[int, int] | None

    def wrong(self, message: str, key: str | None = None, value: Any = None) -> AgentsFileError:
        at = _where_value(self.text, key, value, self.after) if key is not None else None
        line, column = at or self.here or (None, None)
        return AgentsFileError(self.source, f"agent {self.number}: {message}", line, column)


def _entry(entry: Any, spot: _Spot, base: Path, taken: set[str]) -> AgentSpec:
    if not isinstance(entry, dict):
        raise spot.wrong("expected an object with a name and a workspace or a url")
    name = entry.get("name")
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise spot.wrong(
            f"unknown field {unknown[0]!r} (the fields are {', '.join(sorted(FIELDS))})", unknown[0]
        )
    if not isinstance(name, str) or not NAME.match(name):
        raise spot.wrong(
            "every agent needs a name of letters, digits, '.', '_' or '-', at most 40 characters",
            "name" if name is not None else None,
            name,
        )
    if name in taken:
        raise spot.wrong(f"the name {name!r} is used twice; each agent needs its own", "name", name)
    for key in ("workspace", "url", "token_file", "ca"):
        if key in entry and not isinstance(entry[key], str):
            raise spot.wrong(f"{key} must be a string", key, entry[key])
    workspace, url = entry.get("workspace"), entry.get("url")
    if (workspace is None) == (url is None):
        raise spot.wrong(f"{name}: give either a workspace (a local agent) or a url (an engine elsewhere)")
    if url is None:
        if "token_file" in entry or "ca" in entry:
            raise spot.wrong(
                f"{name}: a workspace's engine is found through its announcement; token_file and ca are "
                "for an engine by url",
                "workspace",
                workspace,
            )
        return AgentSpec(name, workspace=_path(str(workspace), base))
    if not re.match(r"^https?://[^/\s]+/?$", url):
        raise spot.wrong(f"{name}: the url must be http(s)://host:port", "url", url)
    if "token_file" not in entry:
        raise spot.wrong(
            f"{name}: an engine by url needs a token_file (a file holding its token)", "url", url
        )
    return AgentSpec(
        name,
        url=url.rstrip("/"),
        token_file=_path(entry["token_file"], base),
        ca=_path(entry["ca"], base) if "ca" in entry else None,
    )


def load(path: Path) -> list[AgentSpec]:
    """The agents in the file at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentsFileError(str(path), f"cannot be read: {exc.strerror}") from None
    return parse(text, str(path))


def name_for(workspace: Path | None = None, url: str | None = None, taken: set[str] | None = None) -> str:
    """A name for an agent given on the command line: its workspace's directory name, or its URL's
    host and port; made unique with a number when two would be the same."""
    raw = workspace.name if workspace is not None else re.sub(r"^https?://", "", url or "agent")
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-.")[:36] or "agent"
    base = base if base[0].isalnum() else "a" + base
    name, n = base, 2
    while taken and name in taken:
        name, n = f"{base}-{n}", n + 1
    return name
