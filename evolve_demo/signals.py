"""How `evolve demo` ends on a signal: a Ctrl-C (SIGINT), a closed terminal (SIGHUP) or a kill
(SIGTERM), at any moment, stops everything the demo started and removes its directory, with one line.

The demo goes through three phases, and a signal means something different in each:

- starting (opencode, the engine, the scripted model): the start is abandoned where it is (the signal
  raises `Stopped` in the main thread; while a process is being started, once it is started and
  held), and the demo stops what it had started so far;
- the console shows: the console closes as `q` closes it, with the signal's exit status (in the
  console, the Ctrl-C key is the console's; a SIGINT comes from elsewhere, e.g. `kill -INT`);
- stopping: the signal is noted and otherwise ignored, so that the stop runs to its end: no process
  left behind, no directory half removed (a second Ctrl-C, or the terminal closing after `q`).

The exit status is 128 + the first signal's number (130, 129, 143), as a shell reports a program it
killed; 0 after `q`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.app import App

SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)
WHY: dict[int, str] = {
    signal.SIGINT: "interrupted",
    signal.SIGHUP: "the terminal closed",
    signal.SIGTERM: "terminated",
}


class Stopped(BaseException):
    """A signal ended the start (a BaseException, like KeyboardInterrupt: no `except Exception` on
    the way may swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(WHY.get(signum, f"signal {signum}"))
        self.signum = signum


class DemoSignals:
    def __init__(self) -> None:
        self.received: int | None = None
        self._phase = "starting"
        self._console: App[Any] | None = None

    def install(self) -> None:
        """Handle the signals from now on; one the parent made us ignore (`nohup`) stays ignored."""
        for sig in SIGNALS:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, self._handle)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """While the demo starts a process: a signal that comes meanwhile stops the demo once the
        process is started and held (raised inside Popen, it would leave the process running with
        nobody to stop it)."""
        if self._phase != "starting":
            yield
            return
        self._phase = "spawning"
        try:
            yield
        finally:
            if self._phase == "spawning":
                self._phase = "starting"
        if self.received is not None and self._phase == "starting":
            self._phase = "stopping"
            raise Stopped(self.received)

    def console_opens(self, console: App[Any]) -> None:
        self._console = console
        self._phase = "console"
        if self.received is not None:  # it came in between: close the console once it runs
            self._close_when_running(self.received)

    def stopping(self) -> None:
        self._phase = "stopping"

    @property
    def exit_status(self) -> int | None:
        return None if self.received is None else 128 + self.received

    @property
    def why(self) -> str:
        return WHY.get(self.received or 0, "stopped")

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.received is None:
            self.received = signum
        if self._phase == "starting":
            self._phase = "stopping"  # once: a second signal must not cut short the stop of the first
            raise Stopped(signum)
        if self._phase == "console" and self._console is not None:
            if self._console.is_running:
                self._console.exit(return_code=128 + signum)
            else:
                self._close_when_running(signum)

    def _close_when_running(self, signum: int) -> None:
        console = self._console
        if console is None:
            return

        def close() -> None:
            deadline = time.monotonic() + 60
            while not console.is_running and time.monotonic() < deadline:
                time.sleep(0.05)
            with contextlib.suppress(RuntimeError):  # it has closed already
                console.call_from_thread(console.exit, None, 128 + signum)

        threading.Thread(target=close, name="evolve-demo-close", daemon=True).start()
