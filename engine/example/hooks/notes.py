#!/usr/bin/env python3
"""The example workspace's hook: a note-keeping agent that assembles its own system prompt.

Called by the host as `hooks/notes.py <stage>` with one JSON object on stdin; answers with JSON
object lines on stdout, one line per result key, plus `{"log": ...}` lines. Diagnostics go to stderr.
Notes live in `notes/notes.json` in the workspace ($OPENCODE_EVOLVE_WORKSPACE, else the cwd).
Standard library only, so the agent can read and rewrite all of it.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NAME = "notes"
TEST = "notes_test.py"
NOTES_FILE = "notes/notes.json"
CONTINUE_FILE = "notes/continue.txt"
PRIORITIES = ("low", "normal", "high")

TOOLS: list[dict[str, Any]] = [
    {
        "name": "add",
        "description": (
            "Add a note to your notebook. High-priority and pinned notes are shown in the system "
            "prompt of every new session; high priority also notifies your other sessions."
        ),
        "parameters": {
            "text": "the note text",
            "priority": {
                "enum": list(PRIORITIES),
                "optional": True,
                "description": "how important (default normal)",
            },
            "tags": {"type": "array[string]", "optional": True, "description": "labels"},
            "pin": {"type": "boolean", "optional": True},
        },
        "permission": {"arg": "priority"},
    },
    {
        "name": "list",
        "description": "List your notes, one per line, oldest first; optionally only those with a tag.",
        "parameters": {
            "tag": {"type": "string", "optional": True},
            "limit": {"type": "number", "optional": True},
        },
    },
    {
        "name": "forget",
        "description": "Delete a note by its number (as shown by notes_list). Numbers are never reused.",
        "parameters": {"id": {"type": "number", "description": "note number"}},
    },
    {
        "name": "stats",
        "description": (
            "Count your notes by priority. With weights (priority -> number), also give the weighted total."
        ),
        "parameters": {
            "weights": {
                "type": "object[string, number]",
                "optional": True,
                "description": 'weight per priority, e.g. {"high": 3, "normal": 1}',
            },
        },
    },
]

HEARTBEAT_SYSTEM = (
    "This is a heartbeat: a scheduled turn that you start on your own, with nobody waiting for an "
    "answer. Work quietly from your notes; what you write here is read later, if at all."
)


class Usage(Exception):
    """A call the hook cannot serve; its message goes to stderr and the hook exits 1."""


# ---------------------------------------------------------------- storage


def workspace() -> Path:
    return Path(os.environ.get("OPENCODE_EVOLVE_WORKSPACE") or os.getcwd())


def load_notes(ws: Path) -> dict[str, Any]:
    """Read the notebook; a missing file is an empty notebook. Raises ValueError if unreadable."""
    path = ws / NOTES_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"next_id": 1, "notes": []}
    except OSError as exc:
        raise ValueError(f"{NOTES_FILE} cannot be read: {exc}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{NOTES_FILE} is not valid JSON ({exc})") from exc
    if isinstance(data, list):  # tolerate a bare list of notes
        data = {"notes": data}
    if not isinstance(data, dict) or not isinstance(data.get("notes", []), list):
        raise ValueError(f'{NOTES_FILE} must be an object with a "notes" list')
    notes = [n for n in data.get("notes", []) if isinstance(n, dict) and isinstance(n.get("id"), int)]
    highest = max((n["id"] for n in notes), default=0)
    next_id = data.get("next_id")
    if not isinstance(next_id, int) or next_id <= highest:
        next_id = highest + 1
    return {**data, "next_id": next_id, "notes": notes}


def save_notes(ws: Path, data: dict[str, Any]) -> None:
    """Write the notebook atomically (temporary file, then rename)."""
    path = ws / NOTES_FILE
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".notes.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(ws: Path) -> Iterator[None]:
    """Serialise read-modify-write of the notebook: opencode may run two tool calls at once."""
    directory = ws / "notes"
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def notes_or_log(ws: Path, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The notes for a prompt-building stage: an unreadable notebook is logged, not fatal."""
    try:
        notes: list[dict[str, Any]] = load_notes(ws)["notes"]
    except ValueError as exc:
        print(f"notes: {exc}", file=sys.stderr)
        out.append({"log": f"notes: {exc}; continuing without notes"})
        return []
    return notes


# ---------------------------------------------------------------- formatting


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def format_note(note: dict[str, Any]) -> str:
    line = f"#{note['id']} [{note.get('priority', 'normal')}] {one_line(note.get('text', ''))}"
    tags = note.get("tags") or []
    if tags:
        line += f" (tags: {', '.join(tags)})"
    if note.get("pin"):
        line += " (pinned)"
    return line


