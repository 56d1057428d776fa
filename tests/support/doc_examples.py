"""The shell examples of the README and docs/: fenced blocks whose lines start with `$ ` (a command)
followed by its output, with the marks in the line before a block (`<!-- doctest: skip REASON -->`,
`<!-- doctest: setup COMMANDS -->`, `<!-- doctest: file PATH -->`); tests/project/test_docs.py runs
them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.environment import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- doctest: (?P<mark>[^\n]*?) -->\n+)?```[a-z]*\n(?P<body>.*?)```", re.S)


@dataclass
class Example:
    page: Path
    line: int
    commands: list[tuple[str, str]] = field(default_factory=list)  # (command, expected output)
    skip: str | None = None
    setup: str = ""
    file: str | None = None
    content: str = ""


def examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        body = match["body"]
        mark = match["mark"] or ""
        line = text.count("\n", 0, match.start("body")) + 1
        if mark.startswith("file "):
            found.append(Example(page, line, file=mark.removeprefix("file ").strip(), content=body))
            continue
        if not body.startswith("$ "):
            continue
        example = Example(page, line)
        if mark.startswith("skip"):
            example.skip = mark.removeprefix("skip").strip() or "(no reason given)"
        elif mark.startswith("setup"):
            example.setup = mark.removeprefix("setup").strip()
        for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
            command, _, output = chunk.partition("\n")
            example.commands.append((command, output))
        found.append(example)
    return found
