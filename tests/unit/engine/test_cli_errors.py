"""The command line's help text."""

from __future__ import annotations

import argparse

from engine.cli.main import build_parser


def _parsers(
    parser: argparse.ArgumentParser, name: str = "evolve"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                found += _parsers(child, f"{name} {sub}")
    return found


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{name}: {action.option_strings or action.dest}"
        for name, parser in _parsers(build_parser())
        for action in parser._actions
        if not action.help and not isinstance(action, argparse._SubParsersAction)
    ]
    assert missing == []
