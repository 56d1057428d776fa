"""Tests for engine.gitstore (GitStore, trailers) and the engine's external-change commits."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.changes.gitstore import GitStore, parse_trailers
from engine.changes.headref import head_from_files
from engine.runtime import Engine
from tests.support.in_process import run_engine
from tests.support.workspace import make_ws, write_file


def git(root: Path, *args: str) -> str:
    """Plain git in a temporary test repository (never the project's)."""
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


def subjects(store: GitStore) -> list[str]:
    return [str(c["message"]).splitlines()[0] for c in store.log()]


FILES = {
    "prompts/chat.md": "chat\n",
    "hooks/h.sh": "#!/bin/sh\ncat >/dev/null\n",
    "state/evolve.json": "{}\n",
}


# ---------------------------------------------------------------------------------------------
# ensure


def test_ensure_creates_repo_with_initial_commit(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    assert not store.exists()
    commit = store.ensure()
    assert commit is not None
    assert store.exists()
    assert commit.message == "initial\n\nEvolve-Origin: initial"
    assert set(commit.files) == {"prompts/chat.md", "hooks/h.sh"}
    [entry] = store.log()
    assert entry["sha"] == commit.sha
    assert entry["message"] == "initial\n\nEvolve-Origin: initial"
    assert entry["trailers"] == {"origin": "initial"}
    assert sorted(entry["files"]) == ["hooks/h.sh", "prompts/chat.md"]
    assert git(ws, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    # The executable bit is recorded.
    assert "100755" in git(ws, "ls-files", "-s", "hooks/h.sh")


def test_ensure_on_an_empty_directory_makes_an_empty_initial_commit(tmp_path: Path) -> None:
    ws = tmp_path / "empty"
    ws.mkdir()
    commit = GitStore(ws).ensure()
    assert commit is not None
    assert commit.files == ()
    assert subjects(GitStore(ws)) == ["initial"]


def test_state_is_excluded_and_never_committed(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    exclude = (ws / ".git" / "info" / "exclude").read_text(encoding="utf-8")
    assert "/state/" in exclude.splitlines()
    assert "state/evolve.json" not in git(ws, "ls-files")
    write_file(ws / "state" / "evolve.json", '{"heartbeat_time": "now"}\n')
    write_file(ws / "state" / "journal.sqlite3", "x")
    assert store.dirty_files() == []
    assert store.commit("state only", {}) is None
    # A nested directory called state is an ordinary directory.
    write_file(ws / "notes" / "state" / "keep.md", "kept")
    commit = store.commit("nested", {})
    assert commit is not None
    assert commit.files == ("notes/state/keep.md",)
    # The workspace's own .gitignore is never created or touched.
    assert not (ws / ".gitignore").exists()


def test_looking_for_changes_never_takes_the_index_lock_from_the_users_git(tmp_path: Path) -> None:
    """`git status` writes back the stat data it refreshed, under .git/index.lock, unless told not
    to: a `git mv` of the user's at that moment would fail. The engine's look leaves the index alone."""
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    chat = ws / "prompts" / "chat.md"
    os.utime(chat, (time.time() + 5, time.time() + 5))  # the same content, newer: a refresh to write
    index = ws / ".git" / "index"
    before = (index.stat().st_ino, index.stat().st_mtime_ns)
    assert store.dirty_files() == []
    assert (index.stat().st_ino, index.stat().st_mtime_ns) == before
    git(ws, "status", "--porcelain")  # plain git does write it: the check above could fail
    assert (index.stat().st_ino, index.stat().st_mtime_ns) != before


def test_ensure_is_idempotent(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    GitStore(ws).ensure()
    again = GitStore(ws)
    assert again.ensure() is None
    assert subjects(again) == ["initial"]
    exclude = (ws / ".git" / "info" / "exclude").read_text(encoding="utf-8")
    assert exclude.splitlines().count("/state/") == 1


def test_ensure_on_an_existing_repo_adds_excludes_without_committing(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    git(ws, "init", "-q", "-b", "trunk")
    exclude = ws / ".git" / "info" / "exclude"
    exclude.write_text("*.tmp", encoding="utf-8")  # no trailing newline
    store = GitStore(ws)
    assert store.ensure() is None
    assert store.log() == []
    assert store.head() is None
    assert exclude.read_text(encoding="utf-8").splitlines()[0] == "*.tmp"
    assert "/state/" in exclude.read_text(encoding="utf-8").splitlines()
    assert "state/evolve.json" not in store.dirty_files()


# ---------------------------------------------------------------------------------------------
# commit, trailers, log


def test_commit_returns_none_when_nothing_changed(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    head = store.head()
    assert store.commit("nothing", {"Origin": "tool"}) is None
    assert store.head() == head
    write_file(ws / "prompts" / "chat.md", "changed\n")
    commit = store.commit("changed", {"Origin": "tool"})
    assert commit is not None
    assert commit.files == ("prompts/chat.md",)
    assert store.head() == commit.sha
    assert store.commit("again", {}) is None


def test_commit_only_given_paths(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    write_file(ws / "prompts" / "chat.md", "changed\n")
    write_file(ws / "other.md", "other\n")
    commit = store.commit("only chat", {}, paths=["prompts/chat.md"])
    assert commit is not None
    assert commit.files == ("prompts/chat.md",)
    assert store.dirty_files() == ["other.md"]


def test_deleted_file_is_committed(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    (ws / "prompts" / "chat.md").unlink()
    assert store.dirty_files() == ["prompts/chat.md"]
    commit = store.commit("delete", {})
    assert commit is not None
    assert commit.files == ("prompts/chat.md",)


def test_file_versions_before_and_after_a_commit(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    initial = store.ensure()
    assert initial is not None
    chat = "prompts/chat.md"
    assert store.file_versions(initial.sha, chat, chat) == (None, b"chat\n"), "a root commit has no before"
    write_file(ws / chat, "chat\r\nmore\n")
    edit = store.commit("edit", {})
    assert edit is not None
    assert store.file_versions(edit.sha, chat, chat) == (b"chat\n", b"chat\r\nmore\n"), "bytes as they are"
    git(ws, "mv", chat, "prompts/talk.md")
    write_file(ws / "new.md", "new\n")
    (ws / "hooks" / "h.sh").unlink()
    moved = store.commit("move, add, delete", {})
    assert moved is not None
    assert store.file_versions(moved.sha, "prompts/talk.md", chat) == (b"chat\r\nmore\n", b"chat\r\nmore\n")
    assert store.file_versions(moved.sha, "new.md", "new.md") == (None, b"new\n")
    assert store.file_versions(moved.sha, "hooks/h.sh", "hooks/h.sh") == (
        b"#!/bin/sh\ncat >/dev/null\n",
        None,
    )
    assert store.file_versions(moved.sha, "prompts", "prompts") == (None, None), "a directory is no file"
    assert store.file_versions(moved.sha, "../ws/new.md", "../ws/new.md") == (None, None)
    # A read cut at max_bytes leaves the next read whole.
    assert store.file_versions(edit.sha, chat, chat, max_bytes=3) == (b"cha", b"cha")
    assert store.file_versions(edit.sha, chat, chat) == (b"chat\n", b"chat\r\nmore\n")


def test_trailers_round_trip(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    write_file(ws / "prompts" / "chat.md", "x\n")
    trailers = {
        "Origin": "tool",
        "Tool": "evolve_hook_edit",
        "Session": "ses_1",
        "Call": "call 7\nwith a newline",
        "Skipped": None,
        "Empty": "",
        "Stage": "heartbeat mutate_request",
    }
    commit = store.commit("edit hook h.sh", trailers)
    assert commit is not None
    expected = {
        "origin": "tool",
        "tool": "evolve_hook_edit",
        "session": "ses_1",
        "call": "call 7 with a newline",
        "stage": "heartbeat mutate_request",
    }
    assert parse_trailers(commit.message) == expected
    [entry, _initial] = store.log()
    assert entry["trailers"] == expected
    assert str(entry["message"]).startswith("edit hook h.sh\n\nEvolve-Origin: tool\n")
    assert entry["files"] == ["prompts/chat.md"]
    # git itself sees them as trailers.
    parsed = git(ws, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "Evolve-Tool: evolve_hook_edit" in parsed
    assert "Evolve-Call: call 7 with a newline" in parsed


def test_log_is_newest_first_and_limited(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    for i in range(3):
        write_file(ws / f"f{i}.md", str(i))
        store.commit(f"commit {i}", {"N": str(i)})
    assert subjects(store) == ["commit 2", "commit 1", "commit 0", "initial"]
    limited = store.log(limit=2)
    assert [e["trailers"] for e in limited] == [{"n": "2"}, {"n": "1"}]
    assert [e["files"] for e in limited] == [["f2.md"], ["f1.md"]]
    assert all(isinstance(e["time"], int) and abs(e["time"] - time.time()) < 120 for e in limited)


def test_log_of_a_directory_without_commits(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    assert GitStore(ws).log() == []


def test_multiline_message_body(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    write_file(ws / "a.md", "a")
    commit = store.commit("subject line\n\nA body\nwith lines", {"Origin": "operator"})
    assert commit is not None
    entry = store.log(1)[0]
    assert entry["message"] == "subject line\n\nA body\nwith lines\n\nEvolve-Origin: operator"
    assert entry["trailers"] == {"origin": "operator"}


# ---------------------------------------------------------------------------------------------
# Identity


def isolate_git_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)


def test_identity_falls_back_to_evolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git_config(monkeypatch, tmp_path)
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    write_file(ws / "a.md", "a")
    store.commit("second", {})
    for rev in ("HEAD", "HEAD~1"):
        assert git(ws, "log", "-1", "--format=%an <%ae>|%cn <%ce>", rev).strip() == (
            "evolve <evolve@localhost>|evolve <evolve@localhost>"
        )
    # Nothing was written to the repository's config.
    config = (ws / ".git" / "config").read_text(encoding="utf-8")
    assert "[user]" not in config


def test_identity_fallback_follows_git_config_global(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git_config(monkeypatch, tmp_path)
    home = tmp_path / "home"
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Home User\n\temail = home@example.org\n", encoding="utf-8"
    )
    ws = make_ws(tmp_path, FILES)
    commit = GitStore(ws).ensure()  # git ignores ~/.gitconfig here: GIT_CONFIG_GLOBAL=/dev/null
    assert commit is not None
    assert git(ws, "log", "-1", "--format=%an <%ae>").strip() == "evolve <evolve@localhost>"


def test_repository_identity_is_used_when_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git_config(monkeypatch, tmp_path)
    ws = make_ws(tmp_path, FILES)
    git(ws, "init", "-q")
    git(ws, "config", "user.name", "Ada Operator")
    git(ws, "config", "user.email", "ada@example.org")
    store = GitStore(ws)
    store.ensure()
    store.commit("by ada", {})
    assert git(ws, "log", "-1", "--format=%an <%ae>").strip() == "Ada Operator <ada@example.org>"


def test_partial_identity_fills_only_the_missing_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git_config(monkeypatch, tmp_path)
    ws = make_ws(tmp_path, FILES)
    git(ws, "init", "-q")
    git(ws, "config", "user.name", "Only Name")
    store = GitStore(ws)
    store.ensure()
    store.commit("partial", {})
    assert git(ws, "log", "-1", "--format=%an <%ae>").strip() == "Only Name <evolve@localhost>"


# ---------------------------------------------------------------------------------------------
# dirty_files


def test_dirty_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_file(ws / "a.txt", "a")
    write_file(ws / "b.txt", "b" * 200)
    write_file(ws / "keep.txt", "keep")
    store = GitStore(ws)
    store.ensure()
    assert store.dirty_files() == []
    write_file(ws / "a.txt", "modified")
    write_file(ws / "new.txt", "untracked")
    write_file(ws / "my file.txt", "spaces")
    write_file(ws / "café ☕.md", "unicode")
    write_file(ws / "dir" / "sub" / "deep.txt", "nested untracked")
    write_file(ws / 'quote"and\\back.txt', "odd")
    (ws / "b.txt").rename(ws / "renamed b.txt")
    git(ws, "add", "-A", "--", "b.txt", "renamed b.txt")  # a staged rename shows as "R"
    assert "R  " in git(ws, "status", "--porcelain")
    files = store.dirty_files()
    assert sorted(files) == sorted(
        [
            "a.txt",
            "new.txt",
            "my file.txt",
            "café ☕.md",
            "dir/sub/deep.txt",
            'quote"and\\back.txt',
            "renamed b.txt",
        ]
    )
    assert "b.txt" not in files
    commit = store.commit("all", {})
    assert commit is not None
    assert set(commit.files) == set(files)  # diff --name-only shows a rename by its new name
    assert store.dirty_files() == []


CHANGES: dict[str, Callable[[Path], object]] = {
    "write": lambda ws: (ws / "prompts" / "chat.md").write_text("changed\n"),
    "create": lambda ws: (ws / "new.txt").write_text("new\n"),
    "create deep": lambda ws: (ws / "dir" / "sub" / "new.txt").write_text("new\n"),
    "delete": lambda ws: (ws / "dir" / "sub" / "deep.txt").unlink(),
    "rename": lambda ws: (ws / "prompts" / "chat.md").rename(ws / "prompts" / "other.md"),
    "chmod": lambda ws: (ws / "hooks" / "h.sh").chmod(0o700),
    "keep the time": lambda ws: _write_keeping_mtime(ws / "prompts" / "chat.md"),
    "mkdir": lambda ws: (ws / "dir" / "empty").mkdir(),
}


def _write_keeping_mtime(path: Path) -> None:
    before = path.stat()
    path.write_text("changed, same mtime\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # the change time still moves


def untouched_workspace(tmp_path: Path) -> tuple[GitStore, float]:
    """A committed workspace and a moment after which nothing in it has changed."""
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "dir" / "sub" / "deep.txt", "deep\n")
    store = GitStore(ws)
    store.ensure()
    time.sleep(0.05)  # file times come from a coarse clock
    moment = time.time()
    time.sleep(0.05)
    return store, moment


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_change_after_a_moment_is_seen(tmp_path: Path, change: str) -> None:
    store, moment = untouched_workspace(tmp_path)
    assert store.touched_since(moment) is False
    CHANGES[change](store.root)
    assert store.touched_since(moment) is True


def test_an_untouched_workspace_needs_no_git_to_know(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, moment = untouched_workspace(tmp_path)
    (store.root / "state" / "journal").write_text("the engine's own\n")  # state/ and .git do not count
    (store.root / ".git" / "scratch").write_text("git's own\n")

    def no_git(*args: Any, **kw: Any) -> str:
        raise AssertionError("git was run")

    monkeypatch.setattr(store, "_git", no_git)
    assert store.changed_after(moment) == []
    monkeypatch.undo()
    (store.root / "new.txt").write_text("new\n")
    assert store.changed_after(moment) == ["new.txt"]


# ---------------------------------------------------------------------------------------------
# head: read from .git where git's layout is the plain one, else asked of git


def head_store(tmp_path: Path) -> GitStore:
    store = GitStore(tmp_path / "ws")
    write_file(store.root / "a.txt", "a\n")
    store.ensure()
    return store


def rev_parse(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def test_head_is_read_without_git_for_a_loose_a_packed_and_a_detached_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = head_store(tmp_path)
    root = store.root
    expected = {"loose": rev_parse(root)}
    write_file(root / "a.txt", "b\n")
    store.commit("second", {"Origin": "test"})
    git(root, "pack-refs", "--all")  # the branch ref now lives only in packed-refs
    assert not (root / ".git" / "refs" / "heads" / "main").exists()
    expected["packed"] = rev_parse(root)
    git(root, "checkout", "-q", "--detach", "HEAD~1")
    expected["detached"] = rev_parse(root)

    def no_git(*args: Any, **kw: Any) -> str:
        raise AssertionError("git was run")

    monkeypatch.setattr(store, "_git", no_git)
    assert store.head() == expected["detached"]
    monkeypatch.undo()
    git(root, "checkout", "-q", "main")
    monkeypatch.setattr(store, "_git", no_git)
    assert store.head() == expected["packed"] != expected["loose"]


def test_head_of_an_unborn_branch_is_none_and_a_worktree_asks_git(tmp_path: Path) -> None:
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    git(unborn, "init", "-q", "-b", "main")
    assert GitStore(unborn).head() is None

    store = head_store(tmp_path)
    other = tmp_path / "other"
    git(store.root, "worktree", "add", "-q", "--detach", str(other))
    assert (other / ".git").is_file()  # a worktree's .git is a file naming the real one
    assert GitStore(other).head() == rev_parse(other) == rev_parse(store.root)


def test_a_head_naming_an_odd_ref_is_left_to_git(tmp_path: Path) -> None:
    store = head_store(tmp_path)
    git(store.root, "symbolic-ref", "refs/heads/alias", "refs/heads/main")  # a symbolic ref chain
    git(store.root, "symbolic-ref", "HEAD", "refs/heads/alias")
    assert head_from_files(store.root / ".git") is None
    assert store.head() == rev_parse(store.root)


# ---------------------------------------------------------------------------------------------
# External changes through the Engine


def test_engine_start_makes_initial_commit_once(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    run_engine(ws, lambda e: asyncio.sleep(0))
    run_engine(ws, lambda e: asyncio.sleep(0))
    assert subjects(GitStore(ws)) == ["initial"]
    assert "state/" not in git(ws, "ls-files")


def test_external_edit_before_start_is_committed_separately(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    run_engine(ws, lambda e: asyncio.sleep(0))
    write_file(ws / "prompts" / "chat.md", "edited by a person\n")
    write_file(ws / "hooks" / "new.sh", "#!/bin/sh\ncat >/dev/null\n", 0o755)
    write_file(ws / "state" / "evolve.json", '{"x": 1}\n')

    async def body(engine: Engine) -> Any:
        return [h.name for h in engine.registry.hooks]

    hooks = run_engine(ws, body)
    assert hooks == ["h.sh", "new.sh"]
    store = GitStore(ws)
    [external, initial] = store.log()
    assert str(initial["message"]).startswith("initial")
    message = str(external["message"])
    assert message.startswith("external change: ")
    assert "prompts/chat.md" in message.splitlines()[0]
    assert "hooks/new.sh" in message.splitlines()[0]
    assert external["trailers"] == {"origin": "external"}
    assert sorted(external["files"]) == ["hooks/new.sh", "prompts/chat.md"]
    # Nothing left over, and a restart without changes commits nothing.
    assert store.dirty_files() == []
    run_engine(ws, lambda e: asyncio.sleep(0))
    assert len(store.log()) == 2


def test_external_change_message_shortens_long_lists(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    run_engine(ws, lambda e: asyncio.sleep(0))
    for i in range(8):
        write_file(ws / "notes" / f"n{i}.md", str(i))
    run_engine(ws, lambda e: asyncio.sleep(0))
    subject = subjects(GitStore(ws))[0]
    assert subject.startswith("external change: notes/n")
    assert subject.endswith(" and 3 more")
    assert subject.count("notes/") == 5


def test_new_workspace_commits_initial_then_nothing_external(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    run_engine(ws, lambda e: asyncio.sleep(0))
    store = GitStore(ws)
    assert subjects(store) == ["initial"]
    assert sorted(store.log()[0]["files"]) == ["hooks/h.sh", "prompts/chat.md"]


async def poll(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


async def watcher_ready(ws: Path, store: GitStore) -> bool:
    """Touch a probe file until the watcher commits it: its watches are then in place."""
    deadline = time.monotonic() + 10
    n = 0
    while time.monotonic() < deadline:
        n += 1
        write_file(ws / "probe.md", str(n))
        if await poll(lambda: "probe.md" in store.log(1)[0]["files"], timeout=0.5):
            return True
    return False


DISCOVER_TOOL = (
    '#!/bin/sh\ncat >/dev/null\n[ "$1" = discover ] && echo \'{"tools": [{"name": "TOOL"}]}\'\nexit 0\n'
)


def test_watcher_commits_external_edits_and_rediscovers(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    write_file(ws / "hooks" / "h.sh", DISCOVER_TOOL.replace("TOOL", "first"), 0o755)
    store = GitStore(ws)

    async def body(engine: Engine) -> Any:
        assert set(engine.registry.hook_tools()) == {"h_first"}
        assert await watcher_ready(ws, store)
        write_file(ws / "prompts" / "chat.md", "edited while running\n")

        def prompt_committed() -> bool:
            entry = store.log(1)[0]
            return (
                str(entry["message"]).startswith("external change:") and "prompts/chat.md" in entry["files"]
            )

        prompt_ok = await poll(prompt_committed)
        write_file(ws / "hooks" / "h.sh", DISCOVER_TOOL.replace("TOOL", "second"), 0o755)
        tools_ok = await poll(lambda: "h_second" in engine.registry.hook_tools())
        hook_ok = await poll(lambda: "hooks/h.sh" in store.log(1)[0]["files"])
        return prompt_ok, tools_ok, hook_ok, set(engine.registry.hook_tools())

    prompt_ok, tools_ok, hook_ok, tools = run_engine(ws, body, watch=True)
    assert prompt_ok, subjects(store)
    assert tools_ok, tools
    assert hook_ok, subjects(store)
    assert tools == {"h_second"}
    external = [e for e in store.log() if str(e["message"]).startswith("external change:")]
    assert all(e["trailers"] == {"origin": "external"} for e in external)
    assert len(external) >= 2
    assert store.dirty_files() == []


def test_watcher_ignores_state_changes(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)

    async def body(engine: Engine) -> Any:
        assert await watcher_ready(ws, store)
        write_file(ws / "state" / "evolve.json", '{"changed": true}\n')
        write_file(ws / "marker.md", "marker")  # a real change, to know the watcher has caught up
        return await poll(lambda: "marker.md" in store.log(1)[0]["files"])

    assert run_engine(ws, body, watch=True)
    assert subjects(store)[0] == "external change: marker.md"
    assert all("state/" not in f for e in store.log() for f in e["files"])


# ---------------------------------------------------------------------------------------------
# lock files git leaves behind

HOLDER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL)  # as git does
print("holding", flush=True)
sys.stdin.readline()  # until the test says so
print("present" if os.path.exists(sys.argv[1]) else "removed", flush=True)
os.unlink(sys.argv[1])
"""


def test_a_stale_index_lock_is_removed_and_the_commit_made(tmp_path: Path) -> None:
    store = GitStore(make_ws(tmp_path, FILES))
    store.ensure()
    (tmp_path / "ws" / ".git" / "index.lock").write_text("")  # left by a git killed mid-commit
    write_file(tmp_path / "ws" / "prompts" / "chat.md", "changed\n")
    commit = store.commit("edit", {"Origin": "tool"}, ["prompts/chat.md"])
    assert commit is not None and commit.files == ("prompts/chat.md",)
    assert not (tmp_path / "ws" / ".git" / "index.lock").exists()
    (note,) = store.take_notes()
    assert note.startswith("removed .git/index.lock")
    assert "no process holds it" in note


def test_a_lock_a_live_process_holds_is_left_alone(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, FILES)
    store = GitStore(ws)
    store.ensure()
    lock = ws / ".git" / "index.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "holding"
    write_file(ws / "prompts" / "chat.md", "changed\n")
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(store.commit("edit", {}, None)))
    worker.start()
    time.sleep(1.0)  # well past the point where a stale lock would have been removed
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "present"  # nobody removed it under the holder
    holder.wait(10)
    worker.join(30)
    assert result and result[0] is not None  # the commit went through once the holder let go
    assert store.take_notes() == []
    assert store.clear_stale_locks() == []
