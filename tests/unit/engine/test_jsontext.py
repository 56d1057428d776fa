"""engine.core.jsontext: the prompts' and a kept history's JSON text, encoded once and spliced into
the documents that hold them."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from engine.core import jsontext, strictjson


def _payload(history: list[Any]) -> dict[str, Any]:
    return {
        "hook": "observe_message",
        "prompts": {"chat": 'say "hi"\n', "preamble": "héllo"},
        "session": {"id": "ses_1", "agent": "build"},
        "answer": "done",
        "history": history,
    }


def test_the_spliced_document_is_the_document_as_json_in_its_key_order() -> None:
    history = [{"role": "user", "parts": [{"type": "text", "text": "read ✓", "n": 1.5}]}]
    jsontext.keep(history)
    doc = _payload(history)
    text = jsontext.dumps(doc)
    assert text == strictjson.dumps(doc)  # the very bytes a hook got before
    assert list(json.loads(text)) == ["hook", "prompts", "session", "answer", "history"]


def test_a_kept_history_is_encoded_once_and_a_list_not_kept_every_time() -> None:
    kept = [{"role": "user", "parts": []}]
    jsontext.keep(kept)
    other = [{"role": "user", "parts": []}]
    with mock.patch.object(jsontext.strictjson, "dumps", wraps=strictjson.dumps) as dumps:
        for _ in range(3):
            jsontext.dumps(_payload(kept))
        encoded = [c.args[0] for c in dumps.call_args_list]
        assert sum(1 for v in encoded if v is kept[0]) == 1  # its one message, once
        dumps.reset_mock()
        for _ in range(3):
            jsontext.dumps(_payload(other))
        holding = [c.args[0] for c in dumps.call_args_list if c.args[0] is other or _holds(c.args[0], other)]
        assert len(holding) == 3


def _holds(value: Any, item: Any) -> bool:
    return isinstance(value, dict) and any(v is item for v in value.values())


def test_the_prompts_are_known_by_their_items_and_an_edit_is_encoded_anew() -> None:
    first = jsontext.kept_text({"chat": "one", "recover": "two"})
    assert first == '{"chat": "one", "recover": "two"}'
    with mock.patch.object(jsontext.strictjson, "dumps", wraps=strictjson.dumps) as dumps:
        assert jsontext.kept_text({"chat": "one", "recover": "two"}) == first  # a new dict, same items
        assert dumps.call_count == 0
        assert (
            jsontext.kept_text({"chat": "one", "recover": "edited"}) == '{"chat": "one", "recover": "edited"}'
        )
        assert dumps.call_count == 1


def test_a_history_let_go_is_forgotten_with_its_text() -> None:
    first = [{"role": "user", "parts": [{"type": "text", "text": "first"}]}]
    jsontext.keep(first)
    assert jsontext.kept_text(first) is not None
    for _ in range(jsontext.KEPT):
        jsontext.keep([{"role": "assistant"}])
    assert jsontext.kept_text(first) is None  # no longer known: encoded as any other value
    assert json.loads(jsontext.dumps(_payload(first)))["history"] == first


def test_a_lone_surrogate_in_a_part_keeps_the_document_encodable_and_equal() -> None:
    history = [{"role": "user", "parts": [{"type": "text", "text": "bad \ud800 half"}]}]
    jsontext.keep(history)
    doc = _payload(history)
    text = jsontext.dumps(doc)
    text.encode("utf-8")  # never fails
    assert json.loads(text) == doc
    assert "héllo" in text  # only the part holding the surrogate is written with escapes


def test_a_document_without_kept_values_is_strictjson_s() -> None:
    doc = {"hook": "discover", "n": float("nan"), "history": [1, 2]}
    assert jsontext.dumps(doc) == strictjson.dumps(doc)


def test_a_kept_history_that_grew_encodes_its_new_messages_only() -> None:
    old = [{"role": "user", "parts": [{"type": "text", "text": f"m{i}"}]} for i in range(3)]
    jsontext.keep(old)
    assert jsontext.kept_text(old) == strictjson.dumps(old)
    grown = [*old, {"role": "assistant", "parts": []}]
    jsontext.keep(grown)
    with mock.patch.object(jsontext.strictjson, "dumps", wraps=strictjson.dumps) as dumps:
        assert jsontext.kept_text(grown) == strictjson.dumps(grown)
        assert [c.args[0] for c in dumps.call_args_list[:-1]] == [grown[-1]]  # the last: the check


def test_the_kept_texts_are_bounded_by_count_and_by_characters() -> None:
    table = jsontext._Texts(count=3, chars=10)
    for key in "abcd":
        table.put(key, key, "xx")
    assert list(table.entries) == ["b", "c", "d"]  # the oldest let go past 3
    table.put("e", "e", "yyyyyyy")  # 2 + 2 + 7 > 10: the oldest go until it fits
    assert list(table.entries) == ["d", "e"]
    table.put("f", "f", "z" * 11)  # larger than the whole table: not kept
    assert "f" not in table.entries and list(table.entries) == ["d", "e"]


def test_a_message_larger_than_what_is_kept_is_encoded_each_time_and_right() -> None:
    with mock.patch.object(jsontext, "_items", jsontext._Texts(count=100, chars=200)):
        small = {"role": "user", "parts": []}
        huge = {"role": "tool", "parts": [{"type": "text", "text": "x" * 300}]}
        history = [small, huge]
        jsontext.keep(history)
        assert jsontext.kept_text(history) == strictjson.dumps(history)
        assert id(small) in jsontext._items.entries and id(huge) not in jsontext._items.entries
