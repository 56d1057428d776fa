"""Which Python a hook's `#!` line starts, as the kernel (and env) would find it: whether a hook can
start warm at all, and what a ready interpreter depends on (the files it resolves to, the cwd)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

HEADER_LIMIT = 256  # the kernel reads no more of a `#!` line
_PYTHON = re.compile(rb"python[0-9.]*")
# Variables whose relative values the interpreter resolves against its cwd at start-up.
_PATH_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONPYCACHEPREFIX")


@dataclass(frozen=True)
class Interpreter:
    """How a `#!` line starts Python: the file the kernel runs and, for `#!/usr/bin/env python3`,
    the name env looks up on PATH."""

    line: bytes
    program: str
    lookup: str | None = None


def python_interpreter(line: bytes) -> Interpreter | None:
    """The Python a `#!` line starts, or None when it starts something else (or env with options
    that change the environment)."""
    if not line.startswith(b"#!"):
        return None
    command = line[2:].strip()
    words = command.split()
    if not words:
        return None
    program, argument = words[0], command[len(words[0]) :].strip()
    if _PYTHON.fullmatch(os.path.basename(program)):
        return Interpreter(line, os.fsdecode(program))
    if os.path.basename(program) != b"env":
        return None
    # The kernel passes everything after the interpreter as one argument: env takes it as a program
    # name, unless it starts with -S, which splits it into words.
    args = argument.split() if argument.startswith(b"-S ") else [argument]
    if args and args[0] == b"-S":
        args = args[1:]
    if not args or not _PYTHON.fullmatch(os.path.basename(args[0])) or b"=" in args[0]:
        return None
    if any(not a.startswith(b"-") for a in args[1:]):
        return None  # more than python's own options
    return Interpreter(line, os.fsdecode(program), os.fsdecode(args[0]))


def first_line(path: str) -> bytes | None:
    """The `#!` line of a file as the kernel reads it, or None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_LIMIT)
    except OSError:
        return None
    return head.split(b"\n", 1)[0]


def signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_size)


def is_script(path: str | None) -> bool:
    if path is None:
        return False
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def resolve(interpreter: Interpreter, env: Mapping[str, str], cwd: str) -> str | None:
    """The file a `#!` line leads to in this environment and cwd (python, or a shim), if any."""
    if interpreter.lookup is None:
        return interpreter.program
    if "/" in interpreter.lookup:
        return os.path.join(cwd, interpreter.lookup)
    path = os.pathsep.join(os.path.join(cwd, p) for p in env.get("PATH", os.defpath).split(os.pathsep))
    return shutil.which(interpreter.lookup, path=path)


def relative(interpreter: Interpreter, env: Mapping[str, str]) -> bool:
    """Whether the interpreter's start-up depends on the cwd (relative PATH or Python paths)."""
    values = [env.get(v, "") for v in _PATH_VARIABLES]
    if interpreter.lookup is not None:
        values.append(env.get("PATH", os.defpath))
    return any(p and not os.path.isabs(p) for v in values for p in v.split(os.pathsep))


def shown(interpreter: Interpreter) -> str:
    """The `#!` line, for the log."""
    return interpreter.line.decode("utf-8", "replace")
