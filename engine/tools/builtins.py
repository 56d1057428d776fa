"""The 13 builtin `evolve_*` tools: the agent's way to read and change its own prompts and hooks
(docs/hooks.md, "Builtin tools"). Texts and messages follow the original host so that agents and tests
written for it keep working. Plus the three heartbeat tools hcp asks a host to give its agent, offered
when the workspace has an hcp hook (`HEARTBEAT_BUILTINS`)."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.tools.host import CallContext, EditFailed, ToolFailed, ToolHost
from engine.tools.schema import SCHEMA_DIALECT
from engine.workspace.layout import PROMPT_CONTRACT, PROMPT_FILES
from engine.workspace.paths import PathRefused, safe_path

DEFAULT_READ_LIMIT = 2000

_PROMPT_PARAM = {
    "type": "string",
    "enum": list(PROMPT_FILES),
    "description": "prompt filename in prompts/. must be one of the contract files:\n"
    + "\n".join(f"  - {f}: {stage} stage default" for stage, f in PROMPT_CONTRACT.items()),
}
_HOOK_PARAM = {"type": "string", "description": "hook filename in hooks/ (e.g. from evolve_hook_list)"}
_OFFSET = {"type": "number", "description": "line number to start reading from (1-indexed)"}
_LIMIT = {"type": "number", "description": f"maximum number of lines to read (default {DEFAULT_READ_LIMIT})"}
_OLD = {"type": "string", "description": "the exact text to replace"}
_NEW = {"type": "string", "description": "the text to replace it with"}
_ALL = {"type": "boolean", "description": "replace every occurrence of oldString (default false)"}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "type": "object", "properties": properties, "required": required}


@dataclass(frozen=True)
class Builtin:
    name: str
    description: str
    schema: dict[str, Any]
    run: Callable[[ToolHost, dict[str, Any], CallContext], Awaitable[str]]
    # For tools that ask opencode's permission system: the argument whose value is the pattern.
    permission_arg: str | None = None


def format_datetime(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS.mmm±HH:MM`, UTC shown as +00:00."""
    offset = moment.utcoffset() or timedelta(0)
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return (
        moment.strftime("%Y-%m-%dT%H:%M:%S.")
        + f"{moment.microsecond // 1000:03d}{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    )


def slice_lines(content: str, offset: object, limit: object) -> str:
    """Lines [offset-1, offset-1+limit) joined with newlines; offset 0 or missing starts at line 1."""
    start = max(int(offset) - 1, 0) if isinstance(offset, (int, float)) and offset else 0
    count = int(limit) if isinstance(limit, (int, float)) else DEFAULT_READ_LIMIT
    if count <= 0:
        return ""
    return "\n".join(content.split("\n")[start : start + count])


def edit_content(content: str, old: str, new: str, replace_all: bool) -> str:
    """Replace `old` by `new` once (it must occur exactly once) or everywhere."""
    if old == "":
        raise EditFailed("failed: oldString must not be empty")
    count = content.count(old)
    if count == 0:
        raise EditFailed("failed: oldString not found")
    if count > 1 and not replace_all:
        raise EditFailed(f"failed: {count} matches for oldString, expected 1 (use replaceAll to replace all)")
    return content.replace(old, new) if replace_all else content.replace(old, new, 1)


async def _datetime(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    name = args.get("timezone") or "UTC"
    try:
        zone: timezone | ZoneInfo = UTC if name in ("UTC", "utc", "Z") else ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolFailed(
            f"error: unknown time zone: {name} (use an IANA name such as Europe/Paris)"
        ) from None
    return format_datetime(datetime.now(zone))


async def _heartbeat_time(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    value = host.heartbeat_time()
    return str(value) if value else "no heartbeat has run yet"


async def _prompt_list(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    lines = ["prompt contract:"]
    for stage, name in PROMPT_CONTRACT.items():
        present = (host.workspace.prompts_dir / name).is_file()
        lines.append(f"{name} ({stage}) — {'present' if present else 'missing'}")
    return "\n".join(lines)


async def _prompt_read(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    name = args["prompt"]
    path = host.workspace.prompts_dir / name
    if not path.is_file():
        raise ToolFailed(f"error: not found: prompts/{name}")
    return slice_lines(
        path.read_text(encoding="utf-8", errors="replace"), args.get("offset"), args.get("limit")
    )


async def _prompt_write(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    name = args["prompt"]
    return await host.change_file(
        host.workspace.prompts_dir / name,
        f"prompts/{name}",
        lambda _old: args["content"],
        message=f"write prompt {name}",
        success=f"successfully wrote {name}",
        ctx=ctx,
    )


async def _prompt_edit(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    name = args["prompt"]
    return await host.change_file(
        host.workspace.prompts_dir / name,
        f"prompts/{name}",
        lambda old: edit_content(old, args["oldString"], args["newString"], bool(args.get("replaceAll"))),
        message=f"edit prompt {name}",
        success=f"successfully edited {name}",
        ctx=ctx,
    )


async def _hook_list(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    return "available hooks: " + ", ".join(h.name for h in host.hooks())


def _hook_path(host: ToolHost, hook: str) -> Path:
    try:
        return safe_path(host.workspace.hooks_dir, hook, "hooks")
    except PathRefused as exc:
        raise ToolFailed(f"error: {exc}") from None


async def _hook_read(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    path = _hook_path(host, args["hook"])
    if not os.path.isfile(path):
        raise ToolFailed(f"error: not found: hooks/{args['hook']}")
    with open(path, encoding="utf-8", errors="replace") as fh:
        return slice_lines(fh.read(), args.get("offset"), args.get("limit"))


async def _hook_write(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    return await _change_hook(host, args["hook"], lambda _old: args["content"], "write", "wrote", ctx)


async def _hook_edit(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    return await _change_hook(
        host,
        args["hook"],
        lambda old: edit_content(old, args["oldString"], args["newString"], bool(args.get("replaceAll"))),
        "edit",
        "edited",
        ctx,
    )


async def _change_hook(
    host: ToolHost, hook: str, change: Callable[[str], str], verb: str, done: str, ctx: CallContext
) -> str:
    path = _hook_path(host, hook)
    name = host.canonical_hook(path)
    return await host.change_file(
        os.fspath(path),
        f"hooks/{name}",
        change,
        message=f"{verb} hook {name}",
        success=f"successfully {done} {hook}",
        ctx=ctx,
        hook=name,
    )


async def _hook_validate(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    path = _hook_path(host, args["hook"])
    name = host.canonical_hook(path)
    result = await host.validate_hook(name, args["content"])
    if not result.ok:
        raise ToolFailed("validation failed:\n" + result.output)
    if result.test is None:
        return (
            f"validation skipped: hooks/{name} has no registered test (its discover answer names none, "
            "or it is not a hook evolve found), so nothing was run; evolve_hook_write and "
            "evolve_hook_edit would install this version without a test"
        )
    return "validation passed"


async def _tool_list(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    lines = ["available tools:"]
    for tool in host.hook_tools().values():
        params = []
        for pname, spec in tool.parameters.items():
            desc = (
                spec
                if isinstance(spec, str)
                else (spec.get("description") or pname)
                if isinstance(spec, dict)
                else pname
            )
            params.append(f"{pname}: {desc}")
        lines.append(f"  {tool.name}({', '.join(params)}): {tool.description}")
    return "\n".join(lines)


async def _tool_invoke(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    inner_args = args.get("args") or {}
    return await host.run_hook_tool(args["name"], inner_args, ctx)


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin(
            "evolve_datetime",
            "Current date and time as YYYY-MM-DDTHH:MM:SS.mmm±HH:MM (UTC unless a time zone is given).",
            _schema(
                {
                    "timezone": {
                        "type": "string",
                        "description": "IANA time zone, e.g. Europe/Paris (default UTC)",
                    }
                },
                [],
            ),
            _datetime,
        ),
        Builtin(
            "evolve_heartbeat_time", "Time of the last completed heartbeat.", _schema({}, []), _heartbeat_time
        ),
        Builtin(
            "evolve_prompt_list",
            "List the prompt contract files in prompts/ and whether each is present.",
            _schema({}, []),
            _prompt_list,
        ),
        Builtin(
            "evolve_prompt_read",
            "Read a prompt contract file from prompts/.",
            _schema({"prompt": _PROMPT_PARAM, "offset": _OFFSET, "limit": _LIMIT}, ["prompt"]),
            _prompt_read,
        ),
        Builtin(
            "evolve_prompt_write",
            "Overwrite an existing prompt contract file in prompts/ (cannot create new files). The change is committed to git.",
            _schema(
                {"prompt": _PROMPT_PARAM, "content": {"type": "string", "description": "the new content"}},
                ["prompt", "content"],
            ),
            _prompt_write,
        ),
        Builtin(
            "evolve_prompt_edit",
            "Replace text in an existing prompt contract file in prompts/. The change is committed to git.",
            _schema(
                {"prompt": _PROMPT_PARAM, "oldString": _OLD, "newString": _NEW, "replaceAll": _ALL},
                ["prompt", "oldString", "newString"],
            ),
            _prompt_edit,
        ),
        Builtin("evolve_hook_list", "List the hook scripts in hooks/.", _schema({}, []), _hook_list),
        Builtin(
            "evolve_hook_read",
            "Read a hook script from hooks/.",
            _schema({"hook": _HOOK_PARAM, "offset": _OFFSET, "limit": _LIMIT}, ["hook"]),
            _hook_read,
        ),
        Builtin(
            "evolve_hook_write",
            "Overwrite an existing hook script in hooks/ (cannot create new files). The new version must pass "
            "the hook's registered test first; then it is installed, committed to git and re-discovered.",
            _schema(
                {
                    "hook": _HOOK_PARAM,
                    "content": {"type": "string", "description": "the complete new script"},
                },
                ["hook", "content"],
            ),
            _hook_write,
            permission_arg="hook",
        ),
        Builtin(
            "evolve_hook_edit",
            "Replace text in an existing hook script in hooks/. The edited version must pass the hook's "
            "registered test first; then it is installed, committed to git and re-discovered.",
            _schema(
                {"hook": _HOOK_PARAM, "oldString": _OLD, "newString": _NEW, "replaceAll": _ALL},
                ["hook", "oldString", "newString"],
            ),
            _hook_edit,
            permission_arg="hook",
        ),
        Builtin(
            "evolve_hook_validate",
            "Run a hook's registered test against a candidate version without installing it.",
            _schema(
                {"hook": _HOOK_PARAM, "content": {"type": "string", "description": "the candidate script"}},
                ["hook", "content"],
            ),
            _hook_validate,
            # It runs the candidate (through the test): code of the agent's choosing, so it asks
            # permission exactly as the writes do.
            permission_arg="hook",
        ),
        Builtin(
            "evolve_tool_list",
            "List the tools defined by hooks, with their parameters.",
            _schema({}, []),
            _tool_list,
        ),
        Builtin(
            "evolve_tool_invoke",
            "Call a tool defined by a hook by its full name (see evolve_tool_list), e.g. tools added since the session started.",
            _schema(
                {
                    "name": {"type": "string", "description": "full tool name, <hook>_<tool>"},
                    "args": {
                        "type": "object",
                        "propertyNames": {"type": "string"},
                        "additionalProperties": {},
                        "description": "the tool's arguments",
                    },
                },
                ["name"],
            ),
            _tool_invoke,
        ),
    ]
}


def _heartbeat(host: ToolHost) -> Any:
    if host.heartbeat is None:
        raise ToolFailed("error: the heartbeat lives in the running engine; none is available here")
    return host.heartbeat


async def _heartbeat_status(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    return str(_heartbeat(host).describe())


async def _heartbeat_set(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    interval, enabled, reset = args.get("interval_ms"), args.get("enabled"), args.get("reset") is True
    if interval is None and enabled is None and not reset:
        raise ToolFailed("error: give interval_ms, enabled or reset")
    if interval is not None and (not isinstance(interval, (int, float)) or interval != int(interval)):
        raise ToolFailed(f"error: interval_ms must be a whole number of milliseconds, got {interval!r}")
    answer = _heartbeat(host).choose(
        int(interval) if interval is not None else None, enabled, reset, ctx.session
    )
    if answer.startswith("error:"):
        raise ToolFailed(answer)
    return str(answer)


async def _heartbeat_history(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    limit = args.get("limit")
    count = int(limit) if isinstance(limit, (int, float)) and limit >= 1 else 10
    return str(_heartbeat(host).history_text(min(count, 100)))


HEARTBEAT_BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin(
            "evolve_heartbeat_status",
            "Your heartbeat (the turns you get on a timer, without a user): on or off, its interval and "
            "who chose it, when the next beat comes, how many beats ran in the current heartbeat session.",
            _schema({}, []),
            _heartbeat_status,
        ),
        Builtin(
            "evolve_heartbeat_set",
            "Choose your own heartbeat: its interval, or turn it off or on. Your choice is kept across "
            "restarts; the operator can disable the heartbeat in the config, which always wins.",
            _schema(
                {
                    "interval_ms": {
                        "type": "number",
                        "description": "milliseconds between beats (at least 60000)",
                    },
                    "enabled": {"type": "boolean", "description": "false: no beats until you set true"},
                    "reset": {
                        "type": "boolean",
                        "description": "true: forget your choice, the config's interval applies again",
                    },
                },
                [],
            ),
            _heartbeat_set,
        ),
        Builtin(
            "evolve_heartbeat_history",
            "Your recent heartbeats, newest first: when, what triggered it, its outcome and its message.",
            _schema({"limit": {"type": "number", "description": "how many (default 10, at most 100)"}}, []),
            _heartbeat_history,
        ),
    ]
}


def dumps_result(value: object) -> str:
    """A hook tool's `result` as the text the agent sees: `result || "done"`, as in JavaScript."""
    if value is None or value == "" or value is False or value == 0:
        return "done"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
