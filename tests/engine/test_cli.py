"""Command-level tests: the real `evolve` command in a subprocess, real workspaces, real git.

Every command runs as `python -m engine ... --workspace DIR` with HOME pointing into the test's
temporary directory and GIT_CONFIG_GLOBAL pointing at an empty file, so neither the user's
configuration nor an `EVOLVE_*` / `OPENCODE_*` variable of the calling shell can interfere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.environment import REPO, isolated_env
from tests.support.processes import pid_alive, wait_gone

EXAMPLE_FILES = [
    "config/evolve.jsonc",
    "evals/count-notes.jsonc",
    "evals/forget-a-note.jsonc",
    "evals/remember-a-deadline.jsonc",
    "evals/two-errands.jsonc",
    "evals/whats-on-my-list.jsonc",
    "hooks/notes.py",
    "prompts/chat.md",
    "prompts/compaction.md",
    "prompts/heartbeat.md",
    "prompts/preamble.md",
    "prompts/recover.md",
    "tests/notes_test.py",
]
BUILTIN_TOOLS = {
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
NOTES_TOOLS = {"notes_add", "notes_list", "notes_forget", "notes_stats"}


# ---- helpers ----------------------------------------------------------------------------------


def evolve_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "engine", *args]


def evolve(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `evolve ARGS` to completion; stdout and stderr are decoded as UTF-8 (bad bytes replaced)."""
    return subprocess.run(
        evolve_argv(*args),
        env=env,
        cwd=env["HOME"],
        capture_output=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        check=False,
    )


