"""`state/engine.json`: how a running engine tells its clients (the shim, the console, the command line)
where it listens and which bearer token it wants.

The engine writes it when it listens and removes it when it stops; the file is readable by its owner
only. A file left by an engine that died is recognised by `alive()` failing.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .api import API_VERSION_HEADER
from .routes import HEALTH

ANNOUNCEMENT = Path("state") / "engine.json"
"""Where the announcement lives, relative to the workspace."""


@dataclass(frozen=True)
class Announcement:
    url: str
    token: str
    pid: int
    version: str
    api: int
    workspace: str

    @staticmethod
    def path(workspace: str | os.PathLike[str]) -> Path:
        return Path(workspace) / ANNOUNCEMENT

    @classmethod
    def read(cls, workspace: str | os.PathLike[str]) -> Announcement | None:
        """The announcement in `workspace`, or None when there is none (or it is unreadable)."""
        try:
            data = json.loads(cls.path(workspace).read_text(encoding="utf-8"))
            return cls(**{f.name: data[f.name] for f in fields(cls)})
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self) -> None:
        """Atomically, mode 0600: a reader sees the old announcement or the new one, never a mix."""
        target = self.path(self.workspace)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".engine.json.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(asdict(self), fh, indent=2)
                fh.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def remove(self) -> None:
        """Remove the file, if it is still this engine's (a newer engine may have replaced it)."""
        found = self.read(self.workspace)
        if found is not None and found.pid == self.pid:
            with contextlib.suppress(OSError):
                self.path(self.workspace).unlink()

    def health(self, timeout: float = 2.0) -> dict[str, Any] | None:
        """The engine's `/v1/health` answer, or None when it does not answer as this engine."""
        request = urllib.request.Request(
            f"{self.url}{HEALTH.path}",
            headers={"authorization": f"Bearer {self.token}", API_VERSION_HEADER: str(self.api)},
        )
        # The engine listens on loopback: a proxy from the environment must not be asked.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=timeout) as resp:
                data = json.loads(resp.read())
        except (OSError, ValueError, urllib.error.URLError):
            return None
        return data if isinstance(data, dict) and data.get("ok") else None

    def alive(self, timeout: float = 2.0) -> bool:
        """Whether the announced engine answers its health check."""
        return self.health(timeout) is not None
