"""The language a file of a diff is highlighted in: by its name's suffix, else by its `#!` line."""

from __future__ import annotations

import re

LANGUAGES = {  # file name suffix -> Pygments lexer name
    ".py": "python",
    ".pyi": "python",
    ".sh": "bash",
    ".bash": "bash",
    ".zsh": "bash",
    ".md": "markdown",
    ".markdown": "markdown",
    ".json": "json",  # Pygments' JSON lexer also reads comments and trailing commas (JSONC)
    ".jsonc": "json",
    ".json5": "json",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
}
INTERPRETERS = {  # the program of a `#!` line -> Pygments lexer name
    "python": "python",
    "sh": "bash",
    "bash": "bash",
    "dash": "bash",
    "zsh": "bash",
    "ksh": "bash",
    "node": "javascript",
    "bun": "javascript",
    "deno": "typescript",
}


def language_for(path: str, first_line: str | None = None) -> str | None:
    """The language to highlight a file in: by its name's suffix, else by its `#!` line."""
    name = path.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    if dot > 0 and name[dot:] in LANGUAGES:
        return LANGUAGES[name[dot:]]
    if first_line and first_line.startswith("#!"):
        words = first_line[2:].split()
        if words and words[0].rsplit("/", 1)[-1] == "env":
            words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if words:
            program = re.sub(r"[\d.]+$", "", words[0].rsplit("/", 1)[-1])
            return INTERPRETERS.get(program)
    return None
