"""Discovery without running a hook: scanning hooks/ and reading registrations (running the discover stage
is in tests/engine/test_discovery.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from engine.hooks.discovery import HookFile, registration_from, scan_hooks
from tests.support.workspace import write_file


def script(hooks: Path, name: str, mode: int = 0o755) -> Path:
    return write_file(hooks / name, "#!/bin/sh\ncat >/dev/null\n", mode)


def names(files: list[HookFile]) -> list[str]:
    return [f.name for f in files]


def hook_file(name: str = "notes.py") -> HookFile:
    return HookFile(name, Path("/ws/hooks") / name)


def test_scan_missing_directory(tmp_path: Path) -> None:
    assert scan_hooks(tmp_path / "nope") == ([], [])


def test_scan_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    assert scan_hooks(tmp_path / "hooks") == ([], [])


def test_scan_ignores_dot_and_dunder_names(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    script(hooks, "ok.sh")
    script(hooks, ".hidden.sh")
    script(hooks, "__init__.py")
    script(hooks, "__main__")
    (hooks / "__pycache__").mkdir()
    (hooks / ".git").mkdir()
    os.symlink(tmp_path / "missing", hooks / ".dangling")
    found, skipped = scan_hooks(hooks)
    assert names(found) == ["ok.sh"]
    assert skipped == []  # ignored entries are not even reported


def test_scan_single_underscore_is_not_ignored(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    script(hooks, "_private.sh")
    assert names(scan_hooks(hooks)[0]) == ["_private.sh"]


def test_scan_skips_bad_entries_with_reasons_and_keeps_the_rest(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    script(hooks, "a.sh")
    script(hooks, "plain.txt", 0o644)
    (hooks / "subdir").mkdir()
    script(hooks / "subdir", "inner.sh")  # not scanned: no recursion
    os.symlink(tmp_path / "does-not-exist", hooks / "dangling")
    os.mkfifo(hooks / "pipe")
    target = script(tmp_path, "outside.sh")
    os.symlink(target, hooks / "linked.sh")  # stat follows links: an executable file
    os.symlink(hooks / "subdir", hooks / "dirlink")
    script(hooks, "z.sh", 0o700)
    script(hooks, "group-only.sh", 0o610)  # one execute bit is enough

    found, skipped = scan_hooks(hooks)
    assert names(found) == ["a.sh", "group-only.sh", "linked.sh", "z.sh"]
    assert all(f.path == hooks / f.name for f in found)
    reasons = {s.name: s.reason for s in skipped}
    assert set(reasons) == {"plain.txt", "subdir", "dangling", "pipe", "dirlink"}
    assert "not executable" in reasons["plain.txt"]
    assert "chmod +x hooks/plain.txt" in reasons["plain.txt"]
    assert "directory" in reasons["subdir"]
    assert "directory" in reasons["dirlink"]
    assert "dangling" in reasons["dangling"]
    assert "not a regular file" in reasons["pipe"]
    # Skipped entries are reported in the same sorted order.
    assert [s.name for s in skipped] == ["dangling", "dirlink", "pipe", "plain.txt", "subdir"]


def test_scan_sorts_by_utf16_code_units(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    # U+1F600 is a surrogate pair (D83D DE00) in UTF-16 and sorts before U+FF61, although its
    # code point is larger; uppercase sorts before "_" and lowercase.
    given = ["b", "｡", "a", "B", "😀", "é", "_x", "Z", "A", "10", "9", "a.sh", "a-b"]
    for name in given:
        script(hooks, name)
    found, _ = scan_hooks(hooks)
    expected = ["10", "9", "A", "B", "Z", "_x", "a", "a-b", "a.sh", "b", "é", "😀", "｡"]
    assert names(found) == expected
    assert sorted(given) != expected  # code-point order would differ (😀 after ｡)


def test_hook_file_stem() -> None:
    assert HookFile("notes.py", Path("x")).stem == "notes"
    assert HookFile("archive.tar.gz", Path("x")).stem == "archive.tar"
    assert HookFile("noext", Path("x")).stem == "noext"
    assert HookFile("trailing.", Path("x")).stem == "trailing"


def test_registration_from_full_result() -> None:
    reg = registration_from(
        hook_file(),
        {
            "name": "memo",
            "test": "memo_test.py",
            "tools": [
                {
                    "name": "add",
                    "description": "Add a note",
                    "parameters": {"text": "the text", "level": {"enum": ["low", "high"], "optional": True}},
                    "permission": {"arg": "level"},
                },
                {"name": "list"},
            ],
            "ignored": "other keys are ignored",
        },
        None,
    )
    assert reg.name == "memo"
    assert reg.test == "memo_test.py"
    assert reg.problems == []
    assert [t.name for t in reg.tools] == ["memo_add", "memo_list"]
    add, lst = reg.tools
    assert (add.hook, add.file, add.short, add.description) == ("memo", "notes.py", "add", "Add a note")
    assert add.parameters == {"text": "the text", "level": {"enum": ["low", "high"], "optional": True}}
    assert add.schema["properties"]["level"] == {
        "type": "string",
        "enum": ["low", "high"],
        "description": "level",
    }
    assert add.schema["required"] == ["text"]
    assert add.permission == {"arg": "level"}
    assert lst.description == ""
    assert lst.parameters == {}
    assert lst.schema["properties"] == {}
    assert lst.permission is None


def test_registration_defaults_from_empty_result() -> None:
    reg = registration_from(hook_file("x.sh"), {}, None)
    assert (reg.name, reg.test, reg.tools, reg.problems) == ("x", None, [], [])


@pytest.mark.parametrize(
    ("result", "error"), [(None, "exit 1"), (None, "timeout"), ({"name": "n"}, "exit 2")]
)
def test_registration_defaults_on_failure(result: dict[str, Any] | None, error: str) -> None:
    reg = registration_from(hook_file("notes.py"), result, error)
    assert reg.name == "notes"
    assert reg.test is None
    assert reg.tools == []
    assert len(reg.problems) == 1
    assert "discover failed" in reg.problems[0]
    assert error in reg.problems[0]


def test_registration_bad_name_and_test_types() -> None:
    reg = registration_from(hook_file(), {"name": 5, "test": ["t.py"], "tools": {"name": "x"}}, None)
    assert reg.name == "notes"
    assert reg.test is None
    assert reg.tools == []
    assert len(reg.problems) == 3
    assert any("'name'" in p for p in reg.problems)
    assert any("'test'" in p for p in reg.problems)
    assert any("'tools' must be a list" in p for p in reg.problems)


def test_registration_empty_name_falls_back_to_stem() -> None:
    reg = registration_from(hook_file(), {"name": "", "test": ""}, None)
    assert reg.name == "notes"
    assert reg.test is None


def test_malformed_tools_are_skipped_with_problems() -> None:
    reg = registration_from(
        hook_file(),
        {
            "name": "n",
            "tools": [
                "not an object",
                {"description": "no name"},
                {"name": ""},
                {"name": 7},
                {"name": "good", "parameters": {"p": "desc"}},
                {"name": "badparams", "parameters": ["p"]},
                {"name": "badspec", "parameters": {"p": 5}},
                {"name": "badenum", "parameters": {"p": {"enum": [1, 2]}}},
                {"name": "also_good"},
            ],
        },
        None,
    )
    assert [t.name for t in reg.tools] == ["n_good", "n_also_good"]
    assert len(reg.problems) == 7
    assert all("skipped" in p for p in reg.problems)
    assert any("#1" in p and "object" in p for p in reg.problems)
    assert any("'n_badspec'" in p and '"p"' in p for p in reg.problems)


@pytest.mark.parametrize(
    "short", ["has space", "dot.ted", "slash/y", "ünïcode", "x" * 63, "semi;colon", "new\nline"]
)
def test_invalid_tool_names_are_skipped(short: str) -> None:
    reg = registration_from(hook_file(), {"name": "n", "tools": [{"name": short}, {"name": "ok"}]}, None)
    assert [t.name for t in reg.tools] == ["n_ok"]
    assert len(reg.problems) == 1
    assert "letters, digits, _ and -" in reg.problems[0]


def test_tool_name_with_trailing_newline_is_skipped() -> None:
    reg = registration_from(hook_file(), {"name": "n", "tools": [{"name": "ok\n"}]}, None)
    assert reg.tools == []
    assert len(reg.problems) == 1


@pytest.mark.parametrize("short", ["a", "with-dash", "Under_Score", "x" * 62])
def test_valid_tool_names(short: str) -> None:
    reg = registration_from(hook_file(), {"name": "n", "tools": [{"name": short}]}, None)
    assert [t.name for t in reg.tools] == [f"n_{short}"]
    assert len(reg.tools[0].name) <= 64
    assert reg.problems == []


def test_registration_name_makes_tool_names_invalid() -> None:
    reg = registration_from(hook_file(), {"name": "bad name", "tools": [{"name": "t"}]}, None)
    assert reg.name == "bad name"
    assert reg.tools == []
    assert len(reg.problems) == 1


def test_a_bad_stages_list_means_every_stage_with_a_problem(tmp_path: Path) -> None:
    reg = registration_from(hook_file(), {"stages": "mutate_request"}, None)
    assert reg.stages is None and reg.handles("tool_before")
    assert reg.problems == [
        "discover: 'stages' must be a list of stage names, got 'mutate_request'; every stage"
    ]
    reg = registration_from(hook_file(), {"stages": ["idle"]}, None)
    assert reg.stages == frozenset({"idle"}) and not reg.handles("tool_after") and reg.problems == []
