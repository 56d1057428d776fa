"""Where a workspace lives, what is in it, and its runtime state file.

Layout: `config/evolve.jsonc`, `state/` (runtime state, kept out of git), `hooks/` (executables),
`prompts/` (the five contract files), `tests/` (hook validation scripts).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Stage -> file in prompts/, in contract order (docs/hooks.md, "The prompt contract").
PROMPT_CONTRACT: dict[str, str] = {
    "preamble": "preamble.md",
    "chat": "chat.md",
    "heartbeat": "heartbeat.md",
    "compaction": "compaction.md",
    "recover": "recover.md",
}
PROMPT_FILES = tuple(PROMPT_CONTRACT.values())
_PROMPTS: dict[str, tuple[tuple[int, int, int, int], str]] = {}  # path -> (its stat key, its text)
PROMPTS_KEPT = 100  # prompt files whose text is kept between reads
_PROMPT_PATHS: dict[Path, tuple[tuple[str, str], ...]] = {}  # workspace root -> (stage, file path)


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def hooks_dir(self) -> Path:
        return self.root / "hooks"

    @property
    def prompts_dir(self) -> Path:
        return self.root / "prompts"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def config_file(self) -> Path:
        return self.root / "config" / "evolve.jsonc"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "evolve.json"

    @property
    def journal_file(self) -> Path:
        return self.state_dir / "journal.sqlite3"

    def ensure_state_dir(self) -> Path:
        """`state/`, created if missing, readable by its owner only: it holds the journal (whole
        conversations), the access token and held changes."""
        return private_dir(self.state_dir)

    def read_prompts(self) -> dict[str, str]:
        """Contract stage -> file content, for the files that can be read (missing ones are omitted).

        Read for every stage dispatch: a file whose inode, size, and modification and change times
        are those of its last read is not read again."""
        out: dict[str, str] = {}
        paths = _PROMPT_PATHS.get(self.root)
        if paths is None:  # plain os paths, joined once per workspace
            if len(_PROMPT_PATHS) >= PROMPTS_KEPT:
                _PROMPT_PATHS.clear()
            prompts = os.path.join(self.root, "prompts")
            paths = _PROMPT_PATHS[self.root] = tuple(
                (stage, os.path.join(prompts, name)) for stage, name in PROMPT_CONTRACT.items()
            )
        for stage, path in paths:
            try:
                st = os.stat(path)
                key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                cached = _PROMPTS.get(path)
                if cached is not None and cached[0] == key:
                    out[stage] = cached[1]
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    out[stage] = text = f.read()
                if len(_PROMPTS) >= PROMPTS_KEPT:  # replays read throwaway copies: keep it bounded
                    _PROMPTS.clear()
                _PROMPTS[path] = (key, text)
            except OSError:
                continue
        return out

    def read_prompt(self, stage: str) -> str:
        try:
            return (self.prompts_dir / PROMPT_CONTRACT[stage]).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


TEMP_SUFFIX = ".evolve-tmp"
"""The end of the name of `write_atomic`'s temporary files (`.<name>.<pid>.<random>.evolve-tmp`),
which git is told to ignore and which a restart removes when the process that made them is gone."""


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner may enter (created with its parents if missing)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def write_atomic(path: Path, data: bytes, mode: int | None = None, parents: bool = True) -> None:
    """Write `data` to `path` so that readers see the old or the new content, never a mix:
    a temporary file in the same directory, fsync, then rename over the target. Without `mode`
    the file is readable by its owner only. Missing directories are made; with `parents=False`
    only the file's own: what the engine keeps in `state/` must not make a workspace deleted under
    it again (FileNotFoundError instead)."""
    path.parent.mkdir(parents=parents, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def remove_stale_temp_files(directories: Iterable[Path]) -> list[Path]:
    """Remove the temporary files `write_atomic` left in `directories` (and below) when its process
    died before the rename (a crash, kill -9); those of a process still running are kept. Returns
    what was removed."""
    removed: list[Path] = []
    for top in directories:
        for directory, _dirs, files in os.walk(top):
            for name in files:
                if not name.startswith(".") or not name.endswith(TEMP_SUFFIX):
                    continue
                parts = name[: -len(TEMP_SUFFIX)].rsplit(".", 2)
                if len(parts) != 3 or not parts[1].isdigit() or pid_alive(int(parts[1])):
                    continue
                path = Path(directory, name)
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(path)
    return removed


class StateFile:
    """`state/evolve.json`: read-modify-write of a shallow patch, written atomically.

    Unknown fields are preserved. A missing or unreadable file reads as `{}`; a file that
    exists but does not parse is kept aside as `evolve.json.corrupt-<n>` rather than overwritten,
    so nothing is lost.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def update(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            current = self._read_for_update()
            current.update(patch)
            text = json.dumps(current, indent=2, ensure_ascii=False) + "\n"
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate from a client: kept, \u-escaped
                data = (json.dumps(current, indent=2, ensure_ascii=True) + "\n").encode("utf-8")
            write_atomic(self.path, data, parents=False)
            return current

    def _read_for_update(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                return data
        except FileNotFoundError:
            return {}
        except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
            pass
        n = 1
        while self.path.with_name(f"{self.path.name}.corrupt-{n}").exists():
            n += 1
        os.replace(self.path, self.path.with_name(f"{self.path.name}.corrupt-{n}"))
        return {}
