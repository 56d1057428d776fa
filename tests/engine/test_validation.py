"""Tests for engine.validation.validate: a hook's test script runs against a
temporary copy of the workspace with the candidate in place."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import pytest

from engine.changes.gitstore import GitStore
from engine.hooks.validation import Validation, validate
from tests.support.processes import pid_alive, wait_gone
from tests.support.workspace import make_ws, write_file

HOOK = "#!/bin/sh\necho original\n"
CANDIDATE = "#!/bin/sh\necho candidate\n"


FILES = {
    "hooks/h.sh": HOOK,
    "prompts/chat.md": "chat",
    "notes/deep/n.md": "note",
    ".hidden": "hidden",
    "state/evolve.json": "{}",
    "state/journal.sqlite3": "journal",
}


def committed_ws(tmp_path: Path) -> Path:
    """The workspace of FILES, committed."""
    ws = make_ws(tmp_path, FILES)
    GitStore(ws).ensure()
    return ws


def add_test_script(ws: Path, body: str, name: str = "t.sh", mode: int = 0o755) -> str:
    write_file(ws / "tests" / name, "#!/bin/sh\n" + body, mode)
    return name


def run(
    ws: Path,
    test: str | None,
    candidate: str | bytes = CANDIDATE,
    timeout_ms: int = 10_000,
    hook: str = "h.sh",
) -> Validation:
    return asyncio.run(validate(ws, hook, candidate, test, timeout_ms))


def temp_dirs() -> set[str]:
    """This process's validation copies (others', of engines running beside the tests, are not ours)."""
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"evolve-validate-{os.getpid()}-*")}


@pytest.mark.parametrize("test", [None, ""])
def test_no_test_registered(tmp_path: Path, test: str | None) -> None:
    ws = committed_ws(tmp_path)
    result = run(ws, test)
    assert result.ok is True
    assert result.output == "no test registered"
    assert result.test is None


def test_passing_test(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(ws, 'echo "all good"\n')
    result = run(ws, name)
    assert result.ok is True
    assert result.output == "all good\n"
    assert result.test == "t.sh"
    assert result.duration_ms > 0


def test_failing_test_output_is_stdout_then_stderr(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(ws, "echo to-stderr >&2\necho to-stdout\nexit 3\n")
    result = run(ws, name)
    assert result.ok is False
    assert result.output == "to-stdout\nto-stderr\n"


def test_the_copy(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(
        ws,
        """W="$OPENCODE_EVOLVE_WORKSPACE"
echo "ws=$W"
echo "pwd=$(pwd)"
for p in .git state hooks/h.sh prompts/chat.md notes/deep/n.md .hidden tests/t.sh; do
  if [ -e "$W/$p" ]; then echo "has $p"; else echo "no $p"; fi
done
[ -x "$W/hooks/h.sh" ] && echo "candidate executable"
echo "candidate says: $("$W/hooks/h.sh")"
""",
    )
    result = run(ws, name)
    assert result.ok is True, result.output
    lines = result.output.splitlines()
    copy = lines[0].removeprefix("ws=")
    assert copy != str(ws)
    assert Path(copy).name.startswith("evolve-validate-")
    assert lines[1] == f"pwd={copy}"
    assert lines[2:] == [
        "no .git",
        "no state",
        "has hooks/h.sh",
        "has prompts/chat.md",
        "has notes/deep/n.md",
        "has .hidden",
        "has tests/t.sh",
        "candidate executable",
        "candidate says: candidate",
    ]
    assert not Path(copy).exists()  # removed afterwards
    # The real workspace is untouched.
    assert (ws / "hooks" / "h.sh").read_text() == HOOK
    assert (ws / ".git").is_dir()
    assert (ws / "state" / "journal.sqlite3").read_text() == "journal"


def test_nested_state_and_git_directories_are_copied(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    write_file(ws / "notes" / "state" / "kept.md", "kept")
    name = add_test_script(ws, '[ -e "$OPENCODE_EVOLVE_WORKSPACE/notes/state/kept.md" ] && echo kept\n')
    result = run(ws, name)
    assert result.ok is True
    assert result.output == "kept\n"


def test_candidate_bytes_and_new_subdirectory(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(ws, 'cat "$OPENCODE_EVOLVE_WORKSPACE/hooks/sub/new.sh"\n')
    result = run(ws, name, candidate=b"#!/bin/sh\n# bytes \xc3\xa9\n", hook="sub/new.sh")
    assert result.ok is True
    assert result.output == "#!/bin/sh\n# bytes é\n"
    assert not (ws / "hooks" / "sub").exists()


def test_candidate_replacing_a_symlink_does_not_write_through_it(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    outside = write_file(tmp_path / "outside.sh", HOOK, 0o755)
    (ws / "hooks" / "h.sh").unlink()
    os.symlink(outside, ws / "hooks" / "h.sh")
    name = add_test_script(ws, '"$OPENCODE_EVOLVE_WORKSPACE/hooks/h.sh"\n')
    result = run(ws, name)
    assert result.ok is True
    assert result.output == "candidate\n"
    assert outside.read_text() == HOOK


def test_test_script_need_not_be_executable(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(ws, "echo ran\n", mode=0o644)
    result = run(ws, name)
    assert result.ok is True
    assert result.output == "ran\n"
    assert (ws / "tests" / name).stat().st_mode & 0o777 == 0o644  # only the copy is chmod-ed


def test_missing_test_file(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    before = temp_dirs()
    result = run(ws, "missing_test.py")
    assert result.ok is False
    assert "tests/missing_test.py" in result.output
    assert "not found" in result.output
    assert temp_dirs() <= before


def test_test_without_shebang(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    write_file(ws / "tests" / "noshebang", "echo hi\n", 0o755)
    result = run(ws, "noshebang")
    assert result.ok is False
    assert "cannot start tests/noshebang" in result.output


def test_hanging_test_and_its_grandchild_are_killed(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    pids = tmp_path / "pids"
    # The grandchild ignores SIGTERM, so only the final SIGKILL of the group stops it.
    name = add_test_script(
        ws,
        f"""echo "$OPENCODE_EVOLVE_WORKSPACE" > {tmp_path}/copy
