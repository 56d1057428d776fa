"""What the console tells the operator to do next while nothing can happen: no opencode is connected
to the agent, so no hook runs and the heartbeat waits. It names the commands that connect this
workspace's agent (the plugin into an opencode project, opencode started there, a real model for it)
and the demo, written as the operator's shell runs evolve.

Pure: plain values in, text out (no widget), so that what the screen says is tested on plain data.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

from .model import ConsoleModel

PROJECT = "~/code/myproject"  # the example opencode project the commands name (any directory will do)
COMMAND = "bold"  # how a command stands out from the words around it


@dataclass(frozen=True)
class Evolve:
    """How the operator's shell runs evolve: `command`, once `setup` ran (a line, or None)."""

    command: str = "evolve"
    setup: str | None = None


def evolve_command(
    argv0: str | None = None, executable: str = sys.executable, *, activate: bool = True
) -> Evolve:
    """How the operator's shell runs this evolve: `evolve` when its PATH finds this very program;
    else `evolve` once its virtual environment is activated (./scripts/run.sh runs .venv/bin/evolve
    without it on PATH); else the program's full path; else `python -m engine` with the Python that
    runs the console. `argv0`: how this process was started (default: `sys.argv[0]`); `activate`:
    whether a line that activates the virtual environment may come first (not in a one-line hint)."""
    started = argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")
    program = Path(started).absolute() if started else None
    if program is None or program.name != "evolve":  # `python -m engine console`, or a test
        program = Path(executable).parent / "evolve"
        if not program.is_file():
            return Evolve(f"{shlex.quote(executable)} -m engine")
    on_path = shutil.which("evolve")
    with contextlib.suppress(OSError):
        if on_path is not None and os.path.samefile(on_path, program):
            return Evolve()
    script = program.parent / "activate"
    if activate and script.is_file():
        return Evolve(setup=f"source {shlex.quote(str(script))}")
    return Evolve(shlex.quote(str(program)))


def without_opencode(model: ConsoleModel) -> bool:
    """Whether the engine answers and says that no opencode is connected to it (while it does not
    answer, or before it said, the console does not know)."""
    return model.connected and model.status is not None and not model.status.opencode


# What a view that waits for opencode says, where it has no room for the commands themselves.
SEE_VIEW_1 = "No opencode is connected to this agent yet: view 1 says how to connect one."


def connect_steps(workspace: str, evolve: Evolve) -> Text:
    """How to connect an opencode to the agent of `workspace`, give it a real model, or see the
    demo first: the exact commands, in order, as the operator's shell runs them."""
    run = evolve.command
    text = Text()
    text.append("No opencode is connected", style="bold")
    text.append(": until one is, the agent's hooks do not run and its heartbeat waits.\n")
    text.append(
        "Connect one: the evolve plugin into an opencode project (any directory), then opencode there:\n"
    )
    if evolve.setup:
        _command(text, evolve.setup, "puts evolve on your PATH")
    _command(text, f"mkdir -p {PROJECT}")
    _command(text, f"{run} shim install --workspace {shlex.quote(workspace)} --project {PROJECT}")
    _command(text, f'cd {PROJECT} && "$({run} opencode install)"', "installs opencode first if needed")
    text.append("A real model, any OpenAI-compatible server (before you start opencode):\n")
    _command(text, f"{run} opencode model --project {PROJECT} --base-url URL --model NAME --api-key-env VAR")
    text.append("Or first see a living agent, offline, in a throwaway directory: ")
    text.append(f"{run} demo", style=COMMAND)
    return text


def _command(text: Text, command: str, note: str = "") -> None:
    text.append("  ")
    text.append(command, style=COMMAND)
    if note:
        text.append(f"   ({note})", style="dim")
    text.append("\n")
