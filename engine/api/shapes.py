"""The shapes of what the opencode plugin sends (histories, finished messages, session events, a
connection): each check returns the value, or raises a 400 that names the field and what it must be,
so that nothing malformed reaches the bridge."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from engine.api.http import ApiError

MAX_URL = 2048
MAX_TOKEN = 4096
MAX_DIRECTORY = 4096


def _obj(value: Any, where: str) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    raise ApiError(400, f"{where!r} must be an object")


def _str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ApiError(400, f"{where!r} must be a string")


def _list(value: Any, where: str) -> list[Any] | None:
    if value is None or isinstance(value, list):
        return value
    raise ApiError(400, f"{where!r} must be an array")


def _number(value: Any, where: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ApiError(400, f"{where!r} must be a number")


def history_of(data: dict[str, Any]) -> list[dict[str, Any]] | None:
    """`history`: opencode's messages, each `{info: {...}, parts: [{...}, ...]}`; None when absent."""
    found = _list(data.get("history"), "history")
    if found is None:
        return None
    # A whole conversation at every tool call: the field's name is made only for an error.
    for i, message in enumerate(found):
        if not isinstance(message, dict):
            raise ApiError(400, f"'history[{i}]' must be an object (a message: info and parts)")
        info = message.get("info")
        if info is not None and not isinstance(info, dict):
            _obj(info, f"history[{i}].info")
        parts = message.get("parts")
        if parts is not None and not _plain_parts(parts):
            parts_of(parts, f"history[{i}].parts")
    return found


def _plain_parts(value: Any) -> bool:
    """Whether `value` is a list of parts `parts_of` takes, told without naming anything."""
    if type(value) is not list:
        return False
    for part in value:
        if type(part) is not dict:
            return False
        kind, text = part.get("type"), part.get("text")
        if (kind is not None and type(kind) is not str) or (text is not None and type(text) is not str):
            return False
    return True


def parts_of(value: Any, where: str = "parts") -> list[dict[str, Any]]:
    """A message's parts: objects whose `type` and `text`, when present, are strings."""
    found = _list(value, where) or []
    if _plain_parts(found):
        return found
    for i, part in enumerate(found):
        if not isinstance(part, dict):
            raise ApiError(400, f"'{where}[{i}]' must be an object")
        _str(part.get("type"), f"{where}[{i}].type")
        _str(part.get("text"), f"{where}[{i}].text")
    return found


def message_of(value: Any) -> dict[str, Any]:
    """A finished assistant message: `id`, `agent` strings, `tokens` `{input, output}` numbers."""
    found = _obj(value, "message") or {}
    _str(found.get("id"), "message.id")
    _str(found.get("agent"), "message.agent")
    tokens = _obj(found.get("tokens"), "message.tokens") or {}
    for key in ("input", "output"):
        _number(tokens.get(key), f"message.tokens.{key}")
    return found


def model_of(value: Any, where: str = "model") -> dict[str, str] | None:
    """`{providerID, modelID}` (strings); None when absent."""
    found = _obj(value, where)
    if found is not None:
        for key in ("providerID", "modelID"):
            _str(found.get(key), f"{where}.{key}")
    return found


def event_of(data: dict[str, Any]) -> dict[str, Any]:
    """An opencode event: `type`, and the `properties` the engine reads (`info` with `id` and
    `title`, `sessionID`, `status.type`)."""
    _str(data.get("type"), "type")
    props = _obj(data.get("properties"), "properties") or {}
    info = _obj(props.get("info"), "properties.info") or {}
    _str(info.get("id"), "properties.info.id")
    _str(info.get("title"), "properties.info.title")
    _str(props.get("sessionID"), "properties.sessionID")
    status = _obj(props.get("status"), "properties.status") or {}
    _str(status.get("type"), "properties.status.type")
    return data


def system_of(data: dict[str, Any]) -> list[str]:
    found = _list(data.get("system"), "system") or []
    if not all(isinstance(s, str) for s in found):
        raise ApiError(400, "'system' must be an array of strings")
    return found


def connection(data: dict[str, Any]) -> tuple[str, str, str | None]:
    """`url` (http or https, ASCII), `directory`, `token` (visible ASCII): what the engine will
    use to reach opencode back."""
    url, directory, token = _str(data.get("url"), "url"), _str(data.get("directory"), "directory"), None
    if not url or not directory:
        raise ApiError(400, "'url' and 'directory' are required")
    split = urlsplit(url) if url.isascii() and len(url) <= MAX_URL else None
    if split is None or split.scheme not in ("http", "https") or not split.netloc:
        raise ApiError(400, f"'url' must be an http:// or https:// URL of at most {MAX_URL} ASCII characters")
    if len(directory) > MAX_DIRECTORY or "\0" in directory or not _encodable(directory):
        raise ApiError(400, f"'directory' must be a path of at most {MAX_DIRECTORY} characters")
    token = _str(data.get("token"), "token")
    if token is not None and (len(token) > MAX_TOKEN or not all(" " < c < "\x7f" for c in token)):
        raise ApiError(400, f"'token' must be at most {MAX_TOKEN} visible ASCII characters")
    return url, directory, token


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
