"""Throwaway copies of a workspace, for a validation (a hook's test run against a candidate) and for a
replay (each version of a change): what goes in one, what never leaves one, and removing those
an engine that died left behind.

A copy leaves out the top-level `.git/` and `state/` (the history and the journal) and holds only
directories, regular files and links that stay inside it, so that nothing a hook does in the copy
can write outside it:

- a link whose target is inside the workspace becomes a relative link to the same place in the copy;
- a link that leads out of the workspace (or nowhere outside it) is left out, and reported;
- a FIFO, a socket or a device is left out (reading one could block the copy for ever).

Files are cloned where the file system shares blocks between copies (`FICLONE`: btrfs, XFS), and
copied otherwise.

Copies live in the temporary directory as `evolve-<kind>-<pid of the engine>-<random>` (mode 0700);
a starting engine removes those whose engine is gone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

SKIP_TOP: Final = frozenset({".git", "state"})
KINDS: Final = ("validate", "replay")
_FICLONE: Final = 0x40049409  # ioctl(dest, FICLONE, src): the two files share their blocks
_CHUNK: Final = 1024 * 1024


@dataclass
class Copied:
    """What a copy holds and what it left out (workspace-relative paths, with why)."""

    files: int = 0
    bytes: int = 0
    cloned: int = 0  # files that share their blocks with the original
    left_out: list[str] = field(default_factory=list)

    def notes(self, limit: int = 10) -> list[str]:
        shown = self.left_out[:limit]
        more = len(self.left_out) - len(shown)
        return shown + ([f"and {more} more"] if more > 0 else [])


def new_copy_dir(kind: str) -> Path:
    """A new, empty directory for a copy (mode 0700), named for its kind and this process."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of copy {kind!r}")
    return Path(tempfile.mkdtemp(prefix=f"evolve-{kind}-{os.getpid()}-"))


def copy_workspace(root: Path, target: Path) -> Copied:
    """Copy the workspace at `root` into `target` (created if missing) without its git history and
    runtime state, and with nothing in it that leads out of it (see the module's docstring)."""
    real_root = os.path.realpath(root)
    copied = Copied()
    clone = [True]  # cleared once the file system says it cannot
    target.mkdir(parents=True, exist_ok=True)
    pending: list[tuple[str, Path]] = [("", target)]
    while pending:
        rel_dir, into = pending.pop()
        source_dir = os.path.join(root, rel_dir) if rel_dir else str(root)
        try:
            entries = sorted(os.scandir(source_dir), key=lambda e: e.name)
        except OSError as exc:
            copied.left_out.append(f"{rel_dir or '.'}: cannot read ({exc.strerror or exc})")
            continue
        for entry in entries:
            if not rel_dir and entry.name in SKIP_TOP:
                continue
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            dest = into / entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISLNK(st.st_mode):
                _link(root, real_root, target, rel, dest, copied)
            elif stat.S_ISDIR(st.st_mode):
                dest.mkdir(exist_ok=True)
                with contextlib.suppress(OSError):
                    os.chmod(dest, stat.S_IMODE(st.st_mode) | 0o700)
                pending.append((rel, dest))
            elif stat.S_ISREG(st.st_mode):
                try:
                    _copy_file(entry.path, dest, st, clone, copied)
                except OSError as exc:
                    copied.left_out.append(f"{rel}: cannot copy ({exc.strerror or exc})")
            else:
                copied.left_out.append(f"{rel}: not a file, a directory or a link (left out)")
    return copied


def _link(root: Path, real_root: str, target: Path, rel: str, dest: Path, copied: Copied) -> None:
    """A link of the workspace, in the copy: to the same place in the copy when it stays inside the
    workspace, else left out."""
    link = os.path.join(root, rel)
    resolved = os.path.realpath(link)
    inside = resolved == real_root or resolved.startswith(real_root + os.sep)
    if not inside:
        try:
            shown = os.readlink(link)
        except OSError:
            shown = "?"
        copied.left_out.append(f"{rel}: a link that leads out of the workspace ({shown}), left out")
        return
    within = os.path.relpath(resolved, real_root)
    top = within.split(os.sep, 1)[0]
    if top in SKIP_TOP:
        copied.left_out.append(f"{rel}: a link into {top}/, which copies leave out")
        return
    place = target if within == "." else target / within
    os.symlink(os.path.relpath(place, dest.parent), dest)


def _copy_file(source: str, dest: Path, st: os.stat_result, clone: list[bool], copied: Copied) -> None:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    src = os.open(source, flags)
    try:
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            done = False
            if clone[0]:
                try:
                    fcntl.ioctl(out, _FICLONE, src)
                    done = True
                    copied.cloned += 1
                except OSError as exc:
                    if exc.errno in (errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.ENOSYS):
                        clone[0] = False
                    else:
                        raise
            if not done:
                with (
                    os.fdopen(os.dup(src), "rb", closefd=True) as reader,
                    os.fdopen(os.dup(out), "wb", closefd=True) as writer,
                ):
                    shutil.copyfileobj(reader, writer, _CHUNK)
            os.fchmod(out, stat.S_IMODE(st.st_mode))
            with contextlib.suppress(OSError):
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(src)
    copied.files += 1
    copied.bytes += st.st_size


def remove_stale_copies(tmp: Path | None = None) -> list[Path]:
    """Remove the copies left in the temporary directory by engines that died during a validation
    or a replay (a crash, kill -9): those of this user whose engine is gone. Returns what was
    removed."""
    base = Path(tmp or tempfile.gettempdir())
    removed: list[Path] = []
    prefixes = tuple(f"evolve-{kind}-" for kind in KINDS)
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        prefix = next((p for p in prefixes if entry.name.startswith(p)), None)
        if prefix is None:
            continue
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        try:
            if (
                not pid.isdigit()
                or _alive(int(pid))
                or entry.stat(follow_symlinks=False).st_uid != os.getuid()
                or not entry.is_dir(follow_symlinks=False)
            ):
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
