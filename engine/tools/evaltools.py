"""The agent's tools for its behaviour checks (evals/*.jsonc, docs/evals.md), offered with
`evals_agent_tools` in the config: list, read, write and edit its scenarios (validated before they
are written, committed or held for review like prompts), and run them on a change it is about to
propose, before it proposes it (each run costs model calls: twice the scenarios, at the least)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.evals.scenarios import EVALS_DIR, SUFFIXES, check_text
from engine.evals.service import EvalError
from engine.tools.builtins import Builtin, edit_content, slice_lines
from engine.tools.host import CallContext, EditFailed, EvalControl, ToolFailed, ToolHost
from engine.tools.schema import SCHEMA_DIALECT
from engine.workspace.paths import PathRefused, safe_path

_OFFSET = {"type": "number", "description": "line number to start reading from (1-indexed)"}
_LIMIT = {"type": "number", "description": "maximum number of lines to read (default 2000)"}
_OLD = {"type": "string", "description": "the exact text to replace"}
_NEW = {"type": "string", "description": "the text to replace it with"}
_ALL = {"type": "boolean", "description": "replace every occurrence of oldString (default false)"}
_SCENARIO = {
    "type": "string",
    "description": "the scenario's file name in evals/, e.g. forget-a-note.jsonc (see evolve_eval_list)",
}
RUNNABLE = ("prompts/", "hooks/", "evals/", "config/", "tests/")


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "type": "object", "properties": properties, "required": required}


def _evals(host: ToolHost) -> EvalControl:
    if host.evals is None:
        raise ToolFailed("error: behaviour checks run in the engine; none is available here")
    return host.evals


def _scenario_path(host: ToolHost, name: str) -> Path:
    if not name.endswith(SUFFIXES) or "/" in name:
        raise ToolFailed(f"error: a scenario is a file of evals/ ending in .jsonc (got {name!r})")
    try:
        return safe_path(host.workspace.root / EVALS_DIR, name, "scenario")
    except PathRefused as exc:
        raise ToolFailed(f"error: {exc}") from None


async def _list(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    found, errors = _evals(host).scenarios()
    lines = [f"{len(found)} scenarios in {EVALS_DIR}/:"]
    for scenario in found:
        lines.append(
            f"- {scenario.name} ({scenario.file}): {json.dumps(list(scenario.messages), ensure_ascii=False)}"
        )
        lines.extend(f"    expects: {e.words()}" for e in scenario.expectations)
    lines.extend(f"error: {e}" for e in errors)
    return "\n".join(lines)


async def _read(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    path = _scenario_path(host, args["scenario"])
    if not path.is_file():
        raise ToolFailed(f"error: not found: {EVALS_DIR}/{args['scenario']}")
    return slice_lines(
        path.read_text(encoding="utf-8", errors="replace"), args.get("offset"), args.get("limit")
    )


def _validated(shown: str, new: str) -> str:
    problem = check_text(new, shown)
    if problem:
        raise EditFailed(f"failed: the scenario would not read:\n{problem}")
    return new


async def _write(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    name = args["scenario"]
    shown = f"{EVALS_DIR}/{name}"
    return await host.change_file(
        _scenario_path(host, name),
        shown,
        lambda _old: _validated(shown, args["content"]),
        message=f"write scenario {name}",
        success=f"successfully wrote {name}",
        ctx=ctx,
        create=True,
    )


async def _edit(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    name = args["scenario"]
    shown = f"{EVALS_DIR}/{name}"
    return await host.change_file(
        _scenario_path(host, name),
        shown,
        lambda old: _validated(
            shown, edit_content(old, args["oldString"], args["newString"], bool(args.get("replaceAll")))
        ),
        message=f"edit scenario {name}",
        success=f"successfully edited {name}",
        ctx=ctx,
    )


async def _run(host: ToolHost, args: dict[str, Any], ctx: CallContext) -> str:
    file = str(args["file"]).strip("/")
    if not file.startswith(RUNNABLE) or ".." in file.split("/"):
        raise ToolFailed(f"error: a proposal is a file of {', '.join(RUNNABLE)} (got {file!r})")
    if file.startswith(f"{EVALS_DIR}/"):
        _validated(file, args["content"])
    names = args.get("scenarios")
    try:
        return await _evals(host).report(file, args["content"], names if isinstance(names, list) else None)
    except EvalError as exc:
        raise ToolFailed(f"error: {exc}") from None


EVAL_BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin(
            "evolve_eval_list",
            "List your behaviour checks: the scenarios in evals/ (the messages each sends you, what it expects "
            "you to do) and the files that do not read.",
            _schema({}, []),
            _list,
        ),
        Builtin(
            "evolve_eval_read",
            "Read a scenario file from evals/.",
            _schema({"scenario": _SCENARIO, "offset": _OFFSET, "limit": _LIMIT}, ["scenario"]),
            _read,
        ),
        Builtin(
            "evolve_eval_write",
            "Create or overwrite a scenario file in evals/ (JSONC: messages, expect). It must read as a "
            "scenario first; then it is committed to git (or held for review).",
            _schema(
                {"scenario": _SCENARIO, "content": {"type": "string", "description": "the whole file"}},
                ["scenario", "content"],
            ),
            _write,
        ),
        Builtin(
            "evolve_eval_edit",
            "Replace text in a scenario file in evals/. The result must read as a scenario; then it is "
            "committed to git (or held for review).",
            _schema(
                {"scenario": _SCENARIO, "oldString": _OLD, "newString": _NEW, "replaceAll": _ALL},
                ["scenario", "oldString", "newString"],
            ),
            _edit,
        ),
        Builtin(
            "evolve_eval_run",
            "Run your behaviour checks on a change before you make it: each scenario is sent to you as you "
            "are now and as you would be with this file changed (both in throwaway copies), and you get "
            "which scenarios pass before and after, and why one fails. Nothing is installed. It takes a "
            "while and costs model calls (twice the scenarios).",
            _schema(
                {
                    "file": {
                        "type": "string",
                        "description": "the file the change makes, e.g. prompts/chat.md or hooks/notes.py",
                    },
                    "content": {"type": "string", "description": "the file's complete proposed content"},
                    "scenarios": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "only these scenarios, by name (default: all)",
                    },
                },
                ["file", "content"],
            ),
            _run,
            # It runs the agent twice per scenario, with a version of the agent's choosing: asked of
            # opencode's permission system as a hook write is.
            permission_arg="file",
        ),
    ]
}
