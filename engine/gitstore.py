"""The workspace's git history, through GitPython.

Every engine commit carries machine-readable trailers saying what made it, for example
`Evolve-Origin: tool`, `Evolve-Tool: evolve_hook_edit`, `Evolve-Session: ses_1`, `Evolve-Call: call_7`.
The runtime state directory (`state/`) is excluded through `.git/info/exclude`, so the workspace's
own `.gitignore` is never touched.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import git

EXCLUDES = ("/state/",)
# Entries a change check looks at before it leaves the answer to git (a tree that big costs git a
# scan too).
SCAN_LIMIT = 5000
IDENTITY = {"name": "evolve", "email": "evolve@localhost"}
TRAILER_PREFIX = "Evolve-"
_LOCK_RETRIES = 100


NOTES_REF = "refs/notes/evolve-review"


class GitError(RuntimeError):
    pass


class RevertConflict(GitError):
    def __init__(self, sha: str, files: list[str]) -> None:
        super().__init__(
            f"reverting {sha[:10]} conflicts with later changes to {', '.join(files)}; nothing was changed"
        )
        self.files = files


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str
    files: tuple[str, ...]


def _is_lock_error(stderr: str) -> bool:
    """Another git process holds a lock we need (the index, HEAD or a ref): worth retrying."""
    return "index.lock" in stderr or "cannot lock ref" in stderr or ".lock': File exists" in stderr


def trailers_text(trailers: Mapping[str, str | None]) -> str:
    lines = []
    for key, value in trailers.items():
        if value is None or value == "":
            continue
        clean = " ".join(str(value).split())  # a trailer value is one line
        lines.append(f"{TRAILER_PREFIX}{key}: {clean}")
    return "\n".join(lines)


def parse_trailers(message: str) -> dict[str, str]:
    """The `Evolve-*` trailers of a commit message, keys without the prefix, lower-cased."""
    out: dict[str, str] = {}
    for line in message.splitlines():
        if line.startswith(TRAILER_PREFIX) and ": " in line:
            key, _, value = line[len(TRAILER_PREFIX) :].partition(": ")
            out[key.lower()] = value
    return out


class GitStore:
    """Thread-safe: one commit at a time per store (git itself takes an index lock)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.RLock()
        self._repo: git.Repo | None = None

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            self._repo = git.Repo(self.root)
        return self._repo

    def exists(self) -> bool:
        return (self.root / ".git").exists()

    def ensure(self) -> Commit | None:
        """Make the workspace a repository if it is not one; a new repository gets an `initial`
        commit of what is already there. Returns that commit, if one was made."""
        with self._lock:
            created = False
            if not self.exists():
                self._repo = git.Repo.init(self.root, initial_branch="main")
                created = True
            self._ensure_excludes()
            if created:
                return self.commit("initial", {"Origin": "initial"}, allow_empty=True)
            return None

    def _ensure_excludes(self) -> None:
        info = Path(self.repo.git_dir) / "info"
        info.mkdir(parents=True, exist_ok=True)
        exclude = info / "exclude"
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        missing = [line for line in EXCLUDES if line not in text.splitlines()]
        if missing:
            if text and not text.endswith("\n"):
                text += "\n"
            exclude.write_text(
                text + "# evolve runtime state\n" + "\n".join(missing) + "\n", encoding="utf-8"
            )

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
                if _is_lock_error(str(exc.stderr)) and attempt + 1 < _LOCK_RETRIES:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.2)
                    continue
                raise GitError(
                    f"git {' '.join(args[:2])} failed in {self.root}: {exc.stderr.strip()}"
                ) from exc
        raise GitError("unreachable")

    def dirty_files(self) -> list[str]:
        """Paths with uncommitted changes, untracked files included (state/ excluded)."""
        with self._lock:
            out = self._git("status", "--porcelain", "-z", "--untracked-files=all")
        files: list[str] = []
        entries = out.split("\0")
        i = 0
        while i < len(entries):
            entry = entries[i]
            i += 1
            if len(entry) < 4:
                continue
            files.append(entry[3:])
            if entry[0] in "RC":
                i += 1  # a rename is followed by its source path
        return files

    def snapshot(self) -> dict[str, str]:
        """Uncommitted paths with a fingerprint of their content (or "-" when deleted)."""
        out: dict[str, str] = {}
        for rel in self.dirty_files():
            path = self.root / rel
            try:
                st = path.lstat()
                out[rel] = f"{st.st_size}:{st.st_mtime_ns}:{st.st_mode}"
            except OSError:
                out[rel] = "-"
        return out

    def touched_since(self, moment: float) -> bool:
        """Whether anything in the workspace (but .git and state/) may have been created, changed,
        renamed or deleted at or after `moment` (epoch seconds): a file's or a directory's
        modification or change time says so (a deletion or rename changes its directory's, a chmod
        a file's change time). Also True for a tree of more than SCAN_LIMIT entries."""
        threshold = int(moment * 1_000_000_000)
        root = str(self.root)
        try:
            st = os.lstat(root)
        except OSError:
            return True
        if max(st.st_mtime_ns, st.st_ctime_ns) >= threshold:
            return True
        pending, seen = [root], 0
        while pending:
            directory = pending.pop()
            try:
                entries = os.scandir(directory)
            except OSError:
                return True
            with entries:
                for entry in entries:
                    if directory == root and entry.name in (".git", "state"):
                        continue
                    seen += 1
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        return True  # gone meanwhile: a change
                    if seen > SCAN_LIMIT or max(st.st_mtime_ns, st.st_ctime_ns) >= threshold:
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        return False

    def changed_after(self, moment: float) -> list[str]:
        """Uncommitted paths modified at or after `moment` (epoch seconds), deletions included.
        Without a process for git when nothing in the tree was touched since (touched_since)."""
        if not self.touched_since(moment):
            return []
        out: list[str] = []
        for rel in self.dirty_files():
            try:
                if (self.root / rel).lstat().st_mtime >= moment:
                    out.append(rel)
            except OSError:
                out.append(rel)  # deleted
        return out

    def changed_since(self, before: dict[str, str]) -> list[str]:
        """Paths uncommitted now that were clean at `before`, or changed since."""
        now = self.snapshot()
        return [rel for rel, mark in now.items() if before.get(rel) != mark]

    def commit(
        self,
        message: str,
        trailers: Mapping[str, str | None],
        paths: list[str] | None = None,
        allow_empty: bool = False,
    ) -> Commit | None:
        """Stage `paths` (everything when None) and commit them if anything changed."""
        with self._lock:
            if paths is None:
                self._git("add", "-A")
                staged = self._git("diff", "--cached", "--name-only", "-z")
            else:
                self._git("add", "-A", "--", *paths)
                staged = self._git("diff", "--cached", "--name-only", "-z", "--", *paths)
            files = tuple(f for f in staged.split("\0") if f)
            if not files and not allow_empty:
                return None
            body = message
            extra = trailers_text(trailers)
            if extra:
                body += "\n\n" + extra
            args = ["commit", "--no-verify", "-q", "-m", body]
            if allow_empty:
                args.append("--allow-empty")
            if paths is not None:
                args += ["--", *files]  # only these, whatever else someone staged
            self._git(*args, env=self._env())
            sha = self._git("rev-parse", "HEAD").strip()
            return Commit(sha, body, files)

    def head(self) -> str | None:
        with self._lock:
            try:
                return self._git("rev-parse", "HEAD").strip()
            except GitError:
                return None

    def log(self, limit: int = 100) -> list[dict[str, object]]:
        """Newest first: sha, time, message, trailers, files."""
        with self._lock:
            try:
                out = self._git("log", f"-n{limit}", "--name-only", "-z", "--format=%x1e%H%x1f%at%x1f%B%x1f")
            except GitError:
                return []
        commits: list[dict[str, object]] = []
        for record in out.split("\x1e"):
            if not record.strip("\0\n"):
                continue
            sha, at, body, files = record.split("\x1f", 3)
            commits.append(
                {
                    "sha": sha,
                    "time": int(at),
                    "message": body.strip(),
                    "trailers": parse_trailers(body),
                    "files": [f.strip("\n") for f in files.split("\0") if f.strip("\n")],
                }
            )
        return commits

    def resolve(self, rev: str) -> str:
        with self._lock:
            return self._git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()

    def show_diff(self, sha: str, limit: int = 2_000_000) -> tuple[str, bool]:
        """The patch of one commit (against its parent; the root commit against nothing), cut at `limit`."""
        with self._lock:
            out = self._git("show", "--format=", "--patch", "--no-color", "--no-ext-diff", sha)
        return (out[:limit], True) if len(out) > limit else (out, False)

    def reviews(self) -> dict[str, str]:
        """Commit sha -> review note, for every reviewed commit."""
        with self._lock:
            try:
                listing = self._git("notes", f"--ref={NOTES_REF}", "list")
            except GitError:
                return {}
            out: dict[str, str] = {}
            for line in listing.splitlines():
                parts = line.split()
                if len(parts) == 2:
                    note_blob, commit = parts
                    out[commit] = self._git("cat-file", "-p", note_blob).strip()
            return out

    def add_review(self, sha: str, note: str) -> None:
        """Record a review as a git note, beside the history (the commit itself is not rewritten)."""
        with self._lock:
            self._git("notes", f"--ref={NOTES_REF}", "add", "-f", "-m", note, sha, env=self._env())

    def revert(self, sha: str, message: str, trailers: Mapping[str, str | None]) -> Commit | None:
        """A new commit undoing `sha`. On a conflict the work tree is restored and RevertConflict
        names the files. The caller makes sure nothing else is uncommitted first."""
        with self._lock:
            try:
                self._git("revert", "--no-commit", "--no-edit", sha, env=self._env())
            except GitError:
                conflicted = [
                    f for f in self._git("diff", "--name-only", "--diff-filter=U", "-z").split("\0") if f
                ]
                try:
                    self._git("revert", "--abort")
                except GitError:
                    self._git("reset", "--hard", "-q", "HEAD")
                raise RevertConflict(sha, conflicted or ["(unknown)"]) from None
            return self.commit(message, trailers)

    def parent_is_root(self, sha: str) -> bool:
        with self._lock:
            return not self._git("rev-list", "--parents", "-n1", sha).split()[1:]
