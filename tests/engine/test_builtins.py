"""Tests for the 13 builtin evolve_* tools through the engine's tool calls.

Each test builds a small workspace: prompts (recover.md missing on purpose), a python hook
`hooks/kit.py` registering tools `kit_mark` and `kit_echo` with the test `tests/kit_test.sh`, and a
shell hook `hooks/plain.sh` with no test and no tools.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.changes.gitstore import GitStore
from engine.protocol.records import ToolCall
from engine.runtime import Engine
from engine.tools.builtins import BUILTINS
from tests.support.environment import REPO
from tests.support.in_process import run_engine
from tests.support.workspace import make_ws, write_file

# scripts/test.sh runs these tests a second time with warm starts off.
pytestmark = pytest.mark.hooks

EXAMPLE = REPO / "engine" / "example"

BUILTIN_NAMES = {
    "evolve_datetime",
    "evolve_heartbeat_time",
    "evolve_prompt_list",
    "evolve_prompt_read",
    "evolve_prompt_write",
    "evolve_prompt_edit",
    "evolve_hook_list",
    "evolve_hook_read",
    "evolve_hook_write",
    "evolve_hook_edit",
    "evolve_hook_validate",
    "evolve_tool_list",
    "evolve_tool_invoke",
}

KIT = (
    f"#!{sys.executable}\n"
    + """import json, os, sys
TOOLS = [
    {
        "name": "mark",
        "description": "Write a marker file",
        "parameters": {
            "level": {"enum": ["low", "high"], "description": "how loud"},
            "path": {"type": "string", "optional": True, "description": "where"},
        },
        "permission": {"arg": "path"},
    },
    {"name": "echo", "description": "Echo text", "parameters": {"text": "the text"}},
]
stage = sys.argv[1]
data = json.loads(sys.stdin.read() or "{}")
if stage == "discover":
    print(json.dumps({"name": "kit", "test": "kit_test.sh", "tools": TOOLS}))
elif stage == "execute_tool":
    args = data["args"]
    if data["tool"] == "mark":
        with open("marker.txt", "w") as f:
            f.write(args["level"])
        print(json.dumps({"result": "marked " + args["level"]}))
    elif data["tool"] == "echo":
        print(json.dumps({"result": args["text"]}))
    else:
        sys.exit(4)
"""
)


KIT_TEST = """#!/bin/sh
out=$("$OPENCODE_EVOLVE_WORKSPACE/hooks/kit.py" discover </dev/null) || { echo "FAIL: kit.py discover failed"; exit 1; }
case "$out" in
  *'"name": "kit"'*) echo "kit test passed" ;;
  *) echo "FAIL: discover did not name kit: $out"; exit 1 ;;
