"""The machine-readable trailers of the engine's commits: `Evolve-Origin: tool`, `Evolve-Tool:
evolve_hook_edit`, `Evolve-Session: ses_1`, `Evolve-Call: call_7`, ... saying what made each one."""

from __future__ import annotations

from collections.abc import Mapping

from engine.core import strictjson

TRAILER_PREFIX = "Evolve-"


def _printable(text: str) -> str:
    """`text` as git can take it in a message: a NUL or another control character (but newlines and
    tabs) written as its `\\xNN` escape, a lone surrogate as its `\\uXXXX` one (a session id a
    client sent may hold either)."""
    if text.isprintable() or all(c.isprintable() or c in "\n\t" for c in text):
        return strictjson.escaped(text)
    out = "".join(c if c.isprintable() or c in "\n\t" or ord(c) > 0x9F else f"\\x{ord(c):02x}" for c in text)
    return strictjson.escaped(out)


def trailers_text(trailers: Mapping[str, str | None]) -> str:
    lines = []
    for key, value in trailers.items():
        if value is None or value == "":
            continue
        clean = " ".join(_printable(str(value)).split())  # a trailer value is one line
        lines.append(f"{TRAILER_PREFIX}{key}: {clean}")
    return "\n".join(lines)


def parse_trailers(message: str) -> dict[str, str]:
    """The `Evolve-*` trailers of a commit message, keys without the prefix, lower-cased."""
    out: dict[str, str] = {}
    for line in message.splitlines():
        if line.startswith(TRAILER_PREFIX) and ": " in line:
            key, _, value = line[len(TRAILER_PREFIX) :].partition(": ")
            out[key.lower()] = value
    return out


def message_with(message: str, trailers: Mapping[str, str | None]) -> str:
    """A commit message: `message`, then its trailers (if any) after a blank line."""
    extra = trailers_text(trailers)
    message = _printable(message)
    return message + "\n\n" + extra if extra else message
