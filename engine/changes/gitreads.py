"""Reading the workspace's history: HEAD, the log with its trailers, a commit's patch, files and
parents, the notes beside commits (reviews, provenance)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import BinaryIO

import git

from engine.changes.gitprocess import GitError, GitProcess
from engine.changes.headref import head_from_files
from engine.changes.trailers import parse_trailers

NOTES_REF = "refs/notes/evolve-review"


class GitReads(GitProcess):
    """The history's reads; `GitStore` adds what changes it."""

    def head(self) -> str | None:
        """The commit HEAD names, None before the first commit. Read from `.git` itself when it has
        the plain layout (HEAD, a loose or packed branch ref), else asked of git: it is checked
        after every stage whose hooks changed nothing, several times per tool call, and a git
        process costs ~2.3 ms of CPU where reading the files costs ~0.1 ms."""
        with self._lock:
            found = head_from_files(self.root / ".git")
            if found is not None:
                return found
            try:
                return self._git("rev-parse", "HEAD").strip()
            except GitError:
                return None

    def log(self, limit: int = 100, paths: Sequence[str] = ()) -> list[dict[str, object]]:
        """Newest first: sha, time, message, trailers, files. With `paths`, only the commits that
        touch them, each with the files of `paths` it touched."""
        with self._lock:
            try:
                out = self._git(
                    "log",
                    f"-n{limit}",
                    "--name-only",
                    "-z",
                    "--format=%x1e%H%x1f%at%x1f%B%x1f",
                    *(["--", *paths] if paths else []),
                )
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

    def commit_of(self, rev: str) -> str:
        """The commit `rev` names; "" when there is none (git's refusal included): what a command or
        a route given a revision checks before it says there is no such commit."""
        try:
            return self.resolve(rev)
        except GitError:
            return ""

    def show_diff(self, sha: str, limit: int = 2_000_000) -> tuple[str, bool]:
        """The patch of one commit (against its parent; the root commit against nothing), cut at
        `limit` bytes: read as git writes it, git stopped at the cut."""
        with self._lock:
            out, cut = self._bounded(
                "show", "--format=", "--patch", "--no-color", "--no-ext-diff", sha, limit=limit
            )
        text = out.decode("utf-8", errors="replace")
        if cut and text.endswith("\ufffd"):  # a character cut in two at the end
            text = text[:-1]
        return text, cut

    def file_versions(
        self, sha: str, path: str, old_path: str, max_bytes: int = 8_000_000
    ) -> tuple[bytes | None, bytes | None]:
        """The bytes of `old_path` in the first parent of commit `sha` and of `path` in `sha`, the
        first `max_bytes` of each, read as git writes them (git stopped at the cut) (None where there
        is no such file: created, deleted, a root commit, or not a file)."""
        with self._lock:
            parent = self._git("rev-list", "--parents", "-n1", sha).split()[1:2]
            before = self._blob_start(parent[0], old_path, max_bytes) if parent else None
            return before, self._blob_start(sha, path, max_bytes)

    def _blob_start(self, rev: str, path: str, max_bytes: int) -> bytes | None:
        """The first `max_bytes` of the file `path` at `rev`, None when it is not a file there."""
        try:
            listing = self._git("ls-tree", "-z", rev, "--", path)
        except GitError:
            return None  # a path that leaves the repository
        meta, _, name = listing.rstrip("\0").partition("\t")
        parts = meta.split()
        if name != path or len(parts) != 3 or parts[1] != "blob":
            return None
        data, _cut = self._bounded("cat-file", "blob", parts[2], limit=max_bytes)
        return data

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

    def archive(self, sha: str, out: BinaryIO) -> None:
        """The whole tree of commit `sha` as a tar stream written to `out` (`git archive`): a version of
        the workspace to copy, read from the history without touching the work tree or the index."""
        with self._lock:
            try:
                self.repo.archive(out, treeish=sha, format="tar")
            except git.GitCommandError as exc:
                raise GitError(f"git archive {sha[:10]} failed in {self.root}: {exc.stderr.strip()}") from exc

    def with_trailer(self, key: str, value: str, since: str | None = None) -> str | None:
        """The newest commit (after `since`, when given) whose message has the trailer
        `Evolve-<key>: <value>`, or None."""
        pattern = f"^Evolve-{re.escape(key)}: {re.escape(value)}$"
        args = ["log", "-n1", "--format=%H", "-E", f"--grep={pattern}"]
        args.append(f"{since}..HEAD" if since else "HEAD")
        with self._lock:
            try:
                out = self._git(*args).strip()
            except GitError:
                return None
        return out or None

    def subject(self, sha: str) -> str:
        """The first line of a commit's message."""
        with self._lock:
            return self._git("log", "-1", "--format=%s", sha).strip()
