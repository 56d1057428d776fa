"""`evolve console`'s agents from its options and the agents file, parsed as the command line parses
them: one workspace is the console as it always was, several (or a file) the fleet."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from engine.cli.parser import build_parser
from evolve_console.agentsfile import AgentsFileError, AgentSpec
from evolve_console.command import agents_of


def parsed(*args: str) -> argparse.Namespace:
    return build_parser().parse_args(["console", *args])


def test_one_workspace_or_one_attach_is_the_console_of_one_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no agents file there
    assert agents_of(parsed("--workspace", str(tmp_path / "a"))) is None
    assert agents_of(parsed()) is None
    assert agents_of(parsed("--attach", "http://h:1", "--token", "t")) is None


def test_repeated_options_and_the_agents_file_make_a_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config" / "evolve"
    config.mkdir(parents=True)
    (config / "agents.jsonc").write_text('{"agents": [{"name": "a", "workspace": "ws/a"}]}')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert agents_of(parsed()) == [AgentSpec("a", workspace=config / "ws" / "a")], "the file, unasked"
    token = tmp_path / "t.token"
    specs = agents_of(
        parsed("--workspace", str(tmp_path / "a"), "--attach", "http://h:1", "--token-file", str(token))
    )
    assert specs == [
        AgentSpec("a", workspace=tmp_path / "a"),
        AgentSpec("h-1", url="http://h:1", token_file=token),
    ], "with options named, the default file is not read"
    with_file = agents_of(
        parsed("--workspace", str(tmp_path / "a"), "--agents", str(config / "agents.jsonc"))
    )
    assert with_file is not None
    assert [s.name for s in with_file] == ["a-2", "a"], "an option's agent is named apart from the file's"


def test_an_attach_without_its_token_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    with pytest.raises(AgentsFileError, match="one --token-file after each --attach"):
        agents_of(parsed("--attach", "http://h:1", "--attach", "http://h:2", "--token-file", "t"))
    with pytest.raises(AgentsFileError, match="give its token with --token-file FILE"):
        agents_of(parsed("--workspace", str(tmp_path), "--attach", "http://h:1"))