def evolve_many(env: dict[str, str], argvs: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Start every `evolve` command at once, then wait for all of them."""
    procs = [
        subprocess.Popen(
            evolve_argv(*argv),
            env=env,
            cwd=env["HOME"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            encoding="utf-8",
            errors="replace",
        )
        for argv in argvs
    ]
    results = []
    for argv, proc in zip(argvs, procs, strict=True):
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(argv, proc.returncode, out, err))
    return results


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.stdout.strip(), f"no output (exit {proc.returncode}); stderr:\n{proc.stderr}"
    return json.loads(proc.stdout)


def git(env: dict[str, str], ws: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ws), *args], env=env, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def head(env: dict[str, str], ws: Path) -> str:
    return git(env, ws, "rev-parse", "HEAD").strip()


def commit_count(env: dict[str, str], ws: Path) -> int:
    return int(git(env, ws, "rev-list", "--count", "HEAD"))


def commit_message(env: dict[str, str], ws: Path, rev: str = "HEAD") -> str:
    return git(env, ws, "log", "-1", "--format=%B", rev)


def commit_files(env: dict[str, str], ws: Path, rev: str = "HEAD") -> list[str]:
    return git(env, ws, "show", "--name-only", "--format=", rev).split()


def hook(ws: Path, name: str, body: str, mode: int = 0o755) -> Path:
    """Write hooks/NAME (a shell script unless `body` starts with its own #! line)."""
    path = ws / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body if body.startswith("#!") else "#!/bin/sh\n" + body)
    path.chmod(mode)
    return path


def files_of(ws: Path) -> dict[str, bytes]:
    """Every file of the workspace except git's and the engine's runtime state."""
    out = {}
    for path in sorted(ws.rglob("*")):
        rel = path.relative_to(ws).as_posix()
        if rel.split("/")[0] in (".git", "state") or path.is_dir():
            continue
        out[rel] = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return out


def runs_by_hook(verbose: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """The runs of a `stage -v` output by (hook file, stage)."""
    return {(r["hook"], r["stage"]): r for r in verbose["runs"]}


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("home")
    return isolated_env(home, drop=("PYTHON",), PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")


@pytest.fixture(scope="module")
def template(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `evolve init` example workspace; tests work on copies of it."""
    ws = tmp_path_factory.mktemp("template") / "ws"
    proc = evolve(env, "init", str(ws))
    assert proc.returncode == 0, proc.stderr
    return ws


@pytest.fixture
def example(template: Path, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(template, ws, symlinks=True)
    return ws


# ---- 1. init, doctor, the example's own test --------------------------------------------------


def test_init_creates_the_example_workspace_and_never_overwrites(env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "fresh"
    proc = evolve(env, "init", str(ws))
    assert proc.returncode == 0, proc.stderr
    out = as_json(proc)
    assert set(out) == {"workspace", "created", "kept", "commit"}
    assert out["workspace"] == str(ws)
    assert sorted(out["created"]) == EXAMPLE_FILES
    assert out["kept"] == []

    notes = ws / "hooks" / "notes.py"
    assert notes.is_file() and os.access(notes, os.X_OK)
    assert (ws / "tests" / "notes_test.py").is_file()
    assert sorted(p.name for p in (ws / "prompts").iterdir()) == [
        "chat.md",
        "compaction.md",
        "heartbeat.md",
        "preamble.md",
        "recover.md",
    ]
    assert (ws / "config" / "evolve.jsonc").is_file()

    # A git repository whose only commit is `initial`, holding every example file.
    assert out["commit"] == head(env, ws)
    assert git(env, ws, "log", "--format=%s").split("\n")[:-1] == ["initial"]
    assert "Evolve-Origin: initial" in commit_message(env, ws)
    assert sorted(git(env, ws, "ls-files").split()) == EXAMPLE_FILES
    assert git(env, ws, "status", "--porcelain") == ""

    doctor = evolve(env, "doctor", "--workspace", str(ws))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert doctor.stdout.strip().splitlines()[-1].startswith("ok:")

    own_test = subprocess.run(
        [str(ws / "tests" / "notes_test.py")], cwd=ws, env=env, capture_output=True, text=True, timeout=60
    )
    assert own_test.returncode == 0, own_test.stdout + own_test.stderr
    assert "4 checks, 4 passed" in own_test.stdout

    # Again, after a hand edit: nothing is overwritten, everything is listed as kept.
    chat = ws / "prompts" / "chat.md"
    chat.write_text("my own chat prompt\n")
    again = evolve(env, "init", str(ws))
    assert again.returncode == 0, again.stderr
    out2 = as_json(again)
    assert out2["created"] == []
    assert sorted(out2["kept"]) == EXAMPLE_FILES
    assert out2["commit"] is None
    assert chat.read_text() == "my own chat prompt\n"
    assert commit_count(env, ws) == 1
    assert "kept existing prompts/chat.md" in again.stderr


# ---- 2./3. stage merging and recover ----------------------------------------------------------


def test_stage_merges_arrays_and_strings_of_two_hooks(env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hook(
        ws,
        "a.sh",
        'cat >/dev/null\n[ "$1" = mutate_request ] || exit 0\n'
        'echo \'{"system": ["from a"], "note": "first", "n": 1, "only_a": true}\'\n',
    )
    # b answers on two lines: lines of one run merge too, later keys winning.
    hook(
        ws,
        "b.sh",
        'cat >/dev/null\n[ "$1" = mutate_request ] || exit 0\n'
        'echo \'{"system": ["from b", "more b"], "n": 0}\'\necho \'{"note": "second", "n": 2}\'\n',
    )
    proc = evolve(env, "stage", "mutate_request", "--input", '{"system": []}', "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert as_json(proc) == {
        "system": ["from a", "from b", "more b"],
        "note": "first\nsecond",
        "n": 2,
        "only_a": True,
    }


def test_recover_steps_in_when_mutate_request_fails(env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "prompts").mkdir(parents=True)
    (ws / "prompts" / "recover.md").write_text("RECOVER PROMPT\n")
    # Fails in mutate_request (exit 3) and in recover too (exit 4): the second failure is swallowed.
    hook(
        ws,
        "a_fail.sh",
        'cat >/dev/null\ncase "$1" in\n'
        "  mutate_request) echo 'a_fail broke' >&2; exit 3;;\n"
        "  recover) echo 'a_fail cannot recover' >&2; exit 4;;\n"
        "esac\n",
    )
    hook(
        ws,
        "b_helper.py",
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "stage = sys.argv[1]\n"
        "data = json.loads(sys.stdin.read() or '{}')\n"
        "if stage == 'recover':\n"
        "    print(json.dumps({'system': ['recovered from ' + data['failed_hook'] + ': ' + data['error']]}))\n"
        "elif stage == 'mutate_request':\n"
        "    print(json.dumps({'system': ['helper system']}))\n",
    )
    args = ("stage", "mutate_request", "--input", '{"session": {"id": "s1"}, "system": []}')
    proc = evolve(env, *args, "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    assert as_json(proc) == {
        "system": ["recovered from mutate_request: exit 3", "helper system"],
        "user": "RECOVER PROMPT\n",
    }
    assert "hooks/a_fail.sh failed during mutate_request (recover ran)" in proc.stderr

    verbose = evolve(env, *args, "-v", "--workspace", str(ws))
    assert verbose.returncode == 0, verbose.stderr
    out = as_json(verbose)
    assert out["recovered"] is True
    assert out["failed"] == ["a_fail.sh"]
    assert out["merged"] == as_json(proc)
    assert [(r["hook"], r["stage"]) for r in out["runs"]] == [
        ("a_fail.sh", "mutate_request"),
        ("a_fail.sh", "recover"),
        ("b_helper.py", "recover"),
        ("b_helper.py", "mutate_request"),
    ]
    runs = runs_by_hook(out)
    assert runs["a_fail.sh", "mutate_request"]["error"] == "exit 3"
    assert "a_fail broke" in runs["a_fail.sh", "mutate_request"]["stderr"]
    assert runs["a_fail.sh", "recover"]["error"] == "exit 4"
    assert "a_fail cannot recover" in runs["a_fail.sh", "recover"]["stderr"]
    assert runs["b_helper.py", "recover"]["error"] is None
    assert runs["b_helper.py", "recover"]["input"]["error"] == "exit 3"
    assert runs["b_helper.py", "mutate_request"]["result"] == {"system": ["helper system"]}


# ---- 4./5. hung hooks and bad output ----------------------------------------------------------


def test_a_hung_hook_and_its_grandchild_are_killed_at_the_timeout(
    env: dict[str, str], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    pids = tmp_path / "pids"
    pids.mkdir()
    # The grandchild ignores SIGTERM, so only the group SIGKILL after the grace period ends it.
    hook(
        ws,
        "hang.sh",
        'cat >/dev/null\n[ "$1" = mutate_request ] || exit 0\n'
        f"sh -c 'trap \"\" TERM; echo $$ > {pids}/grandchild; exec sleep 60' &\n"
        f"echo $$ > {pids}/hook\n"
        "sleep 60\n",
    )
    started = time.monotonic()
    proc = evolve(
        {**env, "EVOLVE_HOOK_TIMEOUT": "1000"},
        "stage",
        "mutate_request",
        "-v",
        "--workspace",
        str(ws),
        timeout=30,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 15, f"the command took {elapsed:.1f} s"
    out = as_json(proc)
    assert out["failed"] == ["hang.sh"]
    assert runs_by_hook(out)["hang.sh", "mutate_request"]["error"] == (
        "timeout after 1000 ms (process group killed)"
    )
    hook_pid = int((pids / "hook").read_text())
    grandchild_pid = int((pids / "grandchild").read_text())
    assert wait_gone(hook_pid, grandchild_pid, timeout=3), (
        f"still running: hook {hook_pid} {pid_alive(hook_pid)}, "
        f"grandchild {grandchild_pid} {pid_alive(grandchild_pid)}"
    )


def test_garbage_partial_huge_and_non_utf8_output_each_get_a_precise_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    quiet_discover = 'cat >/dev/null\n[ "$1" = discover ] && exit 0\n'
    hook(ws, "1_garbage.sh", quiet_discover + "echo 'this is not json'\n")
    hook(ws, "2_partial.sh", quiet_discover + 'printf \'{"ok": true}\\n{"system": ["cut\'\n')
    hook(ws, "3_huge.sh", quiet_discover + "yes '{\"a\": 1}' | head -n 2000\n")
    hook(ws, "4_latin1.sh", quiet_discover + 'printf \'{"a": "caf\\351"}\\n\'\n')
    hook(ws, "5_array.sh", quiet_discover + "echo '[1, 2]'\n")
    hook(ws, "6_good.sh", quiet_discover + 'printf \'{"fine": "yes"}\'\n')  # no newline: still a line
    proc = evolve(
        {**env, "EVOLVE_HOOK_OUTPUT_LIMIT": "1000"},
        "stage",
        "observe_message",
        "-v",
        "--input",
        '{"answer": "hi"}',
        "--workspace",
        str(ws),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    out = as_json(proc)
    assert out["merged"] == {"fine": "yes"}
    assert out["failed"] == ["1_garbage.sh", "2_partial.sh", "3_huge.sh", "4_latin1.sh", "5_array.sh"]
    errors = {hook_name: run["error"] for (hook_name, _stage), run in runs_by_hook(out).items()}
    assert errors == {
        "1_garbage.sh": "stdout line 1 is not JSON: 'this is not json'",
        "2_partial.sh": """stdout line 2 is not JSON: '{"system": ["cut'""",
        "3_huge.sh": "stdout exceeded 1000 bytes (process group killed)",
        "4_latin1.sh": """stdout line 1 is not valid UTF-8: '{"a": "caf\ufffd"}'""",
        "5_array.sh": "stdout line 1 is not a JSON object: '[1, 2]'",
        "6_good.sh": None,
    }
    for name in ("1_garbage.sh", "2_partial.sh", "3_huge.sh", "4_latin1.sh", "5_array.sh"):
        assert f"hooks/{name} failed during observe_message" in proc.stderr


# ---- 6. entries of hooks/ that are not hooks --------------------------------------------------


def test_hidden_dunder_and_non_executable_entries_are_never_run(env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    marks = tmp_path / "marks"
    marks.mkdir()
    for name in (".hidden.sh", "__private.sh", "noexec.sh"):
        hook(
            ws,
            name,
            f'cat >/dev/null\ntouch {marks}/{name}-$1\necho \'{{"ran": ["{name}"]}}\'\n',
            mode=0o644 if name == "noexec.sh" else 0o755,
        )
    (ws / "hooks" / "__pycache__").mkdir()
    hook(
        ws,
        "good.sh",
        'cat >/dev/null\nif [ "$1" = discover ]; then echo \'{"test": "good_test.sh"}\'; exit 0; fi\n'
        'echo \'{"ran": ["good.sh"]}\'\n',
    )
    (ws / "tests").mkdir()
    (ws / "tests" / "good_test.sh").write_text("#!/bin/sh\nexit 0\n")
    (ws / "tests" / "good_test.sh").chmod(0o755)

    proc = evolve(env, "stage", "heartbeat", "-v", "--workspace", str(ws))
    assert proc.returncode == 0, proc.stderr
    out = as_json(proc)
    assert out["merged"] == {"ran": ["good.sh"]}
    assert out["hooks"] == ["good.sh"]
    assert list(marks.iterdir()) == []
    assert "hooks/noexec.sh skipped: not executable" in proc.stderr

    doctor = evolve(env, "doctor", "--json", "--workspace", str(ws))
    assert doctor.returncode == 1, doctor.stdout
    report = as_json(doctor)
    problems = [f for f in report["findings"] if f["level"] in ("error", "warning")]
    assert problems == [
        {
            "level": "error",
            "where": "hooks/noexec.sh",
            "message": "skipped: not executable (run: chmod +x hooks/noexec.sh)",
        }
    ]
    assert [h["file"] for h in report["hooks"]] == ["good.sh"]
    assert list(marks.iterdir()) == []


# ---- 7. path-taking tools refuse escapes ------------------------------------------------------


def test_path_taking_tools_refuse_every_escape(env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    hook(ws, "ok.sh", "cat >/dev/null\n")
    (ws / "config").mkdir()
    (ws / "config" / "evolve.jsonc").write_text("{}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("classified: 4242\n")
    (ws / "hooks" / "evil").symlink_to(secret)
    (ws / "hooks" / "link").symlink_to(outside, target_is_directory=True)
    # A first command makes the repository, so that the parallel calls below find it clean.
    setup = evolve(env, "tools", "--workspace", str(ws))
    assert setup.returncode == 0, setup.stderr
    before_head, before_files = head(env, ws), files_of(ws)
    before_outside = {p.name: p.read_bytes() for p in outside.iterdir()}

    # json.dumps sends the NUL byte as the JSON escape \u0000 (a raw NUL cannot be in an argv).
    bad_names = ["..", "../config/evolve.jsonc", str(secret), "evil", "link/secret.txt", "notes.py\u0000"]
    new_hook = "#!/bin/sh\necho pwned\n"
    tools = {
        "evolve_hook_read": {},
        "evolve_hook_write": {"content": new_hook},
        "evolve_hook_edit": {"oldString": "classified", "newString": "PWNED"},
        "evolve_hook_validate": {"content": new_hook},
    }
    cases = [(tool, name) for tool in tools for name in bad_names]
    results = evolve_many(
        env,
        [
            [
                "call",
                tool,
                "--json",
                "--args",
                json.dumps({"hook": name, **tools[tool]}),
                "--workspace",
                str(ws),
            ]
            for tool, name in cases
        ],
    )
    for (tool, name), proc in zip(cases, results, strict=True):
        where = f"{tool}({name!r})"
        assert proc.returncode == 1, f"{where}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        call = as_json(proc)
        assert call["output"] == f"error: invalid hooks path: {name}", where
        assert call["error"] and call["commit"] is None, where
        assert "classified: 4242" not in proc.stdout, where  # the outside file was not read

    assert head(env, ws) == before_head, git(env, ws, "log", "--stat", f"{before_head}..HEAD")
    assert files_of(ws) == before_files
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before_outside
    assert git(env, ws, "status", "--porcelain") == ""


# ---- 8./9. hook edits and hook tool arguments --------------------------------------------------


def test_hook_edit_is_validated_then_installed_committed_and_rediscovered(
    env: dict[str, str], example: Path
) -> None:
    notes = example / "hooks" / "notes.py"
    original, before_head = notes.read_bytes(), head(env, example)

    broken = evolve(
        env,
        "call",
        "evolve_hook_edit",
        "--args",
        json.dumps({"hook": "notes.py", "oldString": 'NAME = "notes"', "newString": 'NAME = ("notes"'}),
        "--workspace",
        str(example),
    )
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert broken.stdout.startswith("validation failed")
    assert "SyntaxError" in broken.stdout
    assert notes.read_bytes() == original
    assert head(env, example) == before_head
    assert git(env, example, "status", "--porcelain") == ""

    fixed = evolve(
        env,
        "call",
        "evolve_hook_edit",
        "--args",
        json.dumps(
            {
                "hook": "notes.py",
                "oldString": '"text": "the note text",',
                "newString": '"text": "the words of the note",',
            }
        ),
        "--call-id",
        "call_42",
        "--session",
        "ses_7",
        "--workspace",
        str(example),
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.strip() == "successfully edited notes.py"
    assert b'"the words of the note"' in notes.read_bytes()
    assert os.access(notes, os.X_OK)
    assert commit_count(env, example) == 2
    message = git(env, example, "log", "-1", "--format=%s%n%b")
    assert message.startswith("edit hook notes.py\n")
    for trailer in ("Evolve-Tool: evolve_hook_edit", "Evolve-Call: call_42", "Evolve-Session: ses_7"):
        assert trailer in message.splitlines(), message
    assert commit_files(env, example) == ["hooks/notes.py"]
    assert git(env, example, "status", "--porcelain") == ""

    tools = as_json(evolve(env, "tools", "--json", "--workspace", str(example)))
    add = next(t for t in tools if t["name"] == "notes_add")
    assert add["parameters"]["properties"]["text"]["description"] == "the words of the note"


def test_an_invalid_enum_argument_is_rejected_before_the_hook_runs(
    env: dict[str, str], example: Path
) -> None:
    before_head = head(env, example)
    proc = evolve(
        env,
        "call",
        "notes_add",
        "--args",
        '{"text": "call the bank", "priority": "urgent"}',
        "--workspace",
        str(example),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "priority" in proc.stdout and "urgent" in proc.stdout
    assert '"low", "normal", "high"' in proc.stdout
    assert not (example / "notes" / "notes.json").exists()
    assert not (example / "notes").exists()
    assert head(env, example) == before_head


# ---- 10./11. configuration from the environment and from the file -----------------------------


def test_env_overrides_of_every_type_reach_the_engine(
    env: dict[str, str], example: Path, tmp_path: Path
) -> None:
    slow = tmp_path / "slow"
    (slow / "config").mkdir(parents=True)
    (slow / "config" / "evolve.jsonc").write_text('{"hook_timeout": 60000}\n')
    hook(slow, "slow.sh", 'cat >/dev/null\n[ "$1" = heartbeat ] || exit 0\nsleep 5\necho \'{"late": 1}\'\n')
    # The environment wins over the file: the slow hook times out after 500 ms, not 60 s.
    proc = evolve({**env, "EVOLVE_HOOK_TIMEOUT": "500"}, "stage", "heartbeat", "-v", "--workspace", str(slow))
    assert proc.returncode == 0, proc.stderr
    out = as_json(proc)
    assert runs_by_hook(out)["slow.sh", "heartbeat"]["error"] == "timeout after 500 ms (process group killed)"
    assert "late" not in out["merged"]

    good = {
        "EVOLVE_HEARTBEAT_MS": "-1",  # integer
        "EVOLVE_HOOK_TIMEOUT": "20_000",  # positive integer
        "EVOLVE_HEARTBEAT_TITLE": "beat",  # string
        "EVOLVE_HEARTBEAT_AGENT": "build",  # string
        "EVOLVE_MODEL": "anthropic/claude-sonnet-4",  # provider/model
        "EVOLVE_HEARTBEAT_CLEANUP": "archive",  # choice
        "EVOLVE_HEARTBEAT_CLEANUP_COUNT": "null",  # nullable integer
        "EVOLVE_HEARTBEAT_CLEANUP_TOKENS": "100000",  # nullable integer
        "EVOLVE_HEARTBEAT_SKIP_ACTIVE": "no",  # boolean
        "EVOLVE_HOOK_OUTPUT_LIMIT": "65536",
        "EVOLVE_JOURNAL_MAX_RUNS": "100",
    }
    healthy = evolve({**env, **good}, "doctor", "--json", "--workspace", str(example))
    report = as_json(healthy)
    assert healthy.returncode == 0, report["findings"]
    assert report["healthy"] is True

    bad = {
        "EVOLVE_HEARTBEAT_SKIP_ACTIVE": "maybe",
        "EVOLVE_HOOK_TIMEOUT": "soon",
        "EVOLVE_HEARTBEAT_MS": "1.5",
        "EVOLVE_MODEL": "no-slash",
        "EVOLVE_HEARTBEAT_CLEANUP": "sometimes",
        "EVOLVE_HEARTBEAT_CLEANUP_COUNT": "0",
        "EVOLVE_JOURNAL_MAX_RUNS": "-5",
    }
    sick = evolve({**env, **bad}, "doctor", "--workspace", str(example))
    assert sick.returncode == 1, sick.stdout
    errors = [line for line in sick.stdout.splitlines() if line.startswith("error")]
    for var in bad:
        assert any(var in line for line in errors), f"{var} not reported:\n{sick.stdout}"
    assert "EVOLVE_HEARTBEAT_SKIP_ACTIVE: expected true/false/1/0/yes/no, got 'maybe'" in sick.stdout


def test_json5_config_is_accepted_and_a_broken_one_is_reported_with_file_and_line(
    env: dict[str, str], example: Path
) -> None:
    config = example / "config" / "evolve.jsonc"
    config.write_text(
        "// settings\n"
        "{\n"
        '  "heartbeat_title": "see https://example.com/a//b /* not a comment */", // a URL\n'
        "  /* block comment */ hook_timeout: 20000,\n"
        '  "model": "anthropic/claude-sonnet-4",\n'
        '  "heartbeat_skip_active": false,\n'
        "}\n"
    )
    # Any command commits the hand edit, so that doctor sees a clean repository.
    assert evolve(env, "tools", "--workspace", str(example)).returncode == 0
    happy = evolve(env, "doctor", "--json", "--workspace", str(example))
    report = as_json(happy)
    assert happy.returncode == 0, report["findings"]
    assert not [f for f in report["findings"] if f["where"] == "config"]

    config.write_text('{\n  "heartbeat_ms": 1000,\n  "hook_timeout": ,\n}\n')
    broken = evolve(env, "doctor", "--json", "--workspace", str(example))
    assert broken.returncode == 1
    config_errors = [f["message"] for f in as_json(broken)["findings"] if f["where"] == "config"]
    assert len(config_errors) == 1, config_errors
    assert config_errors[0].startswith(f"{config}:3:19: not valid JSON5: unexpected ','"), config_errors


# ---- 12./13. git history: concurrent tool calls and external edits -----------------------------


def test_twenty_concurrent_prompt_edits_lose_nothing(env: dict[str, str], example: Path) -> None:
    chat = example / "prompts" / "chat.md"
    markers = [f"MARKER-{i:02d}" for i in range(20)]
    chat.write_text(chat.read_text() + "".join(f"{m} old\n" for m in markers))
    assert evolve(env, "tools", "--workspace", str(example)).returncode == 0  # commits the markers
    before = commit_count(env, example)

    results = evolve_many(
        env,
        [
            [
                "call",
                "evolve_prompt_edit",
                "--args",
                json.dumps({"prompt": "chat.md", "oldString": f"{m} old", "newString": f"{m} new"}),
                "--workspace",
                str(example),
            ]
            for m in markers
        ],
    )
    problems = []
    for m, proc in zip(markers, results, strict=True):
        if proc.returncode != 0 or proc.stdout.strip() != "successfully edited chat.md":
            problems.append(f"{m}: exit {proc.returncode}: {proc.stdout.strip()}")
        if "lock" in proc.stderr:  # index.lock, or "cannot lock ref 'HEAD'"
            problems.append(f"{m}: git lock error: {proc.stderr.strip()}")
    text = chat.read_text()
    lost = [m for m in markers if f"{m} new" not in text]
    if lost:
        problems.append(f"lost writes: {lost}")
    new_commits = commit_count(env, example) - before
    subjects = git(env, example, "log", f"-{new_commits}", "--format=%s").split("\n")[:-1]
    if subjects != ["edit prompt chat.md"] * 20:
        problems.append(f"{new_commits} new commits, not 20 tool commits: {subjects}")
    if git(env, example, "status", "--porcelain"):
        problems.append("uncommitted changes: " + git(env, example, "status", "--porcelain"))
    assert not problems, "\n".join(problems)


def test_an_external_edit_is_committed_separately_from_tool_commits(
    env: dict[str, str], example: Path
) -> None:
    (example / "prompts" / "chat.md").write_text("edited by hand\n")
    proc = evolve(
        env,
        "call",
        "evolve_prompt_edit",
        "--args",
        json.dumps({"prompt": "heartbeat.md", "oldString": "Heartbeat.", "newString": "Heartbeat!"}),
        "--workspace",
        str(example),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert commit_count(env, example) == 3

    external = commit_message(env, example, "HEAD~1")
    assert external.splitlines()[0] == "external change: prompts/chat.md"
    assert "Evolve-Origin: external" in external.splitlines()
    assert "Evolve-Tool" not in external
    assert commit_files(env, example, "HEAD~1") == ["prompts/chat.md"]

    tool = commit_message(env, example, "HEAD")
    assert tool.splitlines()[0] == "edit prompt heartbeat.md"
    assert "Evolve-Tool: evolve_prompt_edit" in tool.splitlines()
    assert "Evolve-Origin: operator" in tool.splitlines()
    assert commit_files(env, example, "HEAD") == ["prompts/heartbeat.md"]

    # A read-only command commits a hand edit too, and nothing when there is none.
    (example / "prompts" / "recover.md").write_text("recover by hand\n")
    assert evolve(env, "tools", "--workspace", str(example)).returncode == 0
    assert evolve(env, "tools", "--workspace", str(example)).returncode == 0
    assert commit_count(env, example) == 4
    assert commit_message(env, example).splitlines()[0] == "external change: prompts/recover.md"
    assert "Evolve-Origin: external" in commit_message(env, example).splitlines()


# ---- 14. the tool list ------------------------------------------------------------------------


def test_tools_json_lists_every_tool_with_schema_and_permission(env: dict[str, str], example: Path) -> None:
    proc = evolve(env, "tools", "--json", "--workspace", str(example))
    assert proc.returncode == 0, proc.stderr
    tools = {t["name"]: t for t in as_json(proc)}
    assert set(tools) == BUILTIN_TOOLS | NOTES_TOOLS
    assert len(BUILTIN_TOOLS) == 13

    for name, tool in tools.items():
        assert {"name", "description", "parameters", "origin", "permission"} <= set(tool), name
        assert tool["description"], name
        schema = tool["parameters"]
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        assert schema["type"] == "object", name
        assert isinstance(schema["properties"], dict), name
        assert set(schema["required"]) <= set(schema["properties"]), name
        assert tool["origin"] == ("builtin" if name in BUILTIN_TOOLS else "notes.py"), name

    add = tools["notes_add"]["parameters"]
    assert add["properties"]["priority"]["type"] == "string"
    assert add["properties"]["priority"]["enum"] == ["low", "normal", "high"]
    assert add["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "labels",
    }
    assert add["required"] == ["text"]
    assert tools["notes_forget"]["parameters"]["required"] == ["id"]
    assert tools["evolve_hook_edit"]["parameters"]["required"] == ["hook", "oldString", "newString"]

    permissions = {name: t["permission"] for name, t in tools.items() if t["permission"] is not None}
    assert permissions == {
        "notes_add": {"arg": "priority"},
        "evolve_hook_write": {"arg": "hook"},
        "evolve_hook_edit": {"arg": "hook"},
        "evolve_hook_validate": {"arg": "hook"},  # it runs a candidate: asked like the writes
    }


# ---- 15. usage errors -------------------------------------------------------------------------


def test_bad_input_and_a_missing_workspace_are_usage_errors(
    env: dict[str, str], template: Path, tmp_path: Path
) -> None:
    not_json = evolve(env, "stage", "heartbeat", "--input", "{not json", "--workspace", str(template))
    assert not_json.returncode == 2
    assert not_json.stdout == ""
    assert "evolve stage: --input is not valid JSON" in not_json.stderr
    assert "Traceback" not in not_json.stderr

    not_object = evolve(env, "stage", "heartbeat", "--input", "[1, 2]", "--workspace", str(template))
    assert not_object.returncode == 2
    assert not_object.stdout == ""
    assert "--input must be a JSON object" in not_object.stderr

    missing = tmp_path / "nowhere"
    proc = evolve(env, "stage", "heartbeat", "--input", "{}", "--workspace", str(missing))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"workspace {missing} does not exist" in proc.stderr
    assert f"evolve init {missing}" in proc.stderr
    assert not missing.exists()
