"""The `evolve` program's entry point (the installed script and `python -m engine`).

Importing the command line takes about half a second (httpx, the contract, the parser); a Ctrl-C or a
closed terminal in that time would print a KeyboardInterrupt traceback from deep inside an import.
Nothing has been started then, so until the imports are done those signals end the program at once
with one line (exit 128 + the signal's number, as a shell reports it); from then on a Ctrl-C is a
KeyboardInterrupt that each command handles (engine/cli/main.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

LEAVING: dict[int, str] = {
    signal.SIGINT: "interrupted",
    signal.SIGHUP: "the terminal closed",
    signal.SIGTERM: "terminated",
}


def _leave_while_starting(signum: int, frame: FrameType | None) -> None:
    del frame
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    with_name = f"evolve {command}" if command.isidentifier() else "evolve"
    # os.write: no buffered stream is touched from a signal handler (one may be mid-write).
    with contextlib.suppress(OSError):  # the terminal is gone
        os.write(2, f"{with_name}: {LEAVING.get(signum, 'stopped')}\n".encode())
    os._exit(128 + signum)


def main() -> int:
    # A signal the parent made us ignore (`nohup`, a background job of a script) stays ignored.
    before = {sig: signal.getsignal(sig) for sig in LEAVING}
    for sig, handler in before.items():
        if handler is not signal.SIG_IGN:
            signal.signal(sig, _leave_while_starting)
    from engine.cli.main import main as run

    for sig, handler in before.items():
        signal.signal(sig, handler)
    return run()
