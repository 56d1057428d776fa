"""Evolve's git trailers, written and parsed (the store on real git is in tests/engine/test_gitstore.py)."""

from __future__ import annotations

from engine.changes.gitstore import parse_trailers, trailers_text


def test_trailers_text_and_parse() -> None:
    assert (
        trailers_text({"A": "1", "B": None, "C": "", "D": " two\twords "})
        == "Evolve-A: 1\nEvolve-D: two words"
    )
    assert trailers_text({}) == ""
    message = (
        "subject\n\nbody line\nNot-Evolve: x\nEvolve-Key: value: with colon\nEvolve-Nospace:x\nEvolve-Tool: t"
    )
    assert parse_trailers(message) == {"key": "value: with colon", "tool": "t"}
    assert parse_trailers("") == {}
