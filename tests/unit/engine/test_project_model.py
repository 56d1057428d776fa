"""engine.opencode.model: the OpenAI-compatible provider `evolve opencode model` merges into a
project's opencode.json, and how `evolve doctor --project` finds what to ask and reads an answer.
(Against a real server and real opencode: tests/e2e/test_model_command.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.opencode.model import Answer, ModelError, _http_problem, _take, ask, set_model


@pytest.fixture(autouse=True)
def no_global_opencode_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_the_provider_is_merged_and_everything_else_is_kept(tmp_path: Path) -> None:
    config = {
        "plugin": [["file:///x/shim/evolve.js", {"workspace": "/w"}], "other-plugin"],
        "provider": {
            "anthropic": {"options": {"apiKey": "{env:A}"}},
            "llm": {
                "name": "Mine",
                "options": {"baseURL": "http://old/v1", "timeout": 5},
                "models": {"a": {"x": 1}},
            },
        },
        "permission": {"bash": "ask"},
        "model": "anthropic/claude",
    }
    (tmp_path / "opencode.json").write_text(json.dumps(config))

    result = set_model(tmp_path, "http://127.0.0.1:8080/v1/", "qwen2.5:7b", "MY_KEY")

    written = json.loads((tmp_path / "opencode.json").read_text())
    assert result["changed"] is True and written["model"] == "llm/qwen2.5:7b"
    assert written["plugin"] == config["plugin"] and written["permission"] == config["permission"]
    assert written["provider"]["anthropic"] == config["provider"]["anthropic"]
    assert written["provider"]["llm"] == {
        "name": "Mine",
        "options": {"baseURL": "http://127.0.0.1:8080/v1", "timeout": 5, "apiKey": "{env:MY_KEY}"},
        "models": {"a": {"x": 1}, "qwen2.5:7b": {"name": "qwen2.5:7b"}},
    }
    assert set_model(tmp_path, "http://127.0.0.1:8080/v1", "qwen2.5:7b", "MY_KEY")["changed"] is False


def test_a_jsonc_file_keeps_its_original_beside_it(tmp_path: Path) -> None:
    original = '{\n  // mine\n  "autoupdate": false,\n}\n'
    (tmp_path / "opencode.jsonc").write_text(original)
    set_model(tmp_path, "https://llm.example.com/v1", "m", provider="hosted", name="Hosted")
    written = json.loads((tmp_path / "opencode.jsonc").read_text())
    assert written["autoupdate"] is False and written["model"] == "hosted/m"
    assert (
        written["provider"]["hosted"]["name"] == "Hosted"
        and "apiKey" not in written["provider"]["hosted"]["options"]
    )
    assert (tmp_path / "opencode.jsonc.bak").read_text() == original


@pytest.mark.parametrize(
    ("url", "model", "key", "provider", "says"),
    [
        ("localhost:8080/v1", "m", None, "llm", "is not an http:// or https:// URL"),
        ("ftp://host/v1", "m", None, "llm", "is not an http:// or https:// URL"),
        ("http://host/v1?x=1", "m", None, "llm", "has a query or a fragment"),
        ("http://host/v1", "", None, "llm", "is not a model name"),
        ("http://host/v1", "m", "sk-abc", "llm", "not the key itself"),
        ("http://host/v1", "m", "MY-KEY", "llm", "is not an environment variable name"),
        ("http://host/v1", "m", None, "a/b", "is not a provider id"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    tmp_path: Path, url: str, model: str, key: str | None, provider: str, says: str
) -> None:
    with pytest.raises(ModelError, match=says):
        set_model(tmp_path, url, model, key, provider)
    assert list(tmp_path.iterdir()) == []


def test_a_provider_of_another_package_is_not_taken_over(tmp_path: Path) -> None:
    config = {"provider": {"llm": {"npm": "@ai-sdk/anthropic"}}}
    (tmp_path / "opencode.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="choose another --provider"):
        set_model(tmp_path, "http://host/v1", "m")
    assert json.loads((tmp_path / "opencode.json").read_text()) == config


def test_what_the_doctor_asks_and_what_it_does_not(tmp_path: Path) -> None:
    def with_config(config: dict[str, object]) -> tuple[Answer | None, list[str]]:
        (tmp_path / "opencode.json").write_text(json.dumps(config))
        return ask(tmp_path, env={})

    assert with_config({}) == (
        None,
        [f"no model is set in {tmp_path / 'opencode.json'} (opencode picks one of its own providers')"],
    )
    answer, notes = with_config({"model": "anthropic/claude"})
    assert answer is None and "opencode's own provider 'anthropic'" in notes[0]
    answer, notes = with_config(
        {"model": "llm/b", "provider": {"llm": {"options": {"baseURL": "http://h/v1"}, "models": {"a": {}}}}}
    )
    assert (
        answer is not None
        and not answer.ok
        and answer.problem == "provider 'llm' lists no model 'b': opencode refuses it"
    )


def test_an_answer_is_read_from_stream_chunks_and_errors_are_named() -> None:
    answer = Answer("llm/m", "http://h/v1", False)
    _take(answer, {"model": "served", "choices": [{"delta": {"role": "assistant", "content": "O"}}]}, "delta")
    _take(answer, {"model": "served", "choices": [{"delta": {"content": "K"}}]}, "delta")
    assert (answer.server_model, answer.text) == ("served", "OK")
    with pytest.raises(ValueError, match="the server reported an error"):
        _take(answer, {"error": {"message": "overloaded"}}, "delta")
    assert _http_problem(401, '{"error": {"message": "bad key"}}') == "HTTP 401: bad key (is the key right?)"
    assert _http_problem(404, "Not Found").startswith("HTTP 404: Not Found (is the base URL right?")
