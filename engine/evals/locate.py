"""Where each value of a JSON5 document starts (line and column), by its path: `("expect", 2,
"called")`. json5 parses without positions; a scenario's error must name the line and column of the
value that is wrong, as the config's errors do. The text has parsed already, so the scan only follows
the structure: strings, brackets, commas and colons (comments blanked first)."""

from __future__ import annotations

from engine.workspace.config import blank_comments

Path = tuple[str | int, ...]
Position = tuple[int, int]  # 1-based line and column


def positions(text: str) -> dict[Path, Position]:
    """The position of every value (and of every key's value) of a document that json5 parses."""
    blank = blank_comments(text)
    found: dict[Path, Position] = {}
    _value(blank, _skip(blank, 0), (), found)
    return found


def position(found: dict[Path, Position], path: Path) -> Position | None:
    """The position of `path`, else of its nearest ancestor that has one."""
    while True:
        if path in found:
            return found[path]
        if not path:
            return None
        path = path[:-1]


def _where(text: str, offset: int) -> Position:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _string_end(text: str, i: int) -> int:
    """The offset after the string that starts at `i` (its quote)."""
    quote, j = text[i], i + 1
    while j < len(text) and text[j] != quote:
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _value(text: str, i: int, path: Path, found: dict[Path, Position]) -> int:
    """Record the value at `i` (and what it holds); the offset after it."""
    if i >= len(text):
        return i
    found[path] = _where(text, i)
    ch = text[i]
    if ch == "{":
        return _container(text, i + 1, "}", path, found, keyed=True)
    if ch == "[":
        return _container(text, i + 1, "]", path, found, keyed=False)
    if ch in "\"'":
        return _string_end(text, i)
    j = i
    while j < len(text) and text[j] not in ",]}" and not text[j].isspace():
        j += 1
    return j


def _container(text: str, i: int, close: str, path: Path, found: dict[Path, Position], keyed: bool) -> int:
    index = 0
    while True:
        i = _skip(text, i)
        if i >= len(text):
            return i
        if text[i] == close:
            return i + 1
        if text[i] == ",":
            i += 1
            continue
        key: str | int = index
        if keyed:
            if text[i] in "\"'":
                end = _string_end(text, i)
                key = text[i + 1 : end - 1]
            else:
                end = i
                while end < len(text) and text[end] not in ":" and not text[end].isspace():
                    end += 1
                key = text[i:end]
            i = _skip(text, end)
            if i < len(text) and text[i] == ":":
                i += 1
        i = _value(text, _skip(text, i), (*path, key), found)
        index += 1
