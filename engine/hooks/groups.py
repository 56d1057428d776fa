"""Ending a run's processes: its process group, and what left the group (a new session, a daemon, a
fork that never ran another program) found by the tag every process of a run carries in its
environment (`EVOLVE_RUN`), at its timeout and when it ends; and, when an engine starts, what the
runs of an engine that died (kill -9, a crash) left running.

A tag says whose run it is: `<workspace key>.<engine pid>.<engine start time>.<n>`. The workspace
key tells a workspace's runs from another's; the engine's pid with its start time (in clock ticks
since boot, from `/proc`) tells a live engine from a dead one whose pid was handed out again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# Between SIGTERM to the group and SIGKILL, for hooks that clean up on SIGTERM.
KILL_GRACE_S = 1.0

RUN_TAG = "EVOLVE_RUN"
"""The environment variable that tags every process of one run (see the module's docstring)."""

TAG_PLACEHOLDER = "." * 80
"""What a warm start server is started with as its `EVOLVE_RUN`: each child it forks writes its
run's tag over it in place (engine/warm/zygote.py), so that `/proc/<pid>/environ` of the child and
of everything it forks, even without running another program, shows the tag."""

_PROC = "/proc"
_SCAN_RANGE = 4096  # pids created during a run looked at one by one; more: a scan of /proc
_KILL_ROUNDS = 20  # SIGKILL rounds for processes that fork while they are being ended
_numbers = itertools.count(1)


class Started(Protocol):
    """A started process, as ended here: an `asyncio.subprocess.Process`, or a hook forked warm
    (engine.warm.process.WarmProcess)."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...
    async def wait(self) -> int | None: ...


@dataclass(frozen=True)
class Tag:
    key: str  # the workspace's
    pid: int  # the engine's
    start: int  # the engine's start time, clock ticks since boot (0 where there is no /proc)
    number: int  # the run's, within that engine


def parse_tag(value: str) -> Tag | None:
    parts = value.split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
        return None
    return Tag(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), None when there is no such process."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat.rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


_OWN: dict[int, int] = {}  # pid -> its start time: this process's, read once (a fork reads again)


def own_start() -> int:
    pid = os.getpid()
    if pid not in _OWN:
        _OWN.clear()
        _OWN[pid] = process_start(pid) or 0
    return _OWN[pid]


def workspace_key(workspace: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(workspace))).hexdigest()[:12]


def run_owner(workspace: Path | None) -> str:
    """The tag prefix of the runs this process starts for `workspace` (None: for no workspace)."""
    key = workspace_key(workspace) if workspace is not None else "none"
    return f"{key}.{os.getpid()}.{own_start()}"


def new_tag(owner: str | None) -> str:
    return f"{owner or run_owner(None)}.{next(_numbers)}"


_loadavg: list[int] = []  # the fd of /proc/loadavg, opened once (read twice per hook run)


def last_pid() -> int | None:
    """The pid the kernel handed out last (in this pid namespace), from /proc/loadavg; None
    without /proc. Read with pread from a descriptor kept open: a file object per read (two per
    hook run) cost more than the rest of this."""
    try:
        if not _loadavg:
            _loadavg.append(os.open(f"{_PROC}/loadavg", os.O_RDONLY | os.O_CLOEXEC))
        return int(os.pread(_loadavg[0], 256, 0).split()[4].split(b"/")[-1])
    except (OSError, ValueError, IndexError):
        return None


def _read_all(path: str) -> bytes:
    """The whole of a small file, without a file object (raises OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _tag_of(pid: int | str) -> str | None:
    """The `EVOLVE_RUN` value in the environment process `pid` started with, or None."""
    try:
        environ = _read_all(f"{_PROC}/{pid}/environ")
    except OSError:
        return None
    name = RUN_TAG.encode() + b"="
    at = 0 if environ.startswith(name) else environ.find(b"\0" + name) + 1
    if at == 0 and not environ.startswith(name):
        return None
    at += len(name)
    end = environ.find(b"\0", at)
    return environ[at : end if end >= 0 else len(environ)].decode("ascii", "replace")


def _candidates(since: int | None) -> list[int]:
    """The pids to look at for the processes of a run that began when the kernel's last pid was
    `since` (None: every process). Pids are handed out in increasing order until they wrap around:
    a run's processes are above `since`, unless the pids wrapped since (then all are looked at)."""
    now = last_pid() if since is not None else None
    if since is not None and now is not None and since <= now and now - since <= _SCAN_RANGE:
        return list(range(since + 1, now + 1))
    found: list[int] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(_PROC):
            if entry.name.isdigit():
                found.append(int(entry.name))
    if since is not None and now is not None and since <= now:
        return [pid for pid in found if pid > since]
    return found


def tagged(tag: str, since: int | None = None) -> list[int]:
    """The processes (of this user) whose environment carries `EVOLVE_RUN=<tag>`: everything a run
    started, also in another process group or session, unless it cleared its environment. `since`:
    the kernel's last pid when the run began (only newer processes can be its)."""
    me = os.getpid()
    return [pid for pid in _candidates(since) if pid != me and _tag_of(pid) == tag]


def leftovers(workspace: Path) -> dict[int, str]:
    """pid -> tag of the processes that runs of a dead engine of `workspace` left running: tagged
    with the workspace's key and an engine (pid and start time) that no longer runs."""
    key = workspace_key(workspace)
    alive: dict[tuple[int, int], bool] = {}
    found: dict[int, str] = {}
    for pid in _candidates(None):
        value = _tag_of(pid)
        tag = parse_tag(value) if value else None
        if tag is None or tag.key != key or pid == os.getpid():
            continue
        engine = (tag.pid, tag.start)
        if engine not in alive:
            alive[engine] = process_start(tag.pid) == tag.start if tag.start else _exists(tag.pid)
        if not alive[engine]:
            found[pid] = value or ""
    return found


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_leftovers(workspace: Path, grace: float = KILL_GRACE_S) -> dict[int, str]:
    """End what runs of a dead engine of `workspace` left running (SIGTERM, SIGKILL after `grace`
    seconds, again until none is left). Returns pid -> tag of those found."""
    found = leftovers(workspace)
    if not found:
        return found
    _signal(list(found), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_running(pid) for pid in found):
        time.sleep(0.02)
    for _ in range(_KILL_ROUNDS):
        left = leftovers(workspace)
        if not left:
            break
        found.update(left)
        _signal(list(left), signal.SIGKILL)
        time.sleep(0.01)
    return found


def _running(pid: int) -> bool:
    """Whether `pid` runs (exists and is not a zombie)."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return _exists(pid) and not os.path.isdir(_PROC)
    return state not in (b"Z", b"X")


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _group_exists(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_tagged(tag: str | None, sig: int, since: int | None) -> list[int]:
    if tag is None:
        return []
    found = tagged(tag, since)
    _signal(found, sig)
    return found


def _kill_tagged_until_gone(tag: str | None, since: int | None) -> None:
    """SIGKILL the tagged processes, and again those that forked meanwhile, until none is left."""
    for _ in range(_KILL_ROUNDS):
        if not _kill_tagged(tag, signal.SIGKILL, since):
            return
        time.sleep(0.005)


async def terminate_group(proc: Started, tag: str | None = None, since: int | None = None) -> None:
    """SIGTERM the whole process group (and the processes tagged `tag` that left it), then SIGKILL
    them after a grace period. `since`: the kernel's last pid when the run began."""
    _kill_group(proc.pid, signal.SIGTERM)
    await asyncio.to_thread(_kill_tagged, tag, signal.SIGTERM, since)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
    # Grandchildren may ignore SIGTERM or outlive the leader: always finish the group off.
    _kill_group(proc.pid, signal.SIGKILL)
    await asyncio.to_thread(_kill_tagged_until_gone, tag, since)
    await proc.wait()


async def end_remains(proc: Started, tag: str | None, since: int | None) -> bool:
    """After a run ended by itself: end what it left running, in its process group or out of it
    (SIGTERM, SIGKILL after a grace period). True when something was left. Costs a look at the
    processes created since the run began, nothing more, when nothing was left."""
    left = _group_exists(proc.pid) or bool(tag is not None and tagged(tag, since))
    if left:
        await terminate_group(proc, tag, since)
    return left