esac
"""

PLAIN = "#!/bin/sh\ncat >/dev/null\n"
CHAT = "line1\nline2\nline3\nline4\nline5"
OUTSIDE = "SECRET outside content\n"
BAD_EDIT = {"oldString": "import json, os, sys", "newString": "import jsonx, os, sys"}
GOOD_EDIT = {
    "oldString": "TOOLS = [\n",
    "newString": 'TOOLS = [\n    {"name": "added", "description": "Added"},\n',
}


FILES = {
    "prompts/preamble.md": "P",
    "prompts/chat.md": CHAT,
    "prompts/heartbeat.md": "H",
    "prompts/compaction.md": "C",
    "hooks/kit.py": KIT,
    "hooks/plain.sh": PLAIN,
    "tests/kit_test.sh": KIT_TEST,
}


def call(tmp_path: Path, name: str, args: dict[str, Any], **kw: Any) -> ToolCall:
    ws = tmp_path / "ws" if (tmp_path / "ws").exists() else make_ws(tmp_path, FILES)
    return run_engine(ws, lambda e: e.tools.call(name, args, **kw))


def head(ws: Path) -> dict[str, Any]:
    return GitStore(ws).log(1)[0]


def log(ws: Path) -> list[dict[str, Any]]:
    return GitStore(ws).log(200)


# ---------------------------------------------------------------------------------------------
# The tool set


def test_all_builtins_are_registered(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    specs = run_engine(ws, lambda e: asyncio.sleep(0, e.tools.specs()))
    by_name = {s.name: s for s in specs}
    assert set(BUILTINS) == BUILTIN_NAMES
    assert set(by_name) >= BUILTIN_NAMES
    assert {n for n, s in by_name.items() if s.origin == "builtin"} == BUILTIN_NAMES
    assert by_name["kit_mark"].origin == "kit.py"
    assert by_name["kit_mark"].permission == {"arg": "path"}
    assert by_name["evolve_hook_edit"].permission == {"arg": "hook"}
    assert by_name["evolve_prompt_read"].permission is None
    for name in BUILTIN_NAMES:
        schema = by_name[name].schema
        assert schema["type"] == "object"
        assert by_name[name].description
    assert "contract" in by_name["evolve_prompt_read"].schema["properties"]["prompt"]["description"]
    assert by_name["evolve_prompt_read"].schema["properties"]["prompt"]["enum"] == [
        "preamble.md",
        "chat.md",
        "heartbeat.md",
        "compaction.md",
        "recover.md",
    ]


def test_example_workspace_tools(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)

    async def body(engine: Engine) -> Any:
        listed = await engine.tools.call("evolve_hook_list", {})
        return (
            engine.tools.specs(),
            listed.output,
            engine.tools.permission_request("notes_add", {"text": "x", "priority": "high"}),
        )

    specs, listed, permission = run_engine(ws, body)
    names = {s.name for s in specs}
    assert names >= BUILTIN_NAMES
    assert {"notes_add", "notes_list", "notes_forget", "notes_stats"} <= names
    assert listed == "available hooks: notes.py"
    assert permission == {"permission": "notes_add", "patterns": ["high"]}


def test_unknown_tool(tmp_path: Path) -> None:
    result = call(tmp_path, "evolve_nope", {})
    assert result.output == "unknown tool: evolve_nope"
    assert result.error == "unknown tool: evolve_nope"


def test_builtin_arguments_are_validated(tmp_path: Path) -> None:
    result = call(tmp_path, "evolve_prompt_write", {"prompt": "chat.md"})
    assert (
        result.output
        == 'error: invalid arguments for evolve_prompt_write: missing required argument "content"'
    )
    assert result.error == result.output
    assert (tmp_path / "ws" / "prompts" / "chat.md").read_text() == CHAT


# ---------------------------------------------------------------------------------------------
# evolve_datetime, evolve_heartbeat_time

STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$")


def test_datetime_formats(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> dict[str, str]:
        out = {}
        for zone in (None, "UTC", "", "Asia/Kolkata", "America/Argentina/Buenos_Aires", "Asia/Kathmandu"):
            args = {} if zone is None else {"timezone": zone}
            out[str(zone)] = (await engine.tools.call("evolve_datetime", args)).output
        return out

    outputs = run_engine(ws, body)
    now = datetime.now(UTC)
    for zone, text in outputs.items():
        assert STAMP.match(text), (zone, text)
        assert abs((datetime.fromisoformat(text) - now).total_seconds()) < 60
    assert outputs["None"].endswith("+00:00")
    assert outputs["UTC"].endswith("+00:00")
    assert outputs[""].endswith("+00:00")
    assert outputs["Asia/Kolkata"].endswith("+05:30")
    assert outputs["America/Argentina/Buenos_Aires"].endswith("-03:00")
    assert outputs["Asia/Kathmandu"].endswith("+05:45")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "Not a zone"])
def test_datetime_invalid_zone(tmp_path: Path, zone: str) -> None:
    result = call(tmp_path, "evolve_datetime", {"timezone": zone})
    assert result.output == f"error: unknown time zone: {zone} (use an IANA name such as Europe/Paris)"
    assert result.error == result.output


def test_heartbeat_time(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> list[str | None]:
        before = (await engine.tools.call("evolve_heartbeat_time", {})).output
        engine.state.update({"heartbeat_time": "2026-04-22T21:14:02.123+00:00", "other": 1})
        after = (await engine.tools.call("evolve_heartbeat_time", {})).output
        return [before, after]

    assert run_engine(ws, body) == ["no heartbeat has run yet", "2026-04-22T21:14:02.123+00:00"]


# ---------------------------------------------------------------------------------------------
# Prompt tools


def test_prompt_list_exact_text(tmp_path: Path) -> None:
    result = call(tmp_path, "evolve_prompt_list", {})
    assert result.output == (
        "prompt contract:\n"
        "preamble.md (preamble) — present\n"
        "chat.md (chat) — present\n"
        "heartbeat.md (heartbeat) — present\n"
        "compaction.md (compaction) — present\n"
        "recover.md (recover) — missing"
    )
    assert result.error is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, CHAT),
        ({"offset": 1}, CHAT),
        ({"offset": 0}, CHAT),
        ({"offset": 2, "limit": 2}, "line2\nline3"),
        ({"offset": 0, "limit": 1}, "line1"),
        ({"limit": 0}, ""),
        ({"offset": 3, "limit": 0}, ""),
        ({"offset": 5}, "line5"),
        ({"offset": 4, "limit": 100}, "line4\nline5"),
        ({"offset": 99}, ""),
    ],
)
def test_prompt_read_offset_limit(tmp_path: Path, args: dict[str, Any], expected: str) -> None:
    result = call(tmp_path, "evolve_prompt_read", {"prompt": "chat.md", **args})
    assert result.output == expected
    assert result.error is None


def test_prompt_read_missing_and_invalid(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> list[ToolCall]:
        return [
            await engine.tools.call("evolve_prompt_read", {"prompt": "recover.md"}),
            await engine.tools.call("evolve_prompt_read", {"prompt": "x.md"}),
            await engine.tools.call("evolve_prompt_read", {"prompt": "../hooks/kit.py"}),
        ]

    missing, invalid, escape = run_engine(ws, body)
    assert missing.output == "error: not found: prompts/recover.md"
    assert missing.error == missing.output
    assert invalid.output.startswith("error: invalid arguments for evolve_prompt_read: ")
    assert '"x.md"' in invalid.output
    assert escape.output.startswith("error: invalid arguments for evolve_prompt_read: ")


def test_prompt_write_cannot_create(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> list[ToolCall]:
        return [
            await engine.tools.call("evolve_prompt_write", {"prompt": "recover.md", "content": "new"}),
            await engine.tools.call("evolve_prompt_write", {"prompt": "x.md", "content": "new"}),
        ]

    missing, outside = run_engine(ws, body)
    assert missing.output == "error: not found: prompts/recover.md"
    assert missing.error == missing.output
    assert missing.commit is None
    assert not (ws / "prompts" / "recover.md").exists()
    assert outside.output.startswith("error: invalid arguments for evolve_prompt_write: ")
    assert not (ws / "prompts" / "x.md").exists()
    assert [c["message"].splitlines()[0] for c in log(ws)] == ["initial"]


def test_prompt_write_writes_and_commits_with_trailers(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    result = run_engine(
        ws,
        lambda e: e.tools.call(
            "evolve_prompt_write",
            {"prompt": "chat.md", "content": "new chat\n"},
            session="ses_1",
            call_id="call_1",
        ),
    )
    assert result.output == "successfully wrote chat.md"
    assert result.error is None
    assert (ws / "prompts" / "chat.md").read_text() == "new chat\n"
    commit = head(ws)
    assert commit["sha"] == result.commit
    assert commit["message"].splitlines()[0] == "write prompt chat.md"
    assert commit["files"] == ["prompts/chat.md"]
    assert commit["trailers"] == {
        "origin": "tool",
        "tool": "evolve_prompt_write",
        "session": "ses_1",
        "call": "call_1",
        "file": "prompts/chat.md",
    }


def test_prompt_write_same_content_makes_no_commit(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    result = run_engine(
        ws, lambda e: e.tools.call("evolve_prompt_write", {"prompt": "chat.md", "content": CHAT})
    )
    assert result.output == "successfully wrote chat.md"
    assert result.commit is None
    assert head(ws)["message"].startswith("initial")


def test_prompt_write_keeps_the_file_mode(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    (ws / "prompts" / "chat.md").chmod(0o600)
    call(tmp_path, "evolve_prompt_write", {"prompt": "chat.md", "content": "x"})
    assert stat.S_IMODE((ws / "prompts" / "chat.md").stat().st_mode) == 0o600


def test_prompt_edit_messages(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "prompts" / "heartbeat.md", "tick tock tick")

    async def body(engine: Engine) -> list[ToolCall]:
        edits = [
            {"prompt": "heartbeat.md", "oldString": "absent", "newString": "x"},
            {"prompt": "heartbeat.md", "oldString": "tick", "newString": "x"},
            {"prompt": "heartbeat.md", "oldString": "", "newString": "x"},
            {"prompt": "recover.md", "oldString": "a", "newString": "b"},
            {"prompt": "heartbeat.md", "oldString": "tick", "newString": "TICK", "replaceAll": True},
            {"prompt": "heartbeat.md", "oldString": "tock", "newString": "TOCK"},
        ]
        return [
            await engine.tools.call("evolve_prompt_edit", args, session="s", call_id=f"c{i}")
            for i, args in enumerate(edits)
        ]

    absent, many, empty, missing, replace_all, single = run_engine(ws, body)
    assert absent.output == "failed: oldString not found"
    assert absent.error == absent.output
    assert many.output == "failed: 2 matches for oldString, expected 1 (use replaceAll to replace all)"
    assert empty.output == "failed: oldString must not be empty"
    assert missing.output == "error: not found: prompts/recover.md"
    for failed in (absent, many, empty, missing):
        assert failed.commit is None
    assert replace_all.output == "successfully edited heartbeat.md"
    assert single.output == "successfully edited heartbeat.md"
    assert (ws / "prompts" / "heartbeat.md").read_text() == "TICK TOCK TICK"
    history = log(ws)
    assert [c["message"].splitlines()[0] for c in history] == [
        "edit prompt heartbeat.md",
        "edit prompt heartbeat.md",
        "initial",
    ]
    assert history[0]["sha"] == single.commit
    assert history[1]["sha"] == replace_all.commit
    assert history[0]["trailers"]["tool"] == "evolve_prompt_edit"
    assert history[0]["trailers"]["call"] == "c5"


def test_concurrent_prompt_edits_all_land(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "prompts" / "chat.md", "".join(f"marker-{i:02d}\n" for i in range(20)))

    async def body(engine: Engine) -> Any:
        sub = engine.bus.subscribe()
        results = await asyncio.gather(
            *(
                engine.tools.call(
                    "evolve_prompt_edit",
                    {"prompt": "chat.md", "oldString": f"marker-{i:02d}", "newString": f"edited-{i:02d}"},
                    session="s",
                    call_id=f"call-{i:02d}",
                )
                for i in range(20)
            )
        )
        events = []
        while (event := sub.get_nowait()) is not None:
            events.append(event)
        return results, events

    results, events = run_engine(ws, body)
    assert [r.output for r in results] == ["successfully edited chat.md"] * 20
    assert (ws / "prompts" / "chat.md").read_text() == "".join(f"edited-{i:02d}\n" for i in range(20))
    edits = [c for c in log(ws) if c["message"].startswith("edit prompt chat.md")]
    assert len(edits) == 20
    assert sorted(c["trailers"]["call"] for c in edits) == [f"call-{i:02d}" for i in range(20)]
    assert len({r.commit for r in results}) == 20
    warnings = [e.data for e in events if e.kind == "warning"]
    assert warnings == []
    assert not any("lock" in str(r.output) for r in results)


# ---------------------------------------------------------------------------------------------
# Hook tools: list, read, path safety


def test_hook_list(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "hooks" / "notexec.sh", PLAIN)  # skipped by discovery, so not listed
    result = call(tmp_path, "evolve_hook_list", {})
    assert result.output == "available hooks: kit.py, plain.sh"


def test_hook_read(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "hooks" / "sub" / "helper.txt", "a\nb\nc")

    async def body(engine: Engine) -> list[str | None]:
        args: list[dict[str, Any]] = [
            {"hook": "kit.py"},
            {"hook": "kit.py", "offset": 2, "limit": 1},
            {"hook": "kit.py", "limit": 0},
            {"hook": "sub/helper.txt", "offset": 2},
            {"hook": "nope.py"},
            {"hook": "sub"},
        ]
        return [(await engine.tools.call("evolve_hook_read", a)).output for a in args]

    full, second, empty, sub, missing, directory = run_engine(ws, body)
    assert full == KIT
    assert second == "import json, os, sys"
    assert empty == ""
    assert sub == "b\nc"
    assert missing == "error: not found: hooks/nope.py"
    assert directory == "error: not found: hooks/sub"


BAD_NAMES = [
    "..",
    "../x",
    "../prompts/chat.md",
    "sub/../../x",
    "/etc/passwd",
    "ABSOLUTE_KIT",
    "escape.sh",
    "outdir/inside.sh",
    "kit.py\0",
    "a\0b",
    "",
    ".",
]


def tool_args(tool: str, name: str) -> dict[str, Any]:
    if tool == "evolve_hook_read":
        return {"hook": name}
    if tool == "evolve_hook_edit":
        return {"hook": name, "oldString": "SECRET", "newString": "PWNED"}
    return {"hook": name, "content": "#!/bin/sh\necho PWNED\n"}


@pytest.mark.parametrize("name", BAD_NAMES)
def test_hook_tools_refuse_paths_outside_hooks(tmp_path: Path, name: str) -> None:
    ws = make_ws(tmp_path, FILES)
    outside = write_file(tmp_path / "outside.sh", OUTSIDE)  # not executable: not discovered
    outdir = tmp_path / "outdir"
    write_file(outdir / "inside.sh", OUTSIDE)
    os.symlink(outside, ws / "hooks" / "escape.sh")
    os.symlink(outdir, ws / "hooks" / "outdir")
    write_file(tmp_path / "x", OUTSIDE)
    if name == "ABSOLUTE_KIT":
        name = str(ws / "hooks" / "kit.py")
    tools = ["evolve_hook_read", "evolve_hook_write", "evolve_hook_edit", "evolve_hook_validate"]

    async def body(engine: Engine) -> list[ToolCall]:
        return [await engine.tools.call(tool, tool_args(tool, name)) for tool in tools]

    watched = [
        outside,
        outdir / "inside.sh",
        tmp_path / "x",
        ws / "hooks" / "kit.py",
        ws / "prompts" / "chat.md",
    ]
    before = {p: p.read_bytes() for p in watched}
    results = run_engine(ws, body)
    for tool, result in zip(tools, results, strict=True):
        assert result.output == f"error: invalid hooks path: {name}", tool
        assert result.error == result.output
        assert result.commit is None
    for path, content in before.items():
        assert path.read_bytes() == content
    assert not (ws / "x").exists()
    assert head(ws)["message"].startswith("initial")
    assert [c["message"].splitlines()[0] for c in log(ws)] == ["initial"]


def test_hook_write_cannot_create_files(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> list[ToolCall]:
        return [
            await engine.tools.call("evolve_hook_write", {"hook": "new.py", "content": PLAIN}),
            await engine.tools.call("evolve_hook_write", {"hook": "sub/new.py", "content": PLAIN}),
            await engine.tools.call(
                "evolve_hook_edit", {"hook": "new.py", "oldString": "a", "newString": "b"}
            ),
        ]

    write, nested, edit = run_engine(ws, body)
    assert write.output == "error: not found: hooks/new.py"
    assert nested.output == "error: not found: hooks/sub/new.py"
    assert edit.output == "error: not found: hooks/new.py"
    assert not (ws / "hooks" / "new.py").exists()
    assert not (ws / "hooks" / "sub").exists()
    assert [c["message"].splitlines()[0] for c in log(ws)] == ["initial"]


# ---------------------------------------------------------------------------------------------
# Hook changes: validation, install, commit, re-discovery


def test_hook_edit_that_breaks_the_test_is_rejected(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> Any:
        sub = engine.bus.subscribe()
        edit = await engine.tools.call(
            "evolve_hook_edit", {"hook": "kit.py", **BAD_EDIT}, session="s", call_id="c"
        )
        write = await engine.tools.call(
            "evolve_hook_write", {"hook": "kit.py", "content": KIT.replace("import json", "import jsonx")}
        )
        events = []
        while (event := sub.get_nowait()) is not None:
            events.append(event)
        return edit, write, events, set(engine.registry.hook_tools())

    edit, write, events, tools = run_engine(ws, body)
    for result in (edit, write):
        assert result.output.startswith("validation failed:\n")
        assert "FAIL: kit.py discover failed" in result.output
        assert result.error == "validation failed:"
        assert result.commit is None
    assert "jsonx" in edit.output  # the hook's traceback, from the test's stderr, is included
    assert (ws / "hooks" / "kit.py").read_text() == KIT
    assert [c["message"].splitlines()[0] for c in log(ws)] == ["initial"]
    assert tools == {"kit_mark", "kit_echo"}
    validations = [e.data for e in events if e.kind == "validation"]
    assert [v["ok"] for v in validations] == [False, False]


@pytest.mark.parametrize("alias", ["./kit.py", "sub/../kit.py"])
def test_hook_edit_validation_cannot_be_bypassed_with_an_unnormalised_name(
    tmp_path: Path, alias: str
) -> None:
    ws = make_ws(tmp_path, FILES)
    (ws / "hooks" / "sub").mkdir()

    async def body(engine: Engine) -> list[ToolCall]:
        return [
            await engine.tools.call("evolve_hook_edit", {"hook": alias, **BAD_EDIT}),
            await engine.tools.call(
                "evolve_hook_validate", {"hook": alias, "content": KIT.replace("json", "jsonx")}
            ),
        ]

    edit, validate = run_engine(ws, body)
    assert (ws / "hooks" / "kit.py").read_text() == KIT
    assert edit.output.startswith("validation failed:")
    assert validate.output.startswith("validation failed:")


def test_good_hook_edit_is_installed_committed_and_rediscovered(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    (ws / "hooks" / "kit.py").chmod(0o700)

    async def body(engine: Engine) -> Any:
        before = {s.name for s in engine.tools.specs()}
        result = await engine.tools.call(
            "evolve_hook_edit", {"hook": "kit.py", **GOOD_EDIT}, session="ses_9", call_id="call_9"
        )
        listed = await engine.tools.call("evolve_tool_invoke", {"name": "kit_added"})
        return before, result, {s.name for s in engine.tools.specs()}, listed

    before, result, after, invoked = run_engine(ws, body)
    assert "kit_added" not in before
    assert result.output == "successfully edited kit.py"
    assert result.error is None
    assert "kit_added" in after
    # Known to the engine: the invoke reaches the hook (which has no handler, so exits 4).
    assert invoked.output == "tool error: exit 4"
    path = ws / "hooks" / "kit.py"
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert '{"name": "added", "description": "Added"}' in path.read_text()
    commit = head(ws)
    assert commit["sha"] == result.commit
    assert commit["message"].splitlines()[0] == "edit hook kit.py"
    assert commit["files"] == ["hooks/kit.py"]
    assert commit["trailers"] == {
        "origin": "tool",
        "tool": "evolve_hook_edit",
        "session": "ses_9",
        "call": "call_9",
        "file": "hooks/kit.py",
    }


def test_good_hook_write_is_committed(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    new = KIT.replace('"Echo text"', '"Echo the text back"')
    result = run_engine(
        ws,
        lambda e: e.tools.call(
            "evolve_hook_write", {"hook": "kit.py", "content": new}, session="s", call_id="c"
        ),
    )
    assert result.output == "successfully wrote kit.py"
    assert (ws / "hooks" / "kit.py").read_text() == new
    commit = head(ws)
    assert commit["message"].splitlines()[0] == "write hook kit.py"
    assert commit["trailers"]["tool"] == "evolve_hook_write"
    assert commit["trailers"]["file"] == "hooks/kit.py"


def test_hook_write_without_test_and_non_discovered_file(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "hooks" / "later.sh", "not yet a script\n")  # not executable: not discovered
    new = '#!/bin/sh\ncat >/dev/null\n[ "$1" = discover ] && echo \'{"tools": [{"name": "t"}]}\'\nexit 0\n'

    async def body(engine: Engine) -> Any:
        before = [h.name for h in engine.registry.hooks]
        plain = await engine.tools.call(
            "evolve_hook_write", {"hook": "plain.sh", "content": PLAIN + "# changed\n"}
        )
        later = await engine.tools.call("evolve_hook_write", {"hook": "later.sh", "content": new})
        return (
            before,
            plain,
            later,
            [h.name for h in engine.registry.hooks],
            set(engine.registry.hook_tools()),
        )

    before, plain, later, after, tools = run_engine(ws, body)
    assert before == ["kit.py", "plain.sh"]
    assert plain.output == "successfully wrote plain.sh"
    assert later.output == "successfully wrote later.sh"
    assert stat.S_IMODE((ws / "hooks" / "later.sh").stat().st_mode) == 0o755
    assert after == ["kit.py", "later.sh", "plain.sh"]
    assert "later_t" in tools


def test_hook_validate(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> list[str | None]:
        args: list[dict[str, Any]] = [
            {"hook": "kit.py", "content": KIT},
            {"hook": "kit.py", "content": KIT.replace("import json", "import jsonx")},
            {"hook": "plain.sh", "content": "anything at all"},
            {"hook": "unknown.sh", "content": "x"},
        ]
        return [(await engine.tools.call("evolve_hook_validate", a)).output for a in args]

    good, bad, untested, unknown = run_engine(ws, body)
    assert good == "validation passed"
    assert bad is not None and bad.startswith("validation failed:\nFAIL: kit.py discover failed")
    # No test: says so, rather than "passed" (nothing was run).
    assert untested is not None and untested.startswith(
        "validation skipped: hooks/plain.sh has no registered test"
    )
    assert unknown is not None and unknown.startswith(
        "validation skipped: hooks/unknown.sh has no registered test"
    )
    assert (ws / "hooks" / "kit.py").read_text() == KIT
    assert [c["message"].splitlines()[0] for c in log(ws)] == ["initial"]


# ---------------------------------------------------------------------------------------------
# Hook tool list and invoke


def test_tool_list_format(tmp_path: Path) -> None:
    result = call(tmp_path, "evolve_tool_list", {})
    assert result.output == (
        "available tools:\n  kit_mark(level: how loud, path: where): Write a marker file\n  kit_echo(text: the text): Echo text"
    )


def test_tool_invoke(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> list[ToolCall]:
        return [
            await engine.tools.call("evolve_tool_invoke", {"name": "kit_echo", "args": {"text": "hello"}}),
            await engine.tools.call("evolve_tool_invoke", {"name": "kit_echo"}),
            await engine.tools.call("evolve_tool_invoke", {"name": "kit_echo", "args": {"text": 5}}),
            await engine.tools.call("evolve_tool_invoke", {"name": "kit_nope", "args": {}}),
            await engine.tools.call("evolve_tool_invoke", {"name": "zzz"}),
            await engine.tools.call("evolve_tool_invoke", {"name": "other_tool"}),
            await engine.tools.call(
                "evolve_tool_invoke",
                {"name": "kit_mark", "args": {"level": "high"}},
                session="s",
                call_id="c",
            ),
        ]

    echo, missing, wrong_type, nope, zzz, other, mark = run_engine(ws, body)
    assert echo.output == "hello"
    assert echo.error is None
    assert echo.commit is None  # nothing changed: no commit
    assert missing.output == 'tool error: invalid arguments for kit_echo: missing required argument "text"'
    assert missing.error == missing.output
    assert (
        wrong_type.output
        == 'tool error: invalid arguments for kit_echo: argument "text" must be of type string (got number 5)'
    )
    assert nope.output == "unknown tool: kit_nope (hook kit has no tool nope)"
    assert nope.error == nope.output
    assert zzz.output == "unknown tool: zzz"
    assert other.output == "unknown tool: other_tool"
    assert mark.output == "marked high"
    assert (ws / "marker.txt").read_text() == "high"
    commit = head(ws)
    assert commit["sha"] == mark.commit
    assert commit["message"].splitlines()[0] == "update mark"
    assert commit["files"] == ["marker.txt"]
    assert commit["trailers"] == {
        "origin": "tool",
        "tool": "evolve_tool_invoke",
        "session": "s",
        "call": "c",
        "hook": "kit.py",
    }


@pytest.mark.parametrize("via_invoke", [False, True], ids=["direct", "invoke"])
def test_invalid_enum_is_rejected_before_the_hook_runs(tmp_path: Path, via_invoke: bool) -> None:
    ws = make_ws(tmp_path, FILES)
    args = {"level": "medium", "path": "p"}

    async def body(engine: Engine) -> Any:
        if via_invoke:
            result = await engine.tools.call("evolve_tool_invoke", {"name": "kit_mark", "args": args})
        else:
            result = await engine.tools.call("kit_mark", args)
        assert engine.journal is not None
        engine.journal.flush()
        return result, engine.journal.runs(stage="execute_tool")

    result, runs = run_engine(ws, body)
    assert result.output == (
        'tool error: invalid arguments for kit_mark: argument "level" must be one of "low", "high" (got "medium")'
    )
    assert result.error == result.output
    assert not (ws / "marker.txt").exists()
    assert runs == []


def test_hook_tool_direct_call(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    result = run_engine(ws, lambda e: e.tools.call("kit_mark", {"level": "low"}, session="s", call_id="c9"))
    assert result.output == "marked low"
    assert (ws / "marker.txt").read_text() == "low"
    commit = head(ws)
    assert commit["message"].splitlines()[0] == "update mark"
    assert commit["trailers"]["tool"] == "kit_mark"
    assert commit["trailers"]["call"] == "c9"


# ---------------------------------------------------------------------------------------------
# Permissions


def test_permission_requests(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)

    async def body(engine: Engine) -> dict[str, Any]:
        p = engine.tools.permission_request
        return {
            "mark": p("kit_mark", {"level": "low", "path": "notes/a.md"}),
            "mark-no-arg": p("kit_mark", {"level": "low"}),
            "mark-empty-arg": p("kit_mark", {"level": "low", "path": ""}),
            "echo": p("kit_echo", {"text": "x"}),
            "hook_edit": p("evolve_hook_edit", {"hook": "kit.py", "oldString": "a", "newString": "b"}),
            "hook_write": p("evolve_hook_write", {"hook": "plain.sh", "content": ""}),
            "hook_validate": p("evolve_hook_validate", {"hook": "kit.py", "content": "#!/bin/sh\n"}),
            "asks": {s.name: s.to_dict()["asks"] for s in engine.tools.specs()},
            "invoke-mark": p(
                "evolve_tool_invoke", {"name": "kit_mark", "args": {"level": "low", "path": "p.md"}}
            ),
            "invoke-mark-no-args": p("evolve_tool_invoke", {"name": "kit_mark"}),
            "invoke-echo": p("evolve_tool_invoke", {"name": "kit_echo", "args": {"text": "x"}}),
            "invoke-unknown": p("evolve_tool_invoke", {"name": "zzz"}),
            "prompt_read": p("evolve_prompt_read", {"prompt": "chat.md"}),
            "prompt_edit": p("evolve_prompt_edit", {"prompt": "chat.md", "oldString": "a", "newString": "b"}),
            "datetime": p("evolve_datetime", {}),
            "unknown": p("nope", {}),
        }

    got = run_engine(ws, body)
    assert got["mark"] == {"permission": "kit_mark", "patterns": ["notes/a.md"]}
    assert got["mark-no-arg"] == {"permission": "kit_mark", "patterns": ["*"]}
    assert got["mark-empty-arg"] == {"permission": "kit_mark", "patterns": ["*"]}
    assert got["echo"] == {"permission": "kit_echo", "patterns": ["*"]}
    assert got["hook_edit"] == {"permission": "evolve_hook_edit", "patterns": ["kit.py"]}
    assert got["hook_write"] == {"permission": "evolve_hook_write", "patterns": ["plain.sh"]}
    # It runs a candidate of the agent's choosing (through the test): asked like the writes.
    assert got["hook_validate"] == {"permission": "evolve_hook_validate", "patterns": ["kit.py"]}
    assert got["asks"]["evolve_hook_validate"] is True
    assert got["invoke-mark"] == {"permission": "kit_mark", "patterns": ["p.md"]}
    assert got["invoke-mark-no-args"] == {"permission": "kit_mark", "patterns": ["*"]}
    assert got["invoke-echo"] == {"permission": "kit_echo", "patterns": ["*"]}
    assert got["invoke-unknown"] is None
    assert got["prompt_read"] is None
    assert got["prompt_edit"] is None
    assert got["datetime"] is None
    assert got["unknown"] is None
