"""Lock files that git left behind when it was killed (`.git/index.lock` and the like), told apart
from those a running git process holds.

git creates a lock file and keeps it open until it renames it into place. A lock file that no
process has open, with no git process working in the repository, and that stays so for a moment,
is stale: a git that died with it (kill -9, a crash, a full disk). Removing it is then what git's
own message asks a person to do. This looks at `/proc`; where there is none, a lock file counts as
stale only once it is `FALLBACK_AGE_S` old.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

PROC: Final = Path("/proc")
SETTLE_S: Final = 0.1  # a lock must look abandoned twice, this far apart
FALLBACK_AGE_S: Final = 600.0


def _pids() -> Iterator[int]:
    with contextlib.suppress(OSError):
        for entry in os.scandir(PROC):
            if entry.name.isdigit():
                yield int(entry.name)


def holders(path: Path) -> list[int]:
    """Processes (of those whose file descriptors we may read) that have `path` open."""
    target = os.path.realpath(path)
    found: list[int] = []
    for pid in _pids():
        fd_dir = PROC / str(pid) / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd) == target:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found


def git_working_in(repo: Path) -> list[int]:
    """git processes whose working directory is in `repo` (the work tree or its `.git`)."""
    root = os.path.realpath(repo) + os.sep
    found: list[int] = []
    for pid in _pids():
        try:
            comm = (PROC / str(pid) / "comm").read_text().strip()
            if not comm.startswith("git"):
                continue
            cwd = os.readlink(PROC / str(pid) / "cwd") + os.sep
        except OSError:
            continue
        if cwd.startswith(root):
            found.append(pid)
    return found


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def is_stale(lock: Path, repo: Path) -> bool:
    """Whether `lock` is left over by a git process that is gone (see the module's docstring)."""
    if not PROC.joinpath("self").is_dir():
        try:
            return time.time() - lock.stat().st_mtime > FALLBACK_AGE_S
        except OSError:
            return False
    first = _identity(lock)
    if first is None or holders(lock) or git_working_in(repo):
        return False
    time.sleep(SETTLE_S)
    return _identity(lock) == first and not holders(lock) and not git_working_in(repo)


def remove_if_stale(lock: Path, repo: Path) -> bool:
    """Remove `lock` if it is stale. True when it was removed."""
    if not is_stale(lock, repo):
        return False
    try:
        lock.unlink()
    except FileNotFoundError:
        return False
    return True


def find_locks(git_dir: Path) -> list[Path]:
    """The lock files git may leave in a repository: the index, HEAD, packed refs, config and
    every ref (`refs/**.lock`)."""
    found = [p for p in git_dir.glob("*.lock") if p.is_file()]
    refs = git_dir / "refs"
    if refs.is_dir():
        found += [p for p in refs.rglob("*.lock") if p.is_file()]
    return found
