"""What a hook prints, as the engine reads it: JSON lines folded into one result, log lines apart
(docs/hooks.md, "What a hook prints")."""

from __future__ import annotations

from typing import Any

from engine.core import strictjson


def _preview(text: str, limit: int = 60) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def parse_jsonl(stdout: bytes) -> tuple[list[str], list[Any], dict[str, Any], str | None]:
    """Split stdout into lines and fold them into one result (docs/hooks.md, "What a hook prints").

    Returns (lines, logs, result, error). A line whose `log` is truthy goes to `logs` and is dropped
    from the result, as in the original host; other object lines are merged with later keys winning.
    A line that is not UTF-8, not JSON (`NaN`, `Infinity` and numbers too large for a float are not),
    nested deeper than `strictjson.MAX_DEPTH`, or not an object makes `error` name it.
    """
    lines: list[str] = []
    logs: list[Any] = []
    result: dict[str, Any] = {}
    error: str | None = None
    for number, raw in enumerate(stdout.split(b"\n"), start=1):
        text = raw.decode("utf-8", errors="replace")
        if raw.strip():
            lines.append(text)
        if error is not None or not raw.strip():
            continue
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            error = f"stdout line {number} is not valid UTF-8: {_preview(text)}"
            continue
        try:
            value = strictjson.loads(decoded)
        except strictjson.NotJSON:
            error = f"stdout line {number} is not JSON: {_preview(decoded)}"
            continue
        except strictjson.Rejected as exc:  # NaN, a number too large, nested too deeply
            error = f"stdout line {number}: {exc}: {_preview(decoded)}"
            continue
        if not isinstance(value, dict):
            error = f"stdout line {number} is not a JSON object: {_preview(decoded)}"
            continue
        if value.get("log"):
            logs.append(value["log"])
            continue
        result.update(value)
    return lines, logs, result, error