def notes_block(notes: list[dict[str, Any]]) -> str:
    shown = [n for n in notes if n.get("pin") or n.get("priority") == "high"]
    if not shown:
        return ""
    lines = ["<notes>", "Pinned and high-priority notes (notes_list shows them all):"]
    lines += [format_note(n) for n in shown]
    lines.append("</notes>")
    return "\n".join(lines)


def join_parts(*parts: str | None) -> str:
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def read_prompts(ws: Path, data: dict[str, Any]) -> dict[str, str]:
    """The prompt contract as the host sent it; read prompts/ only if the host sent none."""
    prompts = data.get("prompts")
    if isinstance(prompts, dict):
        return {k: v for k, v in prompts.items() if isinstance(v, str)}
    found = {}
    for stage in ("preamble", "chat", "heartbeat", "compaction", "recover"):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found[stage] = (ws / "prompts" / f"{stage}.md").read_text(encoding="utf-8")
    return found


# ---------------------------------------------------------------- tools


def tool_add(ws: Path, args: dict[str, Any]) -> list[dict[str, Any]]:
    text = str(args.get("text") or "").strip()
    if not text:
        return [{"result": "not added: the note text is empty"}]
    priority = args.get("priority") or "normal"
    if priority not in PRIORITIES:
        return [{"result": f"not added: priority must be one of {', '.join(PRIORITIES)}, not {priority!r}"}]
    tags = args.get("tags") or []
    if isinstance(tags, str):
        tags = tags.split(",")
    tags = list(dict.fromkeys(t.strip() for t in map(str, tags) if t.strip()))
    pin = args.get("pin") is True or str(args.get("pin")).lower() == "true"
    with locked(ws):
        data = load_notes(ws)
        note = {
            "id": data["next_id"],
            "text": text,
            "priority": priority,
            "tags": tags,
            "pin": pin,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        data["notes"].append(note)
        data["next_id"] += 1
        save_notes(ws, data)
    out: list[dict[str, Any]] = [{"result": f"added note #{note['id']}"}, {"modified": [NOTES_FILE]}]
    if priority == "high":
        out.append({"notify": [f"high-priority note: {text}"]})
    return out


def tool_list(ws: Path, args: dict[str, Any]) -> list[dict[str, Any]]:
    notes = load_notes(ws)["notes"]
    tag = args.get("tag")
    if tag:
        notes = [n for n in notes if tag in (n.get("tags") or [])]
    if not notes:
        return [{"result": f"no notes tagged {tag!r}" if tag else "no notes yet"}]
    limit = args.get("limit")
    lines = [format_note(n) for n in notes]
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and 1 <= limit < len(lines):
        hidden = len(lines) - int(limit)
        lines = [*lines[: int(limit)], f"... {hidden} more"]
    return [{"result": "\n".join(lines)}]


def tool_forget(ws: Path, args: dict[str, Any]) -> list[dict[str, Any]]:
    value = args.get("id")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        wanted = int(str(value))
    except ValueError:
        return [{"result": f"not a note number: {value!r}"}]
    with locked(ws):
        data = load_notes(ws)
        kept = [n for n in data["notes"] if n["id"] != wanted]
        if len(kept) == len(data["notes"]):
            return [{"result": f"no note #{wanted}"}]
        data["notes"] = kept
        save_notes(ws, data)
    return [{"result": f"forgot note #{wanted}"}, {"modified": [NOTES_FILE]}]


def tool_stats(ws: Path, args: dict[str, Any]) -> list[dict[str, Any]]:
    notes = load_notes(ws)["notes"]
    counts = {p: 0 for p in PRIORITIES}
    for n in notes:
        counts[n.get("priority", "normal")] = counts.get(n.get("priority", "normal"), 0) + 1
    lines = [f"{len(notes)} notes: " + ", ".join(f"{p} {c}" for p, c in counts.items())]
    pinned = sum(1 for n in notes if n.get("pin"))
    lines.append(f"pinned: {pinned}")
    weights = args.get("weights")
    if isinstance(weights, dict):
        lines.append(f"weights: {json.dumps(weights, sort_keys=True)}")
        total = 0.0
        for p, c in counts.items():
            weight = weights.get(p, 0)
            if isinstance(weight, (int, float)):
                total += c * weight
        lines.append(f"weighted total: {total:g}")
    return [{"result": "\n".join(lines)}]


TOOL_HANDLERS = {"add": tool_add, "list": tool_list, "forget": tool_forget, "stats": tool_stats}


# ---------------------------------------------------------------- stages


# The stages this hook answers. Optional: without it every stage runs the hook; with it, the
# engine starts no process for the others (here tool_before and tool_after, on every tool call).
HANDLED_STAGES = [
    "mutate_request",
    "observe_message",
    "idle",
    "heartbeat",
    "compacting",
    "format_notification",
    "recover",
    "execute_tool",
]


def stage_discover(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": NAME}, {"test": TEST}, {"tools": TOOLS}, {"stages": HANDLED_STAGES}]


def stage_mutate_request(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    prompts = read_prompts(ws, data)
    if not join_parts(prompts.get("preamble"), prompts.get("chat")):
        return []  # abstain: opencode keeps its own system prompt
    out: list[dict[str, Any]] = []
    block = notes_block(notes_or_log(ws, out))
    out.append({"system": [join_parts(prompts.get("preamble"), prompts.get("chat"), block)]})
    return out


def stage_heartbeat(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    prompts = read_prompts(ws, data)
    task = (prompts.get("heartbeat") or "").strip()
    if not task:
        return [{"log": "heartbeat: prompts/heartbeat.md is missing or empty, nothing to do"}]
    out: list[dict[str, Any]] = []
    notes = notes_or_log(ws, out)
    system = join_parts(prompts.get("preamble"), HEARTBEAT_SYSTEM, notes_block(notes))
    out.append({"system": [system]})
    count = f"You have {len(notes)} note{'' if len(notes) == 1 else 's'}."
    out.append({"user": f"{task}\n{count}"})
    return out


def stage_compacting(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    prompts = read_prompts(ws, data)
    compaction = (prompts.get("compaction") or "").strip()
    if not compaction:
        return []  # opencode's default compaction prompt applies
    out: list[dict[str, Any]] = []
    pinned = [n for n in notes_or_log(ws, out) if n.get("pin")]
    listing = "; ".join(format_note(n) for n in pinned) if pinned else "none"
    out.append({"prompt": f"{compaction}\nPinned notes: {listing}"})
    return out


def stage_observe_message(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    answer = data.get("answer") or ""
    calls = data.get("calls") or []
    n_calls = len(calls) if isinstance(calls, list) else 0
    return [{"log": f"observed answer of {len(str(answer))} chars, {n_calls} tool calls"}]


def stage_idle(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    path = ws / CONTINUE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    path.unlink(missing_ok=True)
    if not text.strip():
        return [{"log": f"idle: {CONTINUE_FILE} was empty, removed it"}]
    return [{"continue": text}]


def stage_format_notification(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    notifications = data.get("notifications") or []
    if not isinstance(notifications, list) or not notifications:
        return []
    return [{"message": "\n".join("- " + str(n) for n in notifications)}]


def stage_recover(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    failed = data.get("failed_hook") or "?"
    error = one_line(str(data.get("error") or "unknown error"))
    return [{"log": f"recover: stage {failed} failed ({error}); using the host's recover defaults"}]


def stage_execute_tool(ws: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    tool = str(data.get("tool") or "")
    handler = TOOL_HANDLERS.get(tool) or TOOL_HANDLERS.get(tool.removeprefix(f"{NAME}_"))
    if handler is None:
        raise Usage(f"unknown tool {data.get('tool')!r}; this hook has: {', '.join(TOOL_HANDLERS)}")
    args = data.get("args") or {}
    if not isinstance(args, dict):
        raise Usage(f"args must be a JSON object, got {type(args).__name__}")
    try:
        return handler(ws, args)
    except ValueError as exc:  # an unreadable notebook: tell the agent, it can repair the file
        return [{"result": f"error: {exc}; repair or remove it"}]


STAGES = {
    "discover": stage_discover,
    "mutate_request": stage_mutate_request,
    "heartbeat": stage_heartbeat,
    "compacting": stage_compacting,
    "observe_message": stage_observe_message,
    "idle": stage_idle,
    "format_notification": stage_format_notification,
    "recover": stage_recover,
    "execute_tool": stage_execute_tool,
}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(f"usage: {argv[0]} STAGE < input.json", file=sys.stderr)
        return 2
    stage = argv[1]
    raw = sys.stdin.buffer.read().decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        print(f"notes: stdin of stage {stage} is not JSON: {exc}", file=sys.stderr)
        return 1
    if not isinstance(data, dict):
        print(f"notes: stdin of stage {stage} must be a JSON object", file=sys.stderr)
        return 1
    handler = STAGES.get(stage)
    if handler is None:  # tool_before, tool_after and stages this hook does not use
        return 0
    try:
        lines = handler(workspace(), data)
    except Usage as exc:
        print(f"notes: {exc}", file=sys.stderr)
        return 1
    # Printed only once the stage succeeded, so a failure never leaves half an answer on stdout.
    for line in lines:
        sys.stdout.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
