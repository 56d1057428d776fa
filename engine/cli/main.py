"""The `evolve` command line. Output that a program reads is JSON; messages for people go to stderr.
The parser (parser.py) names each command's function (commands.py, replay.py, doctor.py)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Sequence

from engine.cli.client import EngineUnavailable
from engine.cli.common import UsageError
from engine.cli.parser import LOG_LEVELS, build_parser

__all__ = ["build_parser", "main"]

NEEDS_GIT = frozenset({"init", "stage", "tools", "call", "serve", "doctor", "demo", "console"})
"""The commands that work on a workspace's git repository (GitPython runs the git program)."""


def git_missing() -> bool:
    """Whether the git program is missing: GitPython cannot even be imported without it."""
    return shutil.which(os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git") is None


def log_level(given: str | None) -> str:
    """The log level from --log-level, else $EVOLVE_LOG_LEVEL, else WARNING; UsageError naming where a
    bad one came from."""
    source, value = (
        ("--log-level", given)
        if given is not None
        else ("EVOLVE_LOG_LEVEL", os.environ.get("EVOLVE_LOG_LEVEL"))
    )
    if not value:
        return "WARNING"
    if value.strip().upper() not in LOG_LEVELS:
        raise UsageError(f"{source} {value!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return value.strip().upper()


def _printable_output() -> None:
    """Text the engine keeps may hold what the terminal's encoding cannot (a lone surrogate a client
    sent): printed escaped (`\\ud800`) rather than failing the command."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    _printable_output()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        level = log_level(args.log_level)
    except UsageError as exc:
        print(f"evolve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, format="evolve: %(levelname)s %(name)s: %(message)s")
    if args.command in NEEDS_GIT and not getattr(args, "attach", None) and git_missing():
        print(
            f"evolve {args.command}: git is not installed (or not on PATH); install it "
            "(Debian/Ubuntu: apt-get install git) and run again",
            file=sys.stderr,
        )
        return 1
    try:
        code: int = args.func(args)
        return code
    except UsageError as exc:
        print(f"evolve {args.command}: {exc}", file=sys.stderr)
        return 2
    except EngineUnavailable as exc:
        print(f"evolve {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `evolve tools | head`
        sys.stderr.close()
        return 0
