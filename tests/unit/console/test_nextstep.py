"""What the console says to do while no opencode is connected: the commands, exact, and `evolve` as
the operator's shell runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evolve_console.model import ConsoleModel
from evolve_console.nextstep import Evolve, connect_steps, evolve_command, without_opencode
from tests.unit.console.test_status import opencode, status


def program(directory: Path, activate: bool) -> Path:
    """An `evolve` program in `directory` (a virtual environment's bin/ when `activate`)."""
    directory.mkdir(parents=True)
    found = directory / "evolve"
    found.write_text("#!/bin/sh\n", encoding="utf-8")
    found.chmod(0o755)
    if activate:
        (directory / "activate").write_text("# activate\n", encoding="utf-8")
    return found


def test_evolve_is_written_as_the_operators_shell_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = program(tmp_path / "venv" / "bin", activate=True)
    bare = program(tmp_path / "bare dir", activate=False)
    python = str(tmp_path / "venv" / "bin" / "python3")
    monkeypatch.setenv("PATH", "/nonexistent")

    # ./scripts/run.sh runs .venv/bin/evolve without it on PATH: activate it first, then `evolve`.
    assert evolve_command(str(venv), python) == Evolve("evolve", f"source {venv.parent / 'activate'}")
    # On the PATH, the same program: plain `evolve`.
    monkeypatch.setenv("PATH", str(venv.parent))
    assert evolve_command(str(venv), python) == Evolve()
    # Another evolve on the PATH than this one: this one, by its path (quoted for the shell).
    assert evolve_command(str(bare), python) == Evolve(f"'{bare}'")
    # `python -m engine console`: the evolve beside the Python, else that Python with -m engine.
    assert evolve_command("-m", python) == Evolve()
    lone = str(tmp_path / "elsewhere" / "python3")
    assert evolve_command("-m", lone) == Evolve(f"{lone} -m engine")


def test_the_commands_connect_this_workspace_in_order() -> None:
    said = connect_steps("/srv/my agent", Evolve("evolve", "source /opt/evolve/.venv/bin/activate")).plain
    assert said.splitlines() == [
        "No opencode is connected: until one is, the agent's hooks do not run and its heartbeat waits.",
        "Connect one: the evolve plugin into an opencode project (any directory), then opencode there:",
        "  source /opt/evolve/.venv/bin/activate   (puts evolve on your PATH)",
        "  mkdir -p ~/code/myproject",
        "  evolve shim install --workspace '/srv/my agent' --project ~/code/myproject",
        '  cd ~/code/myproject && "$(evolve opencode install)"   (installs opencode first if needed)',
        "A real model, any OpenAI-compatible server (before you start opencode):",
        "  evolve opencode model --project ~/code/myproject --base-url URL --model NAME --api-key-env VAR",
        "Or first see a living agent, offline, in a throwaway directory: evolve demo",
    ]
    by_path = connect_steps("/ws", Evolve("/opt/evolve/bin/evolve")).plain
    assert "  /opt/evolve/bin/evolve shim install --workspace /ws --project ~/code/myproject" in by_path
    assert "source" not in by_path and by_path.endswith(": /opt/evolve/bin/evolve demo")


def test_only_an_engine_that_answers_says_no_opencode_is_connected() -> None:
    model = ConsoleModel()
    assert not without_opencode(model), "nothing known yet"
    model.set_connection(True, "http://127.0.0.1:1 · pid 1")
    assert not without_opencode(model), "no status yet"
    model.status = status(opencode=[])
    assert without_opencode(model)
    model.status = status(opencode=[opencode("oc_1", "server")])
    assert not without_opencode(model)
    model.status = status(opencode=[])
    model.set_connection(False, "gone")
    assert not without_opencode(model), "the engine does not answer: the console does not know"
