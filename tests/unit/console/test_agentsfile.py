"""The agents file on plain text: agents by workspace and by URL, paths relative to the file, names
made for agents given on the command line, and mistakes named by file, line and column."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evolve_console.agentsfile import AgentsFileError, AgentSpec, default_path, name_for, parse

SOURCE = "/home/op/.config/evolve/agents.jsonc"

GOOD = """{
  // every agent I run
  "agents": [
    {"name": "notes", "workspace": "~/workspace"},
    {"name": "persona", "url": "https://server:8765/", "token_file": "persona.token", "ca": "/etc/server.pem"},
    {"name": "here", "workspace": "ws/here"},   // relative to this file
  ],
}
"""


def test_agents_by_workspace_and_by_url_with_paths_relative_to_the_file() -> None:
    notes, persona, here = parse(GOOD, SOURCE)
    assert notes == AgentSpec("notes", workspace=Path(os.path.expanduser("~/workspace")))
    assert persona == AgentSpec(
        "persona",
        url="https://server:8765",
        token_file=Path("/home/op/.config/evolve/persona.token"),
        ca=Path("/etc/server.pem"),
    )
    assert here.workspace == Path("/home/op/.config/evolve/ws/here")


@pytest.mark.parametrize(
    ("text", "where", "said"),
    [
        ('{"agents": [\n  {"name": "a", "workspace": "x"\n]}', ":3:1", "unexpected"),
        ('{"agents": [\n', ":2:", "the end of the file"),
        ('{"agent": []}', ":1:1", 'a list "agents"'),
        (
            '{"agents": [\n  {"name": "a", "workspace": "x", "colour": "red"}\n]}',
            ":2:45",
            "unknown field 'colour'",
        ),
        ('{"agents": [\n  {"name": "a b", "workspace": "x"}\n]}', ":2:12", "needs a name of letters"),
        (
            '{"agents": [\n  {"name": "a", "workspace": "x"},\n  {"name": "a", "workspace": "y"}\n]}',
            ":3:12",
            "the name 'a' is used twice",
        ),
        ('{"agents": [\n  {"name": "a"}\n]}', ":2:12", "give either a workspace"),
        ('{"agents": [\n  {"name": "a", "url": "http://h:1"}\n]}', ":2:24", "needs a token_file"),
        (
            '{"agents": [\n  {"name": "a", "url": "ftp://h", "token_file": "t"}\n]}',
            ":2:24",
            "http(s)://host:port",
        ),
        (
            '{"agents": [\n  {"name": "a", "workspace": "x", "token_file": "t"}\n]}',
            ":2:30",
            "found through its announcement",
        ),
        ('{"agents": [\n  {"name": "a", "workspace": 3}\n]}', ":2:30", "workspace must be a string"),
    ],
)
def test_a_mistake_names_the_file_line_and_column_and_what_to_write(text: str, where: str, said: str) -> None:
    with pytest.raises(AgentsFileError) as caught:
        parse(text, SOURCE)
    message = str(caught.value)
    assert message.startswith(SOURCE + where), message
    assert said in message


def test_the_file_is_in_the_users_config_directory() -> None:
    assert default_path({"XDG_CONFIG_HOME": "/cfg", "HOME": "/home/op"}) == Path("/cfg/evolve/agents.jsonc")
    assert default_path({"HOME": "/home/op"}) == Path("/home/op/.config/evolve/agents.jsonc")


def test_agents_of_the_command_line_are_named_for_their_directory_or_host_and_never_twice_alike() -> None:
    assert name_for(workspace=Path("/srv/persona")) == "persona"
    assert name_for(url="https://server.example:8765") == "server.example-8765"
    assert name_for(workspace=Path("/a/notes"), taken={"notes", "notes-2"}) == "notes-3"


def test_a_token_file_others_can_read_or_an_empty_one_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "t.token"
    token.write_text("s3cret-token-of-the-engine\n")
    token.chmod(0o600)
    spec = AgentSpec("a", url="http://h:1", token_file=token)
    assert spec.read_token() == "s3cret-token-of-the-engine"
    token.chmod(0o644)
    with pytest.raises(AgentsFileError, match="readable by others; chmod 600"):
        spec.read_token()
    token.chmod(0o600)
    token.write_text("\n")
    with pytest.raises(AgentsFileError, match="is empty"):
        spec.read_token()
