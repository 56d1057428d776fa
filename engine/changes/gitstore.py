"""The workspace's git history, through GitPython.

Every engine commit carries machine-readable trailers saying what made it, for example
`Evolve-Origin: tool`, `Evolve-Tool: evolve_hook_edit`, `Evolve-Session: ses_1`, `Evolve-Call: call_7`.
The runtime state directory (`state/`) is excluded through `.git/info/exclude`, so the workspace's
own `.gitignore` is never touched.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from engine.changes import stalelocks
from engine.workspace.layout import TEMP_SUFFIX

# state/: the engine's runtime state; *.evolve-tmp: a file being written atomically (never a change).
EXCLUDES = ("/state/", f"*{TEMP_SUFFIX}")
# Entries a change check looks at before it leaves the answer to git (a tree that big costs git a
# scan too).
SCAN_LIMIT = 5000
IDENTITY = {"name": "evolve", "email": "evolve@localhost"}
TRAILER_PREFIX = "Evolve-"
_LOCK_RETRIES = 100
_STALE_CHECK_AFTER = 5  # retries (about 0.3 s) before a lock is examined as maybe stale
_LOCK_PATH = re.compile(r"Unable to create '([^']+\.lock)': File exists")
_SHA = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object names


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
        """The commit HEAD names, None before the first commit. Read from `.git` itself when it has
        the plain layout (HEAD, a loose or packed branch ref), else asked of git: it is checked
        after every stage whose hooks changed nothing, several times per tool call, and a git
        process costs ~2.3 ms of CPU where reading the files costs ~0.1 ms."""
        with self._lock:
            found = self._head_from_files()
            if found is not None:
                return found
            try:
                return self._git("rev-parse", "HEAD").strip()
            except GitError:
                return None

    def _head_from_files(self) -> str | None:
        """HEAD as `git rev-parse HEAD` resolves it, or None for any layout this does not read (a
        `.git` file, reftable, a symbolic ref chain, an unborn branch): git decides those."""
        git_dir = self.root / ".git"
        try:
            head = (git_dir / "HEAD").read_bytes().strip()
            if (git_dir / "reftable").exists():
                return None
        except OSError:  # .git is a file (a worktree, a submodule) or unreadable
            return None
        if _SHA.fullmatch(head):
            return head.decode()
        if not head.startswith(b"ref: "):
            return None
        ref = head[5:].strip()
        if not ref.startswith(b"refs/") or b".." in ref.split(b"/"):
            return None
        try:
            value = (git_dir / ref.decode("utf-8")).read_bytes().strip()
        except FileNotFoundError:
            value = None
        except (OSError, UnicodeDecodeError):
            return None
        if value is not None:
            return value.decode() if _SHA.fullmatch(value) else None
        try:
            packed = (git_dir / "packed-refs").read_bytes()
        except OSError:
            return None
        for line in packed.splitlines():
            sha, _, name = line.partition(b" ")
            if name == ref and _SHA.fullmatch(sha):
                return sha.decode()
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

    def file_versions(
        self, sha: str, path: str, old_path: str, max_bytes: int = 8_000_000
    ) -> tuple[bytes | None, bytes | None]:
        """The bytes of `old_path` in the first parent of commit `sha` and of `path` in `sha`, the
        first `max_bytes` of each (None where there is no such file: created, deleted, a root
        commit, or not a file)."""

        def blob(tree: git.Tree, rel: str) -> bytes | None:
            try:
                found = tree / rel
            except KeyError:
                return None
            if found.type != "blob":
                return None
            data: bytes = found.data_stream.read(min(found.size, max_bytes))
            return data

        with self._lock:
            commit = self.repo.commit(sha)
            before = blob(commit.parents[0].tree, old_path) if commit.parents else None
            return before, blob(commit.tree, path)

    def reviews(self, limit: int = 1000) -> dict[str, str]:
        """Commit sha -> review note, for the reviewed commits among the newest `limit`."""
        return self.notes(NOTES_REF, limit)

    def notes(self, ref: str, limit: int = 1000) -> dict[str, str]:
        """Commit sha -> its note under `ref`, for the newest `limit` commits that have one (one git
        call, however many notes there are)."""
        with self._lock:
            try:
                out = self._git("log", f"-n{limit}", f"--notes={ref}", "--format=%x1e%H%x1f%N")
            except GitError:
                return {}
        found: dict[str, str] = {}
        for record in out.split("\x1e"):
            sha, sep, note = record.partition("\x1f")
            if sep and note.strip():
                found[sha.strip()] = note.strip()
        return found

    def add_review(self, sha: str, note: str) -> None:
        """Record a review as a git note, beside the history (the commit itself is not rewritten)."""
        self.add_note(NOTES_REF, sha, note)

    def add_note(self, ref: str, sha: str, note: str) -> None:
        """Attach `note` to the commit `sha` under `ref` (replacing an earlier one)."""
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

    def committed_file(self, rel: str) -> tuple[int, bytes] | None:
        """The file mode (0o644 or 0o755) and content of `rel` as HEAD has it, or None when HEAD has
        no such file (or there is no HEAD)."""
        with self._lock:
            try:
                listing = self._git("ls-tree", "-z", "HEAD", "--", rel)
            except GitError:
                return None
            meta, _, name = listing.rstrip("\0").partition("\t")
            parts = meta.split()
            if name != rel or len(parts) != 3 or parts[1] != "blob":
                return None
            content = self.repo.git.execute(
                ["git", "cat-file", "blob", parts[2]], stdout_as_string=False, strip_newline_in_stdout=False
            )
        assert isinstance(content, bytes)
        return (0o755 if parts[0] == "100755" else 0o644), content

    def is_ancestor(self, old: str, new: str) -> bool:
        """Whether commit `old` is in the history of `new` (False when `old` is unknown)."""
        with self._lock:
            status, _out, _err = self.repo.git.execute(
                ["git", "merge-base", "--is-ancestor", old, new],
                with_extended_output=True,
                with_exceptions=False,
            )
        return status == 0

    def lost_commits(self, old: str, new: str | None, limit: int = 50) -> list[tuple[str, str]]:
        """(sha, subject) of the commits in the history of `old` that are not in that of `new`,
        newest first, at most `limit`; empty when `old` is no longer known."""
        args = ["log", f"-n{limit}", "--format=%H%x1f%s", old]
        if new:
            args += ["--not", new]
        with self._lock:
            try:
                out = self._git(*args)
            except GitError:
                return []
        return [(line.split("\x1f", 1)[0], line.split("\x1f", 1)[-1]) for line in out.splitlines() if line]

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
            body = message
            extra = trailers_text(trailers)
            if extra:
                body += "\n\n" + extra
            sha = self._git("commit-tree", tree, "-p", head, "-m", body, env=self._env()).strip()
            self._git("update-ref", "-m", f"evolve: {message}", "HEAD", sha, head)
            return Commit(sha, body, ())

    def later_commits(self, sha: str, files: Sequence[str]) -> list[str]:
        """The commits after `sha` (newest first) that touch any of `files`."""
        if not files:
            return []
        with self._lock:
            out = self._git("log", "--format=%H", f"{sha}..HEAD", "--", *files)
        return [line for line in out.split() if line]

    def parent_is_root(self, sha: str) -> bool:
        with self._lock:
            return not self._git("rev-list", "--parents", "-n1", sha).split()[1:]

    def first_parent(self, sha: str) -> str | None:
        """The commit `sha` was made on (its first parent), None for a root commit."""
        with self._lock:
            parents = self._git("rev-list", "--parents", "-n1", sha).split()[1:]
        return parents[0] if parents else None

    def files_changed(self, sha: str) -> list[str]:
        """The paths a commit changed against its first parent (all of them for a root commit)."""
        parent = self.first_parent(sha)
        with self._lock:
            if parent is None:
                out = self._git("ls-tree", "-r", "--name-only", "-z", sha)
            else:
                out = self._git("diff", "--name-only", "--no-renames", "-z", parent, sha)
        return [f for f in out.split("\0") if f]

    def file_at(self, rev: str, path: str) -> tuple[int, bytes] | None:
        """A file as it was at `rev`: its git mode (0o100755, 0o120000 for a link, ...) and its
        bytes (a link's target), or None when it did not exist there."""
        with self._lock:
            try:
                blob = self.repo.commit(rev).tree / path
            except KeyError:
                return None
            if blob.type != "blob":
                return None
            data: bytes = blob.data_stream.read()
            return int(blob.mode), data

    def subject(self, sha: str) -> str:
        """The first line of a commit's message."""
        with self._lock:
            return self._git("log", "-1", "--format=%s", sha).strip()
