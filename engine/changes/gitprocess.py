"""Running git in the workspace: one command at a time per store, retried while another git holds a
lock it needs (and a lock no running git holds, left by a git that was killed, removed), with the
repository's identity or evolve's."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import git

from engine.changes import stalelocks

IDENTITY = {"name": "evolve", "email": "evolve@localhost"}
_LOCK_RETRIES = 100
_STALE_CHECK_AFTER = 5  # retries (about 0.3 s) before a lock is examined as maybe stale
_READ_CHUNK = 1 << 20
_LOCK_PATH = re.compile(r"Unable to create '([^']+\.lock)': File exists")


class GitError(RuntimeError):
    pass


def _is_lock_error(stderr: str) -> bool:
    """Another git process holds a lock we need (the index, HEAD or a ref): worth retrying."""
    return "index.lock" in stderr or "cannot lock ref" in stderr or ".lock': File exists" in stderr


class GitProcess:
    """git for the repository at `root`. Thread-safe: what holds `_lock` runs alone (git itself
    takes an index lock, and a commit is several commands)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.RLock()
        self._repo: git.Repo | None = None
        self._notes: list[str] = []  # what the store did on its own (stale locks removed), to report
        self._notes_lock = threading.Lock()

    def take_notes(self) -> list[str]:
        """What the store did on its own since the last call (e.g. a stale lock it removed)."""
        with self._notes_lock:
            notes, self._notes = self._notes, []
        return notes

    def _note(self, text: str) -> None:
        with self._notes_lock:
            self._notes.append(text)

    def _remove_stale(self, lock: Path) -> bool:
        if not stalelocks.remove_if_stale(lock, self.root):
            return False
        self._note(
            f"removed {lock.relative_to(self.root) if lock.is_relative_to(self.root) else lock}: "
            "a lock left by a git process that is gone (no process holds it)"
        )
        return True

    def clear_stale_locks(self) -> list[str]:
        """Remove the lock files in `.git` that no running git holds (a git killed mid-commit leaves
        `index.lock`, which would refuse every later commit). Returns what was removed."""
        git_dir = self.root / ".git"
        if not git_dir.is_dir():
            return []
        with self._lock:
            return [str(p) for p in stalelocks.find_locks(git_dir) if self._remove_stale(p)]

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            self._repo = git.Repo(self.root)
        return self._repo

    def exists(self) -> bool:
        return (self.root / ".git").exists()

    def _env(self) -> dict[str, str]:
        """Use the repository's identity if it has one, else `evolve`, without writing config."""
        env: dict[str, str] = {}
        if not self._has_config("user.name"):
            env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = IDENTITY["name"]
        if not self._has_config("user.email"):
            env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = IDENTITY["email"]
        return env

    def _has_config(self, key: str) -> bool:
        """Ask git itself, so that GIT_CONFIG_GLOBAL, includes and the like count as git counts them."""
        try:
            return bool(self.repo.git.config("--get", key).strip())
        except git.GitCommandError:
            return False

    def _bounded(self, *args: str, limit: int) -> tuple[bytes, bool]:
        """The first `limit` bytes git prints for `args`, and whether it had more: read as it comes,
        and git is stopped at the cut, so that a 200 MB file or patch costs `limit` bytes of memory,
        not its size. GitError when git fails before the cut."""
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(
                ["git", "-c", "core.quotepath=false", *args],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
            assert proc.stdout is not None
            chunks: list[bytes] = []
            size = 0
            cut = False
            try:
                while True:
                    chunk = os.read(proc.stdout.fileno(), min(_READ_CHUNK, limit + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > limit:
                        cut = True
                        break
            finally:
                if cut:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()  # it has more to say: not wanted
                proc.stdout.close()
                status = proc.wait()
            if status != 0 and not cut:
                errors.seek(0)
                text = errors.read(4096).decode("utf-8", "replace").strip()
                raise GitError(f"git {' '.join(args[:2])} failed in {self.root}: {text}")
        data = b"".join(chunks)
        return data[:limit], cut

    def _git(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        """Run git, retrying while another git process holds the index lock."""
        delay = 0.01
        for attempt in range(_LOCK_RETRIES):
            try:
                out: str = self.repo.git.execute(
                    ["git", "-c", "commit.gpgsign=false", "-c", "core.quotepath=false", *args],
                    env=dict(env) if env else None,
                )
                return out
            except git.GitCommandError as exc:
                stderr = str(exc.stderr)
                if _is_lock_error(stderr) and attempt + 1 < _LOCK_RETRIES:
                    found = _LOCK_PATH.search(stderr)
                    if attempt >= _STALE_CHECK_AFTER and found and self._remove_stale(Path(found.group(1))):
                        continue
                    time.sleep(delay)
                    delay = min(delay * 2, 0.2)
                    continue
                raise GitError(
                    f"git {' '.join(args[:2])} failed in {self.root}: {exc.stderr.strip()}"
                ) from exc
        raise GitError("unreachable")
