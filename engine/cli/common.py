"""What the commands share: how a mistake in a command line is told, the workspace a command means,
JSON arguments and output, an engine in this process for one command, and the running engine."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.client import EngineClient
from engine.protocol.workspace import resolve_workspace

if TYPE_CHECKING:
    from engine.runtime import Engine


class UsageError(Exception):
    """A mistake in how the command was called: printed without a traceback, exit status 2."""


def directory(path: str, option: str) -> Path:
    """`path` as an absolute directory that exists; UsageError otherwise (nothing is created)."""
    found = Path(path).expanduser().absolute()
    if not found.is_dir():
        raise UsageError(f"{option} {found}: no such directory (check the path; nothing was created)")
    return found


def print_json(value: Any) -> None:
    """`value` as indented JSON; non-ASCII text as it is, unless the value holds text UTF-8 cannot
    hold (a lone surrogate): then all of it \\u-escaped, which any JSON reader turns back."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, indent=2, ensure_ascii=True, default=str)
    sys.stdout.write(text + "\n")


def workspace(args: argparse.Namespace, must_exist: bool = True) -> Path:
    root = resolve_workspace(getattr(args, "workspace", None) or getattr(args, "dir", None))
    if must_exist and not root.is_dir():
        raise UsageError(f"workspace {root} does not exist; create one with: evolve init {root}")
    return root


def json_arg(text: str | None, file: str | None, what: str) -> Any:
    if text is not None and file is not None:
        raise UsageError(f"give {what} either inline or as a file, not both")
    if file is not None:
        try:
            text = Path(file).read_text(encoding="utf-8") if file != "-" else sys.stdin.read()
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror}") from exc
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from exc


async def with_engine(root: Path, work: Callable[[Engine], Awaitable[int]]) -> int:
    from engine.runtime import Engine  # only the commands that run hooks need the engine itself

    engine = Engine(root, warm_start=False)  # one command: an interpreter kept ready would go unused
    try:
        await engine.start()
        result: int = await work(engine)
        return result
    finally:
        await engine.close()


def running_client(args: argparse.Namespace, timeout: float = 30.0) -> EngineClient | None:
    """The engine the command talks to: `--attach URL --token T`, else the workspace's running one."""
    if getattr(args, "attach", None):
        if not args.token:
            raise UsageError("--attach needs --token")
        return EngineClient(args.attach, args.token, timeout)
    return EngineClient.for_workspace(workspace(args), timeout)
