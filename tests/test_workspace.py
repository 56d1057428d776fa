"""Tests for engine.workspace: workspace resolution, prompts, the state file."""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import threading
from pathlib import Path

import pytest

from engine.protocol.workspace import resolve_workspace
from engine.workspace.layout import (
    PROMPT_CONTRACT,
    PROMPT_FILES,
    StateFile,
    Workspace,
    write_atomic,
)

# --- resolve_workspace -----------------------------------------------------------------


def test_explicit_wins(tmp_path: Path) -> None:
    env = {"OPENCODE_EVOLVE_WORKSPACE": "/env/new", "OPENCODE_SIDECAR_WORKSPACE": "/env/old"}
    assert resolve_workspace(tmp_path / "ws", env) == tmp_path / "ws"
    assert resolve_workspace(str(tmp_path / "ws"), env) == tmp_path / "ws"


def test_evolve_variable_before_sidecar() -> None:
    env = {"OPENCODE_EVOLVE_WORKSPACE": "/env/new", "OPENCODE_SIDECAR_WORKSPACE": "/env/old"}
    assert resolve_workspace(None, env) == Path("/env/new")


def test_legacy_sidecar_variable() -> None:
    assert resolve_workspace(None, {"OPENCODE_SIDECAR_WORKSPACE": "/env/old"}) == Path("/env/old")


def test_home_workspace_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_workspace(None, {}) == tmp_path / "workspace"


def test_empty_strings_count_as_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {"OPENCODE_EVOLVE_WORKSPACE": "", "OPENCODE_SIDECAR_WORKSPACE": "/env/old"}
    assert resolve_workspace("", env) == Path("/env/old")
    both_empty = {"OPENCODE_EVOLVE_WORKSPACE": "", "OPENCODE_SIDECAR_WORKSPACE": ""}
    assert resolve_workspace("", both_empty) == tmp_path / "workspace"
    assert resolve_workspace(None, both_empty) == tmp_path / "workspace"


def test_result_is_absolute_and_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_workspace("rel/ws", {}) == tmp_path / "rel" / "ws"
    assert resolve_workspace(None, {"OPENCODE_EVOLVE_WORKSPACE": "rel2"}) == tmp_path / "rel2"
    assert resolve_workspace("~/w", {}) == tmp_path / "home" / "w"
    assert resolve_workspace("rel/ws", {}).is_absolute()


def test_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCODE_EVOLVE_WORKSPACE", str(tmp_path / "from-env"))
    assert resolve_workspace() == tmp_path / "from-env"


# --- Workspace layout and prompts -----------------------------------------------------


