"""Processes of a test: whether one still runs, waiting for some to end, ending one, and a free port for one."""

from __future__ import annotations

import os
import socket
import subprocess
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


def end(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace: float = 10.0) -> None:
    """SIGTERM, and SIGKILL if `proc` has not exited within `grace` seconds; nothing if it has ended."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now; free to reuse by whoever binds first)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_in(directory: Path) -> list[int]:
    """Pids of the processes whose working directory is inside `directory` (what a command started
    there: engines, hooks, opencode)."""
    found = []
    for proc in PROC.iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if Path(os.readlink(proc / "cwd")).is_relative_to(directory) and pid_alive(int(proc.name)):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def importing(pid: int, timeout: float = 30.0) -> bool:
    """Wait until the Python process `pid` is importing the command line: it has loaded `_ssl` (httpx
    imports it, early in `import engine.cli.main` and long before a command runs). False if it
    exited or never did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        try:
            if "/_ssl." in (PROC / str(pid) / "maps").read_text():
                return True
        except OSError:
            return False
        time.sleep(0.002)
    return False


def child_of(pid: int) -> int | None:
    """A child process of `pid` (the command a shell started), or None."""
    for proc in PROC.iterdir():
        if proc.name.isdigit():
            try:
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    return int(proc.name)
            except (OSError, IndexError, ValueError):
                continue
    return None
