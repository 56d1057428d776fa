"""engine.hooks.dispatch's pure parts: merge, build_input and the defaults of recover (the engine's stages with
real hooks are in tests/engine/test_dispatch.py)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.hooks.dispatch import build_input, merge, recover_defaults
from engine.protocol.stages import NO_RECOVER


@pytest.mark.parametrize("key", ["system", "notify", "actions", "modified", "tools", "anything"])
def test_merge_concatenates_arrays_for_any_key(key: str) -> None:
    acc: dict[str, Any] = {key: [1, "a"]}
    assert merge(acc, {key: [{"b": 2}, None]}) == {key: [1, "a", {"b": 2}, None]}


@pytest.mark.parametrize("key", ["continue", "prompt", "user", "message", "result", "error", "custom"])
def test_merge_joins_strings_with_newline_for_any_key(key: str) -> None:
    assert merge({key: "first"}, {key: "second"}) == {key: "first\nsecond"}


def test_merge_joins_empty_strings_too() -> None:
    assert merge({"user": ""}, {"user": ""}) == {"user": "\n"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (1, 2),
        (1.5, 0),
        (True, False),
        (False, None),
        (None, "now a string"),
        ("a string", None),
        ("text", ["list"]),
        (["list"], "text"),
        ([1], {"x": 1}),
        ({"x": 1}, {"y": 2}),  # no deep merge
        ({"x": {"deep": 1}}, {"x": {"other": 2}}),
        (3, "3"),
    ],
)
def test_merge_replaces_everything_else(old: Any, new: Any) -> None:
    assert merge({"k": old}, {"k": new}) == {"k": new}


def test_merge_takes_new_keys_keeps_others_and_returns_acc() -> None:
    acc: dict[str, Any] = {"a": 1, "b": [1]}
    returned = merge(acc, {"c": "x", "b": [2]})
    assert returned is acc
    assert acc == {"a": 1, "b": [1, 2], "c": "x"}


def test_merge_folds_left_to_right() -> None:
    acc: dict[str, Any] = {}
    for part in ({"s": "1", "l": [1]}, {"s": "2", "l": [2]}, {"s": "3", "l": [3]}):
        merge(acc, part)
    assert acc == {"s": "1\n2\n3", "l": [1, 2, 3]}


def test_build_input_key_order() -> None:
    payload = build_input(
        "observe_message",
        {"preamble": "p"},
        {"session": {"id": "s"}, "thinking": "t", "calls": [], "answer": "a"},
        [{"role": "user"}],
    )
    assert list(payload) == ["hook", "prompts", "session", "thinking", "calls", "answer", "history"]
    assert payload["hook"] == "observe_message"
    assert payload["prompts"] == {"preamble": "p"}
    assert payload["history"] == [{"role": "user"}]


def test_build_input_without_history() -> None:
    payload = build_input("idle", {}, {"answer": "a"}, None)
    assert payload == {"hook": "idle", "prompts": {}, "answer": "a"}
    assert "history" not in payload


def test_build_input_empty_history_is_kept() -> None:
    assert build_input("idle", {}, {}, [])["history"] == []


@pytest.mark.parametrize("stage", ["recover", "format_notification"])
def test_build_input_never_sends_history_for_sessionless_stages(stage: str) -> None:
    payload = build_input(stage, {"recover": "r"}, {"x": 1}, [{"role": "user"}])
    assert payload == {"hook": stage, "prompts": {"recover": "r"}, "x": 1}


def test_build_input_discover_is_exactly_hook_discover() -> None:
    assert build_input("discover", {"preamble": "p"}, {"x": 1}, [1]) == {"hook": "discover"}


def test_recover_defaults_fill_system_and_user() -> None:
    merged: dict[str, Any] = {}
    filled = recover_defaults(merged, {"preamble": "P", "recover": "R", "chat": "C"})
    assert merged == {"system": ["P", "R"], "user": "R"}
    assert filled == ["system", "user"]


def test_recover_defaults_keep_only_present_parts() -> None:
    merged: dict[str, Any] = {}
    recover_defaults(merged, {"recover": "R"})
    assert merged == {"system": ["R"], "user": "R"}
    merged = {}
    recover_defaults(merged, {"preamble": "P"})
    assert merged == {"system": ["P"]}
    merged = {}
    assert recover_defaults(merged, {}) == []
    assert merged == {}


def test_recover_defaults_respect_hook_values() -> None:
    merged: dict[str, Any] = {"system": ["mine"], "user": "u"}
    assert recover_defaults(merged, {"preamble": "P", "recover": "R"}) == []
    assert merged == {"system": ["mine"], "user": "u"}


def test_recover_defaults_replace_an_empty_system() -> None:
    merged: dict[str, Any] = {"system": [""], "user": ""}
    recover_defaults(merged, {"preamble": "P", "recover": "R"})
    assert merged == {"system": ["P", "R"], "user": "R"}


def test_no_recover_covers_the_observational_stages() -> None:
    for stage in (
        "observe_message",
        "idle",
        "compacting",
        "tool_before",
        "tool_after",
        "format_notification",
    ):
        assert stage in NO_RECOVER
    assert "mutate_request" not in NO_RECOVER
    assert "heartbeat" not in NO_RECOVER
