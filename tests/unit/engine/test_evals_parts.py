"""What a version's opencode is given (engine/evals/project.py, a conversation's identifiers in
engine/evals/server.py) and which real turns are re-asked (engine/evals/turns.py), on plain data."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from engine.evals.project import PERMISSIONS, ProjectError, agent_settings, eval_config
from engine.evals.server import as_version
from engine.evals.turns import pick, turns_of
from engine.protocol.records import SessionInfo


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_the_agents_provider_and_model_come_from_its_project_over_the_global_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(
        home / ".config" / "opencode" / "opencode.json",
        {
            "provider": {"shared": {"options": {"baseURL": "http://global"}}, "mine": {"options": {"x": 1}}},
            "model": "shared/big",
            "mcp": {"search": {"command": ["search-server"]}},
        },
    )
    project = tmp_path / "project"
    write(
        project / "opencode.jsonc",
        """// the agent's project
        {
          "provider": {"mine": {"options": {"apiKey": "{env:MY_KEY}", "baseURL": "http://local"}}},
          "small_model": "mine/small",
          "plugin": ["some-plugin"],
          "permission": {"bash": "allow"},
          "agent": {"build": {"model": "mine/coder", "prompt": "Be brief.", "permission": {"bash": "allow"}, "tools": {"x": true}}},
        }""",
    )
    settings = agent_settings(project, {"HOME": str(home)})
    assert settings == {
        "provider": {
            "shared": {"options": {"baseURL": "http://global"}},
            "mine": {"options": {"apiKey": "{env:MY_KEY}", "baseURL": "http://local"}},
        },
        "model": "shared/big",
        "small_model": "mine/small",
        "agent": {"build": {"model": "mine/coder", "prompt": "Be brief."}},
    }
    config = eval_config(settings, "mine/chat")
    assert config["model"] == "mine/chat" and config["small_model"] == "mine/small"
    assert config["permission"] == PERMISSIONS
    assert {"bash", "webfetch", "websearch", "external_directory", "question"} <= set(PERMISSIONS)
    assert set(PERMISSIONS.values()) == {"deny"}
    assert (config["snapshot"], config["lsp"], config["formatter"], config["share"]) == (
        False,
        False,
        False,
        "disabled",
    )
    assert "mcp" not in config and "plugin" not in config


def test_without_a_model_anywhere_the_error_says_where_to_name_one(tmp_path: Path) -> None:
    write(tmp_path / "p" / "opencode.json", {"provider": {"x": {}}})
    settings = agent_settings(tmp_path / "p", {"HOME": str(tmp_path / "nobody")})
    with pytest.raises(ProjectError, match="no model for the agent"):
        eval_config(settings, None)
    assert eval_config(settings, "x/y")["small_model"] == "x/y"


def test_a_project_config_that_does_not_parse_is_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path / "p" / "opencode.json", "{ not json")
    with pytest.raises(ProjectError, match=r"opencode\.json: cannot read it as JSONC"):
        agent_settings(tmp_path / "p", {"HOME": str(tmp_path)})


# ---- real turns ---------------------------------------------------------------------------------


def message(
    role: str, *parts: dict[str, Any], id: str, created: int = 0, agent: str = "build"
) -> dict[str, Any]:
    return {
        "info": {"id": id, "role": role, "agent": agent, "time": {"created": created}},
        "parts": list(parts),
    }


def text(value: str, synthetic: bool = False) -> dict[str, Any]:
    return {"type": "text", "text": value, "synthetic": synthetic}


def tool(name: str) -> dict[str, Any]:
    return {"type": "tool", "tool": name, "state": {"status": "completed", "input": {}}}


CONVERSATION = [
    message("user", text("Add a note: book the dentist."), id="msg_1", created=1_000_000),
    message("assistant", tool("notes_add"), text("Noted."), id="msg_2"),
    message("user", text("[heartbeat] tick", synthetic=True), id="msg_3", created=2_000_000),
    message("assistant", text("Upkeep."), id="msg_4"),
    message("user", text("What's in the repo?"), id="msg_5", created=3_000_000, agent="plan"),
    message("assistant", tool("bash"), text("Three files."), id="msg_6"),
    message("user", text("What's on my list?"), id="msg_7", created=4_000_000),
    message("assistant", tool("notes_list"), id="msg_8"),
]


def info(id: str, title: str | None, updated: float) -> SessionInfo:
    return SessionInfo(id=id, title=title, updated_at=updated)


def test_the_turns_of_a_session_newest_first_without_synthetic_ones_and_refusing_tools_outside() -> None:
    turns = turns_of(info("ses_a", "chat", 5000.0), CONVERSATION, with_history=True)
    assert [(t.text, t.message_id, t.history, t.agent) for t in turns] == [
        ("What's on my list?", "msg_7", 6, "build"),
        ("What's in the repo?", "msg_5", 4, "plan"),
        ("Add a note: book the dentist.", "msg_1", 0, "build"),
    ]
    assert turns[0].name == "“chat”: What's on my list?"
    assert turns[0].at == 4000.0
    assert (
        turns[0].refused is None and turns[0].note == "re-asked with its conversation (6 messages before it)"
    )
    assert turns[1].refused is not None and "used bash" in turns[1].refused
    alone = turns_of(info("ses_a", None, 5000.0), CONVERSATION, with_history=False)
    assert alone[0].message_id is None and alone[0].history == 0 and alone[0].name.startswith("ses_a: ")
    assert "re-asked alone" in alone[0].note


def test_pick_takes_the_newest_turns_of_the_sessions_reached_and_what_to_give_opencode() -> None:
    sessions = [info("ses_a", "chat", 5000.0), info("ses_b", "old", 100.0), info("ses_c", "gone", 4500.0)]
    recorded_c = [message("user", text("Recorded only"), id="x", created=4_400_000)]

    async def fetch(found: SessionInfo) -> Any:
        return ({"id": found.id}, CONVERSATION) if found.id == "ses_a" else None

    picked = asyncio.run(
        pick(sessions, 3, fetch, lambda sid: recorded_c if sid == "ses_c" else [], since=1000.0)
    )
    assert [(t.session, t.text) for t in picked.turns] == [
        ("ses_c", "Recorded only"),
        ("ses_a", "What's on my list?"),
        ("ses_a", "What's in the repo?"),
    ]
    assert picked.turns[0].message_id is None  # its opencode is gone: asked alone
    assert [i.session for i in picked.imports] == ["ses_a"]
    assert picked.imports[0].data == {"info": {"id": "ses_a"}, "messages": CONVERSATION}
    assert picked.warnings == []

    nothing_since = asyncio.run(pick(sessions, 1, fetch, lambda sid: [], since=9999.0))
    assert [t.text for t in nothing_since.turns] == ["What's on my list?"]
    assert nothing_since.warnings == [
        "no session has been active since the change: re-asking the latest turns"
    ]
    empty = asyncio.run(pick([], 2, fetch, lambda sid: []))
    assert empty.turns == [] and "no user turn to re-ask" in empty.warnings[0]


def test_a_conversation_imported_for_the_second_version_has_identifiers_of_its_own() -> None:
    ses, user, answer = (
        "ses_dde9f1e43ffeeMKhwBji7iICv5",
        "msg_22160e1f10015V5YpYbPH7uh5z",
        "msg_22160e4ed001qRvBZd8YJxrb2E",
    )
    export = {
        "info": {"id": ses, "title": "errands", "directory": "/agent/project"},
        "messages": [
            {
                "info": {"id": user, "sessionID": ses, "role": "user"},
                "parts": [
                    {"id": "prt_22160e1fa001E1n4anuoDTLxM6", "sessionID": ses, "messageID": user, "text": ses}
                ],
            },
            {"info": {"id": answer, "sessionID": ses, "parentID": user, "role": "assistant"}, "parts": []},
        ],
    }
    same, none = as_version(export, 0)
    assert same == export and none == {}

    mine, renamed = as_version(export, 1)
    assert renamed == {
        ses: "ses_dde9f1e43ffeeMKhwBji7iICv6",
        user: "msg_22160e1f10015V5YpYbPH7uh50",  # the alphabet wraps: z, then 0
        answer: "msg_22160e4ed001qRvBZd8YJxrb2F",
        "prt_22160e1fa001E1n4anuoDTLxM6": "prt_22160e1fa001E1n4anuoDTLxM7",
    }
    first, second = mine["messages"]
    assert mine["info"] == {"id": renamed[ses], "title": "errands", "directory": "/agent/project"}
    assert first["info"]["sessionID"] == renamed[ses] and second["info"]["parentID"] == renamed[user]
    part = first["parts"][0]
    assert (part["id"], part["sessionID"], part["messageID"]) == (
        "prt_22160e1fa001E1n4anuoDTLxM7",
        renamed[ses],
        renamed[user],
    )
    assert part["text"] == renamed[ses]  # any value that is exactly an identifier: opencode's own links
    assert sorted(renamed.values()) == [renamed[k] for k in sorted(renamed)]  # their order is kept
    assert export["info"]["id"] == ses  # the recorded conversation itself is left as it was
