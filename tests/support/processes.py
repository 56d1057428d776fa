"""Processes of a test: whether one still runs, waiting for some to end, and a free port for one."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

PROC = Path("/proc")


def pid_alive(pid: int) -> bool:
    """Whether `pid` still runs: it exists and is not a zombie (dead, not yet reaped by its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process, but it exists
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        # Gone since os.kill; or a system without /proc, where os.kill's answer stands.
        return not (PROC / "self").is_dir()
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_gone(*pids: int, timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Wait until none of `pids` runs; False if one still does after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now; free to reuse by whoever binds first)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
