"""engine.runner's reading of a hook's output, without running one (running hooks is in
tests/engine/test_runner.py)."""

from __future__ import annotations

import json

import pytest

from engine.hooks.runner import parse_jsonl


@pytest.mark.parametrize("falsy", ["0", "false", "null", "[]", "{}"])
def test_falsy_log_values_merge_as_a_key(falsy: str) -> None:
    _, logs, result, error = parse_jsonl(f'{{"log": {falsy}, "k": 1}}\n'.encode())
    assert error is None
    assert logs == []
    assert result == {"log": json.loads(falsy), "k": 1}


def test_crlf_lines_parse() -> None:
    _, _, result, error = parse_jsonl(b'{"a": 1}\r\n{"b": 2}\r\n')
    assert error is None
    assert result == {"a": 1, "b": 2}


def test_non_json_line_preview_is_short() -> None:
    long = "x" * 5000
    _, _, _, error = parse_jsonl(f"{long}\n".encode())
    assert error is not None
    assert "line 1" in error and "xxxxxxxx" in error
    assert len(error) < 200


def test_first_bad_line_is_reported() -> None:
    _, _, _, error = parse_jsonl(b'{"a": 1}\nnope\n[1]\n')
    assert error is not None and "line 2" in error and "nope" in error
