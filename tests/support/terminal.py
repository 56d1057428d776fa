"""A real terminal for `evolve console`: a tmux server of its own (its socket in a temporary
directory) with one window; keys go in with send-keys, the screen comes out with capture-pane."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class Terminal:
    """One tmux server with one session `name` of `size` (columns, rows); its pane stays after the
    command exits (remain-on-exit), and there is no status line."""

    def __init__(
        self, tmp: Path, env: dict[str, str] | None = None, size: tuple[int, int] = (140, 40), name: str = "t"
    ) -> None:
        self.socket = tmp / "tmux.sock"
        self.conf = tmp / "tmux.conf"
        self.conf.write_text("set -g remain-on-exit on\nset -g status off\n")
        self.env = env
        self.size = size
        self.name = name

    def tmux(self, *args: str) -> str:
        """`tmux ARGS` on this server; its stdout. A non-zero exit fails with tmux's stderr."""
        proc = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", str(self.conf), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc.stdout

    def start(self, command: str, cwd: Path) -> None:
        cols, rows = self.size
        self.tmux(
            "new-session", "-d", "-s", self.name, "-x", str(cols), "-y", str(rows), "-c", str(cwd), command
        )

    def pane_pid(self) -> int:
        """The pid of the command in the pane."""
        return int(self.tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())

    def server_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "#{pid}").strip())

    def screen(self, styled: bool = False) -> str:
        """What the pane shows; `styled` keeps its colours as SGR escape sequences."""
        return self.tmux("capture-pane", *(["-e"] if styled else []), "-p", "-t", self.name)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def wait_for(
        self, what: str, check: Callable[[str], bool], timeout: float = 30.0, interval: float = 0.1
    ) -> str:
        """The screen, once `check(screen)` holds; after `timeout` s an AssertionError showing the screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if check(screen):
                return screen
            time.sleep(interval)
        raise AssertionError(f"the screen never showed {what} within {timeout:.0f} s; it shows:\n{screen}")

    def kill(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired, OSError):
            self.tmux("kill-server")