def test_layout(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    assert ws.hooks_dir == tmp_path / "hooks"
    assert ws.prompts_dir == tmp_path / "prompts"
    assert ws.tests_dir == tmp_path / "tests"
    assert ws.state_dir == tmp_path / "state"
    assert ws.config_file == tmp_path / "config" / "evolve.jsonc"
    assert ws.state_file == tmp_path / "state" / "evolve.json"


def test_prompt_contract_order() -> None:
    assert list(PROMPT_CONTRACT) == ["preamble", "chat", "heartbeat", "compaction", "recover"]
    assert tuple(f"{stage}.md" for stage in PROMPT_CONTRACT) == PROMPT_FILES


def test_read_prompts_without_directory(tmp_path: Path) -> None:
    assert Workspace(tmp_path).read_prompts() == {}


def test_read_prompts_omits_missing_files(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "chat.md").write_text("Chat prompt ✓\n", encoding="utf-8")
    (prompts / "recover.md").write_text("", encoding="utf-8")  # empty but present: kept
    (prompts / "heartbeat.md").mkdir()  # not a readable file: omitted
    (prompts / "other.md").write_text("not in the contract")
    got = Workspace(tmp_path).read_prompts()
    assert got == {"chat": "Chat prompt ✓\n", "recover": ""}
    assert list(got) == ["chat", "recover"]  # contract order


def test_read_prompts_all_present_in_contract_order(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    for stage in reversed(list(PROMPT_CONTRACT)):
        (prompts / PROMPT_CONTRACT[stage]).write_text(f"# {stage}\n")
    got = Workspace(tmp_path).read_prompts()
    assert list(got) == list(PROMPT_CONTRACT)
    assert got["compaction"] == "# compaction\n"


def test_read_prompts_rereads_files(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.prompts_dir.mkdir()
    (ws.prompts_dir / "chat.md").write_text("one")
    assert ws.read_prompts() == {"chat": "one"}
    (ws.prompts_dir / "chat.md").write_text("two")
    assert ws.read_prompts() == {"chat": "two"}


def test_read_prompts_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.prompts_dir.mkdir()
    (ws.prompts_dir / "chat.md").write_bytes(b"ok \xff end")
    assert ws.read_prompts() == {"chat": "ok \ufffd end"}


def test_read_prompt_single(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.prompts_dir.mkdir()
    (ws.prompts_dir / "heartbeat.md").write_text("beat")
    assert ws.read_prompt("heartbeat") == "beat"
    assert ws.read_prompt("chat") == ""


# --- write_atomic -----------------------------------------------------------------------------


def test_write_atomic_creates_parents_and_mode(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.txt"
    write_atomic(target, b"data", mode=0o640)
    assert target.read_bytes() == b"data"
    assert target.stat().st_mode & 0o777 == 0o640
    assert os.listdir(target.parent) == ["file.txt"]


def test_write_atomic_replaces_symlink_not_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, b"new")
    assert real.read_text() == "old"
    assert link.read_text() == "new" and not link.is_symlink()


# --- StateFile ----------------------------------------------------------------


@pytest.fixture
def state(tmp_path: Path) -> StateFile:
    return StateFile(Workspace(tmp_path).state_file)


def listing(state: StateFile) -> list[str]:
    return sorted(os.listdir(state.path.parent))


def test_missing_file_reads_empty(state: StateFile) -> None:
    assert state.read() == {}
    assert not state.path.parent.exists()


def test_update_creates_directory_and_file(state: StateFile) -> None:
    assert state.update({"heartbeat_count": 1}) == {"heartbeat_count": 1}
    assert state.read() == {"heartbeat_count": 1}
    assert listing(state) == ["evolve.json"]


def test_update_format_is_two_space_json_with_newline(state: StateFile) -> None:
    state.update({"model": {"providerID": "p", "modelID": "m"}, "heartbeat_session": None, "note": "é"})
    assert state.path.read_text(encoding="utf-8") == (
        "{\n"
        '  "model": {\n'
        '    "providerID": "p",\n'
        '    "modelID": "m"\n'
        "  },\n"
        '  "heartbeat_session": null,\n'
        '  "note": "é"\n'
        "}\n"
    )


def test_update_is_a_shallow_merge_preserving_unknown_fields(state: StateFile) -> None:
    state.path.parent.mkdir(parents=True)
    state.path.write_text(
        json.dumps({"custom": {"deep": [1, 2]}, "model": {"providerID": "a", "modelID": "b"}, "n": 1})
    )
    merged = state.update({"model": {"providerID": "c"}, "heartbeat_count": 2})
    expected = {"custom": {"deep": [1, 2]}, "model": {"providerID": "c"}, "n": 1, "heartbeat_count": 2}
    assert merged == expected
    assert json.loads(state.path.read_text()) == expected
    assert list(json.loads(state.path.read_text())) == ["custom", "model", "n", "heartbeat_count"]


def test_update_leaves_no_temp_files(state: StateFile) -> None:
    for i in range(20):
        state.update({f"k{i}": i})
    assert listing(state) == ["evolve.json"]
    assert len(state.read()) == 20


def test_failed_write_keeps_old_content(state: StateFile) -> None:
    """A real write failure (file size limit, EFBIG) halfway through the new content."""
    state.update({"keep": "me"})
    before = state.path.read_bytes()
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(OSError) as info:
            state.update({"big": "x" * 100_000})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert info.value.errno == errno.EFBIG
    assert state.path.read_bytes() == before
    assert listing(state) == ["evolve.json"]
    assert state.read() == {"keep": "me"}
    # and the next update works from the intact content
    assert state.update({"after": 1}) == {"keep": "me", "after": 1}


def test_failed_rename_keeps_old_content(state: StateFile, monkeypatch: pytest.MonkeyPatch) -> None:
    state.update({"keep": "me"})
    before = state.path.read_bytes()

    def refuse(*_: object) -> None:
        raise OSError(errno.EIO, "simulated I/O error")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        state.update({"keep": "changed"})
    monkeypatch.undo()
    assert state.path.read_bytes() == before
    assert listing(state) == ["evolve.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory_keeps_old_content(state: StateFile) -> None:
    state.update({"keep": "me"})
    before = state.path.read_bytes()
    state.path.parent.chmod(0o555)
    try:
        with pytest.raises(OSError):
            state.update({"keep": "changed"})
    finally:
        state.path.parent.chmod(0o755)
    assert state.path.read_bytes() == before
    assert listing(state) == ["evolve.json"]


def test_unserialisable_patch_keeps_old_content(state: StateFile) -> None:
    state.update({"keep": "me"})
    before = state.path.read_bytes()
    with pytest.raises(TypeError):
        state.update({"bad": object()})
    assert state.path.read_bytes() == before
    assert listing(state) == ["evolve.json"]


def test_readers_never_see_a_partial_file(state: StateFile) -> None:
    state.update({"seed": 0})
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            text = state.path.read_text(encoding="utf-8")
            try:
                if not isinstance(json.loads(text), dict):
                    bad.append(text)
            except ValueError:
                bad.append(text)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(200):
            state.update({"i": i, "pad": "p" * (i * 50)})
    finally:
        stop.set()
        thread.join()
    assert bad == []
    assert state.read()["i"] == 199


@pytest.mark.parametrize("content", ["{not json", "", '{"a": 1', "[1, 2]", '"text"', "null"])
def test_corrupt_file_is_moved_aside(state: StateFile, content: str) -> None:
    state.path.parent.mkdir(parents=True)
    state.path.write_text(content)
    assert state.read() == {}
    assert state.update({"a": 2}) == {"a": 2}
    aside = state.path.with_name("evolve.json.corrupt-1")
    assert aside.read_text() == content
    assert json.loads(state.path.read_text()) == {"a": 2}
    assert listing(state) == ["evolve.json", "evolve.json.corrupt-1"]


def test_corrupt_files_are_numbered_and_never_overwritten(state: StateFile) -> None:
    state.path.parent.mkdir(parents=True)
    state.path.write_text("first garbage")
    state.update({"a": 1})
    state.path.write_text("second garbage")
    state.update({"b": 2})
    assert state.path.with_name("evolve.json.corrupt-1").read_text() == "first garbage"
    assert state.path.with_name("evolve.json.corrupt-2").read_text() == "second garbage"
    assert state.read() == {"b": 2}


def test_non_utf8_file_is_moved_aside(state: StateFile) -> None:
    state.path.parent.mkdir(parents=True)
    state.path.write_bytes(b'{"a": "\xff\xfe"}')
    assert state.read() == {}
    assert state.update({"a": 2}) == {"a": 2}
    assert state.path.with_name("evolve.json.corrupt-1").read_bytes() == b'{"a": "\xff\xfe"}'


def test_concurrent_updates_of_different_keys_all_land(state: StateFile) -> None:
    rounds = 25
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            barrier.wait()
            for r in range(rounds):
                state.update({f"thread_{t}": r, f"thread_{t}_round_{r}": True})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    data = state.read()
    assert len(data) == 8 * (rounds + 1)
    for t in range(8):
        assert data[f"thread_{t}"] == rounds - 1
        assert all(data[f"thread_{t}_round_{r}"] is True for r in range(rounds))
    assert listing(state) == ["evolve.json"]


def test_read_prompts_sees_a_rewrite_of_the_same_size_in_the_same_instant(tmp_path: Path) -> None:
    """Prompts are kept between reads by their stat: a change of content that keeps the size and
    the modification time (an editor restoring it) is still seen, through the change time."""
    ws = Workspace(tmp_path)
    (tmp_path / "prompts").mkdir()
    chat = tmp_path / "prompts" / "chat.md"
    chat.write_text("aaaa", encoding="utf-8")
    first = chat.stat()
    assert ws.read_prompts()["chat"] == "aaaa"
    chat.write_text("bbbb", encoding="utf-8")
    os.utime(chat, ns=(first.st_atime_ns, first.st_mtime_ns))  # same size, same mtime
    assert ws.read_prompts()["chat"] == "bbbb"
    chat.unlink()
    assert "chat" not in ws.read_prompts()


def test_the_prompts_kept_between_reads_are_bounded(tmp_path: Path) -> None:
    """Replays read the prompts of many throwaway copies: what is kept of them does not grow."""
    from engine.workspace import layout as workspace

    for n in range(workspace.PROMPTS_KEPT):
        copy = tmp_path / f"copy{n}"
        (copy / "prompts").mkdir(parents=True)
        (copy / "prompts" / "chat.md").write_text(f"chat {n}", encoding="utf-8")
        assert Workspace(copy).read_prompts() == {"chat": f"chat {n}"}
    assert len(workspace._PROMPTS) <= workspace.PROMPTS_KEPT
