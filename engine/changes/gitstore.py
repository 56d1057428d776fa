"""The workspace's git history, through GitPython.

Every engine commit carries machine-readable trailers saying what made it, for example
`Evolve-Origin: tool`, `Evolve-Tool: evolve_hook_edit`, `Evolve-Session: ses_1`, `Evolve-Call: call_7`
(`trailers`). The runtime state directory (`state/`) is excluded through `.git/info/exclude`, so the
workspace's own `.gitignore` is never touched.

`GitStore` (here) changes the history and tells what changed in the work tree (`worktree`); it
reads the history as `GitReads` (`gitreads`, with HEAD read from `.git`'s files by `headref`) and
runs git as `GitProcess` (`gitprocess`: lock retries, stale locks, identity).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from engine.changes.gitprocess import IDENTITY, GitError
from engine.changes.gitreads import NOTES_REF, GitReads
from engine.changes.trailers import TRAILER_PREFIX, message_with, parse_trailers, trailers_text
from engine.changes.worktree import SCAN_LIMIT, touched_since, uncommitted
from engine.core import strictjson
from engine.workspace.layout import TEMP_SUFFIX

# Names this module had before it was split, for those that import them from here.
__all__ = [
    "EXCLUDES",
    "IDENTITY",
    "NOTES_REF",
    "SCAN_LIMIT",
    "TRAILER_PREFIX",
    "Commit",
    "GitError",
    "GitStore",
    "RevertConflict",
    "parse_trailers",
    "trailers_text",
]

# state/: the engine's runtime state; *.evolve-tmp: a file being written atomically (never a change).
EXCLUDES = ("/state/", f"*{TEMP_SUFFIX}")


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


class GitStore(GitReads):
    """The workspace's repository as the engine uses it: what changed in the work tree, and the
    commits, reverts and notes that change the history. Thread-safe: one commit at a time per store
    (git itself takes an index lock).

    With what it inherits it answers some 40 calls: it is the engine's one door to git, which the
    rest of the engine holds as one object. Each class of the chain does one job and is small: this
    one the changes, `GitReads` the reads, `GitProcess` running git.
    """

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

    def dirty_files(self) -> list[str]:
        """Paths with uncommitted changes, untracked files included (state/ excluded)."""
        with self._lock:
            # Without the optional lock: `git status` would otherwise take .git/index.lock to write
            # back what it refreshed, and a git command of the user's in the workspace at that moment
            # (a `git mv`, a commit) would fail with "index.lock: File exists".
            out = self._git("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all")
        return uncommitted(out)

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
        renamed or deleted at or after `moment` (worktree.touched_since)."""
        return touched_since(self.root, moment)

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
            body = message_with(message, trailers)
            args = ["commit", "--no-verify", "-q", "-m", body]
            if allow_empty:
                args.append("--allow-empty")
            if paths is not None:
                args += ["--", *files]  # only these, whatever else someone staged
            self._git(*args, env=self._env())
            sha = self._git("rev-parse", "HEAD").strip()
            return Commit(sha, body, files)

    def add_review(self, sha: str, note: str) -> None:
        """Record a review as a git note, beside the history (the commit itself is not rewritten)."""
        self.add_note(NOTES_REF, sha, note)

    def add_note(self, ref: str, sha: str, note: str) -> None:
        """Attach `note` to the commit `sha` under `ref` (replacing an earlier one). A NUL (which no
        command line holds) is written as `\\x00`, a lone surrogate as its escape."""
        note = strictjson.escaped(note.replace("\0", "\\x00"))
        with self._lock:
            self._git("notes", f"--ref={ref}", "add", "-f", "-m", note, sha, env=self._env())

    def revert(self, shas: Sequence[str], message: str, trailers: Mapping[str, str | None]) -> Commit | None:
        """One new commit undoing the commits `shas` (given newest first). On a conflict the work
        tree is restored and RevertConflict names the commit and the files. The caller makes sure
        nothing else is uncommitted first."""
        with self._lock:
            for sha in shas:
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

    def undo_half_revert(self, files: Sequence[str]) -> None:
        """Put `files` back as HEAD has them and forget a revert in progress (REVERT_HEAD, the
        sequencer): what a revert killed before its commit left. Files HEAD does not have are
        removed. Nothing else of the work tree is touched."""
        with self._lock:
            with contextlib.suppress(GitError):
                self._git("revert", "--quit")
            for name in ("REVERT_HEAD", "CHERRY_PICK_HEAD"):
                with contextlib.suppress(FileNotFoundError):
                    (self.root / ".git" / name).unlink()
            if not files:
                return
            tracked = set(self._git("ls-tree", "-r", "--name-only", "-z", "HEAD", "--", *files).split("\0"))
            self._git("reset", "-q", "HEAD", "--", *files)
            present = [f for f in files if f in tracked]
            if present:
                self._git("checkout", "-q", "HEAD", "--", *present)
            for rel in files:
                if rel not in tracked:
                    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                        (self.root / rel).unlink()

    def keep(self, sha: str, ref: str) -> bool:
        """Point `ref` at `sha`, so that the commits stay in the repository; False when `sha` is gone."""
        with self._lock:
            try:
                self._git("update-ref", ref, sha)
            except GitError:
                return False
        return True

    def mark(self, message: str, trailers: Mapping[str, str | None]) -> Commit:
        """An empty commit on top of HEAD (its tree unchanged, whatever is staged), for a record
        that belongs in the history itself."""
        with self._lock:
            head = self._git("rev-parse", "HEAD").strip()
            tree = self._git("rev-parse", "HEAD^{tree}").strip()
            body = message_with(message, trailers)
            sha = self._git("commit-tree", tree, "-p", head, "-m", body, env=self._env()).strip()
            self._git("update-ref", "-m", f"evolve: {message}", "HEAD", sha, head)
            return Commit(sha, body, ())
