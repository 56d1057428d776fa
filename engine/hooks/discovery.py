"""Finding hook scripts in `hooks/` and what they register through the `discover` stage."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.protocol.stages import HookProtocol
from engine.tools.schema import ToolSpecError, tool_schema

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class HookFile:
    name: str  # file name inside hooks/, e.g. "notes.py"
    path: Path

    @property
    def stem(self) -> str:
        """The default registration name: the file name without its last extension."""
        base, dot, _ext = self.name.rpartition(".")
        return base if dot and base else self.name


@dataclass(frozen=True)
class Target:
    """A hook a stage is dispatched to, and the protocol it is treated as."""

    hook: HookFile
    protocol: HookProtocol = HookProtocol.OPENCODE_EVOLVE


@dataclass(frozen=True)
class Skipped:
    name: str
    reason: str


@dataclass
class HookTool:
    """A tool a hook registered: exposed to the agent as `<registration name>_<short>`."""

    hook: str  # registration name
    file: str  # hook file name
    short: str
    description: str
    parameters: dict[str, Any]
    schema: dict[str, Any]
    permission: Any = None

    @property
    def name(self) -> str:
        return f"{self.hook}_{self.short}"


@dataclass
class Registration:
    file: HookFile
    name: str
    test: str | None = None
    tools: list[HookTool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # discover failure, tools skipped and why
    run_id: str | None = None
    # Stages the hook says it handles (discover's optional `stages`); None: every stage.
    stages: frozenset[str] | None = None
    # The protocol the hook says it speaks (evolve's `protocol` key in discover), if it says.
    answered_protocol: str | None = None
    # The protocol it is treated as, why, and what is wrong with its declared stages
    # (engine.hooks.protocols).
    protocol: HookProtocol = HookProtocol.OPENCODE_EVOLVE
    protocol_reason: str = ""
    protocol_settle: str | None = None  # the config line that settles an ambiguous choice
    stage_warnings: list[str] = field(default_factory=list)

    def handles(self, stage: str) -> bool:
        return self.stages is None or stage in self.stages


def _sort_key(name: str) -> bytes:
    # The original host sorted with JavaScript's default comparison: UTF-16 code units.
    return name.encode("utf-16-be", errors="surrogatepass")


def scan_hooks(hooks_dir: Path) -> tuple[list[HookFile], list[Skipped]]:
    """Executable regular files in `hooks_dir`, sorted; names starting with `.` or `__` are ignored.

    An entry that cannot be used (not executable, a directory, a dangling link, unreadable) is
    reported in the second list and does not affect the others.
    """
    try:
        names = os.listdir(hooks_dir)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [Skipped(".", f"cannot list {hooks_dir}: {exc.strerror or exc}")]
    found: list[HookFile] = []
    skipped: list[Skipped] = []
    for name in sorted(names, key=_sort_key):
        if name.startswith(".") or name.startswith("__"):
            continue
        path = hooks_dir / name
        try:
            st = os.stat(path)
        except FileNotFoundError:
            skipped.append(Skipped(name, "dangling symbolic link"))
            continue
        except OSError as exc:
            skipped.append(Skipped(name, f"cannot stat: {exc.strerror or exc}"))
            continue
        if stat.S_ISDIR(st.st_mode):
            skipped.append(Skipped(name, "a directory, not a hook script"))
        elif not stat.S_ISREG(st.st_mode):
            skipped.append(Skipped(name, "not a regular file"))
        elif not st.st_mode & 0o111:
            skipped.append(Skipped(name, f"not executable (run: chmod +x hooks/{name})"))
        else:
            found.append(HookFile(name, path))
    return found, skipped


def registration_from(file: HookFile, result: dict[str, Any] | None, error: str | None) -> Registration:
    """Build a hook's registration from its discover output; defaults (no test, no tools) on failure."""
    reg = Registration(file=file, name=file.stem)
    if error is not None or result is None:
        reg.problems.append(f"discover failed: {error}; registered with defaults (no test, no tools)")
        return reg
    name = result.get("name")
    if isinstance(name, str) and name:
        reg.name = name
    elif name is not None:
        reg.problems.append(f"discover: 'name' must be a non-empty string, got {name!r}; using {file.stem!r}")
    test = result.get("test")
    if isinstance(test, str) and test:
        reg.test = test
    elif test is not None:
        reg.problems.append(f"discover: 'test' must be a file name in tests/, got {test!r}; no test")
    stages = result.get("stages")
    if isinstance(stages, list) and all(isinstance(x, str) for x in stages):
        reg.stages = frozenset(stages)
    elif stages is not None:
        reg.problems.append(f"discover: 'stages' must be a list of stage names, got {stages!r}; every stage")
    protocol = result.get("protocol")
    if protocol in tuple(HookProtocol):
        reg.answered_protocol = str(protocol)
    elif protocol is not None:
        choices = ", ".join(f'"{p.value}"' for p in HookProtocol)
        reg.problems.append(f"discover: 'protocol' must be one of {choices}, got {protocol!r}; ignored")
    tools = result.get("tools", [])
    if not isinstance(tools, list):
        reg.problems.append(f"discover: 'tools' must be a list, got {type(tools).__name__}; no tools")
        tools = []
    for index, spec in enumerate(tools):
        tool = _tool_from(reg, spec, index)
        if tool is not None:
            reg.tools.append(tool)
    return reg


def _tool_from(reg: Registration, spec: object, index: int) -> HookTool | None:
    if not isinstance(spec, dict):
        reg.problems.append(f"tool #{index + 1}: must be an object, got {type(spec).__name__}; skipped")
        return None
    short = spec.get("name")
    if not isinstance(short, str) or not short:
        reg.problems.append(f"tool #{index + 1}: 'name' must be a non-empty string; skipped")
        return None
    full = f"{reg.name}_{short}"
    if not TOOL_NAME.fullmatch(full):
        reg.problems.append(
            f"tool {full!r}: a tool name may use only letters, digits, _ and - (64 at most); skipped"
        )
        return None
    description = spec.get("description")
    parameters = spec.get("parameters") or {}
    try:
        schema = tool_schema(parameters)
    except ToolSpecError as exc:
        reg.problems.append(f"tool {full!r}: {exc}; skipped")
        return None
    return HookTool(
        hook=reg.name,
        file=reg.file.name,
        short=short,
        description=description if isinstance(description, str) else "",
        parameters=parameters if isinstance(parameters, dict) else {},
        schema=schema,
        permission=spec.get("permission"),
    )