sh -c 'trap "" TERM; while :; do sleep 1; done' &
echo $! > {pids}
echo started
sleep 30
""",
    )
    started = time.monotonic()
    result = run(ws, name, timeout_ms=500)
    elapsed = time.monotonic() - started
    assert result.ok is False
    assert "timeout" in result.output
    assert "500 ms" in result.output
    assert elapsed < 6
    grandchild = int(pids.read_text())
    try:
        assert wait_gone(grandchild), f"grandchild {grandchild} survived the timeout"
    finally:
        if pid_alive(grandchild):
            os.kill(grandchild, 9)
    copy = Path((tmp_path / "copy").read_text().strip())
    assert not copy.exists()


def test_timeout_keeps_the_output_so_far(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(ws, "echo checked-one\necho progress >&2\nexec sleep 30\n")
    result = run(ws, name, timeout_ms=500)
    assert result.ok is False
    assert "timeout" in result.output
    assert "checked-one" in result.output
    assert "progress" in result.output


def test_background_child_holding_stdout_does_not_turn_a_pass_into_a_timeout(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    pids = tmp_path / "bg.pid"
    name = add_test_script(ws, f"sleep 30 &\necho $! > {pids}\necho passed\nexit 0\n")
    try:
        result = run(ws, name, timeout_ms=1500)
    finally:
        if pids.exists() and pid_alive(int(pids.read_text())):
            os.kill(int(pids.read_text()), 9)
    assert result.ok is True, result.output
    assert result.output == "passed\n"


def test_temp_dir_removed_after_pass_and_fail(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    record = tmp_path / "copies"
    name = add_test_script(
        ws,
        f'echo "$OPENCODE_EVOLVE_WORKSPACE" >> {record}\n[ "$(cat "$OPENCODE_EVOLVE_WORKSPACE/hooks/h.sh")" = "#!/bin/sh" ]\n',
    )
    assert run(ws, name, candidate="#!/bin/sh").ok is True
    assert run(ws, name, candidate="#!/bin/sh\nbroken").ok is False
    copies = record.read_text().splitlines()
    assert len(copies) == 2
    assert copies[0] != copies[1]
    assert not any(Path(c).exists() for c in copies)


def test_environment_is_inherited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = committed_ws(tmp_path)
    monkeypatch.setenv("EVOLVE_TEST_MARKER", "inherited")
    monkeypatch.setenv("OPENCODE_EVOLVE_WORKSPACE", "/somewhere/else")
    name = add_test_script(ws, 'echo "$EVOLVE_TEST_MARKER $OPENCODE_EVOLVE_WORKSPACE"\n')
    result = run(ws, name)
    marker, copy = result.output.split()
    assert marker == "inherited"
    assert copy != "/somewhere/else"
    assert Path(copy).name.startswith("evolve-validate-")


def test_concurrent_validations_use_separate_copies(tmp_path: Path) -> None:
    ws = committed_ws(tmp_path)
    name = add_test_script(
        ws, 'cat "$OPENCODE_EVOLVE_WORKSPACE/hooks/h.sh"\necho "$OPENCODE_EVOLVE_WORKSPACE"\n'
    )

    async def main() -> list[Validation]:
        return list(
            await asyncio.gather(
                *(validate(ws, "h.sh", f"#!/bin/sh\n# v{i}\n", name, 10_000) for i in range(5))
            )
        )

    results = asyncio.run(main())
    assert [r.output.splitlines()[1] for r in results] == [f"# v{i}" for i in range(5)]
    assert len({r.output.splitlines()[2] for r in results}) == 5
