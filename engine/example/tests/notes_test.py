#!/usr/bin/env python3
"""Validation test of hooks/notes.py, run by the host before any edit of that hook is accepted.

The workspace is $OPENCODE_EVOLVE_WORKSPACE (the host points it at a copy holding the candidate
hook), else the parent of tests/. The hook is copied into a fresh temporary workspace of this
test's own and run there, so nothing it writes reaches the real workspace.
Exit 0 when every check passes; otherwise each failure is printed to stderr and the exit is 1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEADLINE = (
    time.monotonic() + 20.0
)  # normally ~1 s; generous for a loaded machine (hook_timeout still applies)
SPEC_KEYS = {"type", "description", "optional", "enum"}
BASE_TYPES = {"string", "number", "boolean", "object", "array", "any"}
STAGE_PROMPTS = ("preamble", "chat", "heartbeat", "compaction", "recover")

failures: list[str] = []


class Fatal(Exception):
    """A failure after which the remaining checks would only repeat it."""


def fail(check: str, why: str) -> None:
    failures.append(f"FAIL {check}: {why}")


class Run:
    """One hook run: exit code, merged JSONL result, log lines and stderr."""

    def __init__(self, code: int, result: dict[str, Any], logs: list[Any], stderr: str) -> None:
        self.code, self.result, self.logs, self.stderr = code, result, logs, stderr

    def tail(self) -> str:
        err = self.stderr.strip()
        return f"\n    stderr: {err[-600:]}" if err else ""


def run_hook(ws: Path, stage: str, data: dict[str, Any] | None = None) -> Run:
    """Run the hook like the host does: argv[1] = stage, JSON on stdin, cwd = workspace."""
    remaining = DEADLINE - time.monotonic()
    if remaining <= 0:
        raise Fatal("out of time (4 s) before stage " + stage)
    stdin = "" if data is None else json.dumps({"hook": stage, **data})
    env = {**os.environ, "OPENCODE_EVOLVE_WORKSPACE": str(ws)}
    try:
        proc = subprocess.run(
            [str(ws / "hooks" / "notes.py"), stage],
            input=stdin.encode(),
            capture_output=True,
            cwd=ws,
            env=env,
            timeout=remaining,
        )
    except subprocess.TimeoutExpired as exc:
        raise Fatal(f"stage {stage} did not finish in time") from exc
    except OSError as exc:
        raise Fatal(f"cannot run hooks/notes.py: {exc}") from exc
    stderr = proc.stderr.decode(errors="replace")
    result: dict[str, Any] = {}
    logs: list[Any] = []
    for number, line in enumerate(proc.stdout.decode(errors="replace").split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            fail(stage, f"stdout line {number} is not a JSON object: {line[:80]!r}")
            continue
        if value.get("log"):
            logs.append(value["log"])
        else:
            result.update(value)
    return Run(proc.returncode, result, logs, stderr)


def ok_run(ws: Path, stage: str, data: dict[str, Any] | None = None, check: str = "") -> Run:
    run = run_hook(ws, stage, data)
    if run.code != 0:
        fail(check or stage, f"exit {run.code}{run.tail()}")
    return run


def check_spec(tool: str, param: str, spec: Any) -> None:
    where = f"discover: tool {tool} parameter {param}"
    if isinstance(spec, str):
        return
    if not isinstance(spec, dict):
        fail(where, f"spec must be a string or an object, got {spec!r}")
        return
    if set(spec) - SPEC_KEYS:
        fail(where, f"unknown keys {sorted(set(spec) - SPEC_KEYS)}")
    if "description" in spec and not isinstance(spec["description"], str):
        fail(where, "description must be a string")
    if "optional" in spec and not isinstance(spec["optional"], bool):
        fail(where, "optional must be true or false")
    if "enum" in spec:
        enum = spec["enum"]
        if not (isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum)):
            fail(where, "enum must be a non-empty list of strings")
    elif "type" in spec:
        match = re.fullmatch(r"(\w+)(?:\[(.+)\])?", str(spec["type"]))
        if not match or match.group(1) not in BASE_TYPES:
            fail(
                where, f"type {spec['type']!r} is not one of {sorted(BASE_TYPES)} (or array[T], object[K, V])"
            )


def check_discover(ws: Path) -> None:
    run = run_hook(ws, "discover")  # the host may send nothing at all on stdin here
    if run.code != 0:
        raise Fatal(f"discover: exit {run.code}{run.tail()}")
    found = run.result
    if found.get("name") != "notes":
        fail("discover", f"name should be 'notes', got {found.get('name')!r}")
    if found.get("test") != "notes_test.py":
        fail("discover", f"test should be 'notes_test.py', got {found.get('test')!r}")
    tools = found.get("tools")
    if not isinstance(tools, list):
        raise Fatal(f"discover: tools should be a list, got {tools!r}")
    names = {t.get("name") for t in tools if isinstance(t, dict)}
    for wanted in ("add", "list", "forget", "stats"):
        if wanted not in names:
            fail("discover", f"tool {wanted!r} is missing (tools: {sorted(map(str, names))})")
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            fail("discover", f"each tool needs a string name, got {tool!r}")
            continue
        params = tool.get("parameters", {})
        if not isinstance(params, dict):
            fail("discover", f"tool {tool['name']}: parameters must be an object")
            continue
        for param, spec in params.items():
            check_spec(tool["name"], param, spec)
        permission = tool.get("permission")
        if permission is not None:
            args = permission.get("arg") if isinstance(permission, dict) else None
            args = [args] if isinstance(args, str) else args
            if not isinstance(args, list) or any(a not in params for a in args):
                fail("discover", f"tool {tool['name']}: permission.arg must name its parameters")


def read_prompts(ws: Path) -> dict[str, str]:
    prompts = {}
    for stage in STAGE_PROMPTS:
        path = ws / "prompts" / f"{stage}.md"
        if path.is_file():
            prompts[stage] = path.read_text(encoding="utf-8")
    if not prompts.get("preamble", "").strip():
        prompts["preamble"] = "You are a careful agent. TEST-PREAMBLE-MARKER\n"
    return prompts


def call_tool(ws: Path, tool: str, args: dict[str, Any]) -> Run:
    return ok_run(
        ws, "execute_tool", {"tool": tool, "args": args, "session": {"id": "t"}}, f"execute_tool {tool}"
    )


def check_mutate_request(ws: Path, prompts: dict[str, str], must_contain: str | None = None) -> None:
    data = {"session": {"id": "t"}, "system": ["opencode's own prompt"], "prompts": prompts, "history": []}
    system = ok_run(ws, "mutate_request", data).result.get("system")
    if not (isinstance(system, list) and len(system) == 1 and isinstance(system[0], str)):
        fail("mutate_request", f"system should be a list of one string, got {system!r}")
        return
    if prompts["preamble"].strip() not in system[0]:
        fail("mutate_request", "system does not contain the text of prompts/preamble.md")
    if must_contain and must_contain not in system[0]:
        fail("mutate_request", f"system does not show the high-priority note {must_contain!r}")


def check_tools(ws: Path, real_ws: Path, prompts: dict[str, str]) -> None:
    real_notes = real_ws / "notes" / "notes.json"
    before = real_notes.read_bytes() if real_notes.is_file() else None

    added = call_tool(
        ws, "add", {"text": "water the plants", "priority": "high", "tags": ["home"], "pin": True}
    )
    if "#1" not in str(added.result.get("result")):
        fail("execute_tool add", f"result should name note #1, got {added.result.get('result')!r}")
    if "notes/notes.json" not in (added.result.get("modified") or []):
        fail(
            "execute_tool add", f"modified should list notes/notes.json, got {added.result.get('modified')!r}"
        )
    if not any("water the plants" in str(n) for n in added.result.get("notify") or []):
        fail("execute_tool add", "a high-priority note should notify other sessions")
    call_tool(ws, "add", {"text": "buy stamps"})
    if not (ws / "notes" / "notes.json").is_file():
        fail("execute_tool add", "notes/notes.json was not written in the workspace")
    after = real_notes.read_bytes() if real_notes.is_file() else None
    if after != before:
        fail(
            "execute_tool add",
            f"the real workspace's notes changed ({real_notes}); writes must go to the cwd",
        )

    listed = str(call_tool(ws, "list", {}).result.get("result"))
    if "water the plants" not in listed or "buy stamps" not in listed:
        fail("execute_tool list", f"both notes should be listed, got {listed!r}")
    tagged = str(call_tool(ws, "list", {"tag": "home"}).result.get("result"))
    if "water the plants" not in tagged or "buy stamps" in tagged:
        fail("execute_tool list", f"tag 'home' should list only the first note, got {tagged!r}")

    check_mutate_request(ws, prompts, must_contain="water the plants")

    call_tool(ws, "forget", {"id": 1})
    listed = str(call_tool(ws, "list", {}).result.get("result"))
    if "water the plants" in listed or "buy stamps" not in listed:
        fail("execute_tool forget", f"note #1 should be gone and #2 kept, got {listed!r}")
    missing = call_tool(ws, "forget", {"id": 99}).result.get("result")
    if not isinstance(missing, str) or "99" not in missing:
        fail("execute_tool forget", f"forgetting a missing note should say so in result, got {missing!r}")

    stats = call_tool(ws, "stats", {"weights": {"normal": 2}}).result.get("result")
    if not isinstance(stats, str) or not stats:
        fail("execute_tool stats", f"result should be a text, got {stats!r}")

    unknown = run_hook(ws, "execute_tool", {"tool": "no_such_tool", "args": {}, "session": {"id": "t"}})
    if unknown.code == 0:
        fail("execute_tool no_such_tool", f"an unknown tool should exit non-zero, got {unknown.result!r}")


def check_other_stages(ws: Path, prompts: dict[str, str]) -> None:
    message = ok_run(ws, "format_notification", {"notifications": ["first", "second"]}).result.get("message")
    if not (isinstance(message, str) and "first" in message and "second" in message):
        fail("format_notification", f"message should carry both notifications, got {message!r}")
    data = {"session": {"id": "t"}, "system": [], "prompts": {}, "history": []}
    abstained = ok_run(ws, "mutate_request", data, "mutate_request without prompts")
    if abstained.result.get("system"):
        fail("mutate_request without prompts", "with no preamble.md or chat.md the hook should abstain")
    observe = {"session": {"id": "t"}, "thinking": "", "calls": [], "answer": "hi", "prompts": prompts}
    ok_run(ws, "observe_message", observe)
    ok_run(ws, "idle", {"session": {"id": "t"}, "answer": "hi", "prompts": prompts})
    ok_run(ws, "tool_before", {"session": {"id": "t"}, "tool": "read", "callID": "c", "args": {}})


def main() -> int:
    real_ws = Path(os.environ.get("OPENCODE_EVOLVE_WORKSPACE") or Path(__file__).resolve().parent.parent)
    hook = real_ws / "hooks" / "notes.py"
    if not hook.is_file():
        print(f"FAIL setup: {hook} does not exist", file=sys.stderr)
        return 1
    ws = Path(tempfile.mkdtemp(prefix="notes-test-"))
    checks: list[Any] = []
    failed_checks = 0
    try:
        (ws / "hooks").mkdir()
        shutil.copy(hook, ws / "hooks" / "notes.py")
        os.chmod(ws / "hooks" / "notes.py", 0o755)
        if (real_ws / "prompts").is_dir():
            shutil.copytree(real_ws / "prompts", ws / "prompts")
        prompts = read_prompts(ws)
        checks = [
            lambda: check_discover(ws),
            lambda: check_mutate_request(ws, prompts),
            lambda: check_tools(ws, real_ws, prompts),
            lambda: check_other_stages(ws, prompts),
        ]
        for check in checks:
            before = len(failures)
            check()
            failed_checks += len(failures) > before
    except Fatal as exc:
        failures.append(f"FAIL {exc}")
        failed_checks += 1
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    # One summary line in the form test runners use, so evolve can show the counts to the operator.
    if failures:
        print("\n".join(dict.fromkeys(failures)), file=sys.stderr)
        print(f"notes_test: {len(checks)} checks, {failed_checks} failed", file=sys.stderr)
        return 1
    print(f"notes_test: {len(checks)} checks, {len(checks)} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
