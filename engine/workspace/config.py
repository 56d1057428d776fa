"""The workspace configuration: `config/evolve.jsonc`, overridden by `EVOLVE_<FIELD>` variables.

The file is parsed with a real JSON5 parser (comments and URLs inside strings, trailing commas).
A file that does not parse, or a field of the wrong type, is an error that names the file, the line
and the field; the caller keeps its last good configuration and reports the error. Nothing is ever
silently replaced by a default.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import json5

from engine.tools.schema import json_type

CLEANUP_MODES = ("none", "new", "archive", "compact")
REVIEW_MODES = ("log", "gate")
HOOK_PROTOCOLS = ("hcp", "opencode-evolve")


@dataclass(frozen=True)
class Model:
    """An LLM model as opencode names it: `provider/model`."""

    provider_id: str
    model_id: str

    def to_dict(self) -> dict[str, str]:
        return {"providerID": self.provider_id, "modelID": self.model_id}

    def __str__(self) -> str:
        return f"{self.provider_id}/{self.model_id}"


@dataclass(frozen=True)
class Config:
    heartbeat_ms: int = 1_800_000
    hook_timeout: int = 30_000
    heartbeat_title: str = "heartbeat"
    heartbeat_agent: str = "evolve"
    model: Model | None = None
    heartbeat_cleanup: str = "none"
    heartbeat_cleanup_count: int | None = None
    heartbeat_cleanup_tokens: int | None = None
    heartbeat_skip_active: bool = True
    # Beyond the original host:
    hook_output_limit: int = 8 * 1024 * 1024  # bytes of stdout a hook run may print before it fails
    journal_max_runs: int = 20_000  # hook runs (and dispatches, tool calls) kept in the journal
    journal_max_bytes: int = 256 * 1024 * 1024  # the journal's database file is kept under this size
    max_request_bytes: int = 32 * 1024 * 1024  # a larger request body is refused (413)
    review: str = "log"  # "gate": the agent's hook and prompt changes wait for an operator's approval
    # hook file name -> "hcp" or "opencode-evolve": the protocol a hook is treated as, whatever it
    # declares (docs/hooks.md, "Two protocols").
    hook_protocols: dict[str, str] = field(default_factory=dict)
    hook_warm_start: bool = True  # Python hooks forked from a ready interpreter (engine/warm/starts.py)
    # Behaviour checks (engine/evals/, docs/evals.md):
    evals_timeout_ms: int = 180_000  # one scenario run, all its messages
    evals_repeat: int = 1  # runs of each scenario at each version, unless asked otherwise
    evals_project: str | None = None  # the opencode project naming the agent's provider and model
    evals_on_review: bool = False  # a change held by the review gate is checked at once
    evals_auto_approve: bool = False  # ... and installed by itself when it regresses no scenario
    evals_agent_tools: bool = False  # the agent gets the tools to read, write and run them
    max_replays: int = 2  # replays that run at once (three copies of the workspace each); others wait
    max_validations: int = 2  # validations (a copy of the workspace each) that run at once; others wait

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["model"] = str(self.model) if self.model else None
        return out


@dataclass(frozen=True)
class ConfigIssue:
    """A problem with one field or with the whole file; `line` is 1-based when known."""

    source: str  # the file path, or "environment"
    message: str
    field: str | None = None
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = (
            self.source + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.column else "")
        )
        what = f" field {self.field!r}:" if self.field else ""
        return f"{where}:{what} {self.message}"


@dataclass
class LoadedConfig:
    config: Config
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)


class _FieldError(ValueError):
    pass


def _as_int(value: object, nullable: bool) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool):
        raise _FieldError(f"expected an integer, got {json_type(value)} {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _FieldError(
        f"expected an integer{' or null' if nullable else ''}, got {json_type(value)} {value!r}"
    )


def _as_str(value: object) -> str:
    if isinstance(value, str):
        return value
    raise _FieldError(f"expected a string, got {json_type(value)} {value!r}")


def _as_optional_str(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return value
    raise _FieldError(f"expected a non-empty string or null, got {json_type(value)} {value!r}")


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise _FieldError(f"expected true or false, got {json_type(value)} {value!r}")


def _as_choice(choices: tuple[str, ...]) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if isinstance(value, str) and value in choices:
            return value
        raise _FieldError(f"must be one of {', '.join(choices)} (got {value!r})")

    return convert


def _as_model(value: object) -> Model | None:
    if value is None:
        return None
    if isinstance(value, str):
        provider, sep, model = value.partition("/")
        if not sep or not provider or not model:
            raise _FieldError(f'expected "provider/model", got {value!r}')
        return Model(provider, model)
    if isinstance(value, Mapping):
        pid, mid = value.get("providerID"), value.get("modelID")
        if isinstance(pid, str) and isinstance(mid, str) and pid and mid:
            return Model(pid, mid)
    raise _FieldError(f'expected "provider/model", {{"providerID","modelID"}} or null, got {value!r}')


def _as_protocols(value: object) -> dict[str, str]:
    if isinstance(value, str):  # from the environment: a JSON object
        try:
            value = json.loads(value)
        except ValueError:
            raise _FieldError(f"expected a JSON object, got {value!r}") from None
    if not isinstance(value, Mapping):
        raise _FieldError(f"expected an object mapping hook file names to a protocol, got {json_type(value)}")
    out: dict[str, str] = {}
    for hook, protocol in value.items():
        if protocol not in HOOK_PROTOCOLS:
            raise _FieldError(
                f"hooks/{hook}: the protocol must be one of {', '.join(HOOK_PROTOCOLS)} (got {protocol!r})"
            )
        out[str(hook)] = str(protocol)
    return out


def _positive(convert: Callable[[object], int | None]) -> Callable[[object], int | None]:
    def check(value: object) -> int | None:
        out = convert(value)
        if out is not None and out <= 0:
            raise _FieldError(f"must be greater than 0 (got {out})")
        return out

    return check


_CONVERTERS: dict[str, Callable[[object], Any]] = {
    "heartbeat_ms": lambda v: _as_int(v, nullable=False),
    "hook_timeout": _positive(lambda v: _as_int(v, nullable=False)),
    "heartbeat_title": _as_str,
    "heartbeat_agent": _as_str,
    "model": _as_model,
    "heartbeat_cleanup": _as_choice(CLEANUP_MODES),
    "heartbeat_cleanup_count": _positive(lambda v: _as_int(v, nullable=True)),
    "heartbeat_cleanup_tokens": _positive(lambda v: _as_int(v, nullable=True)),
    "heartbeat_skip_active": _as_bool,
    "hook_output_limit": _positive(lambda v: _as_int(v, nullable=False)),
    "journal_max_runs": _positive(lambda v: _as_int(v, nullable=False)),
    "journal_max_bytes": _positive(lambda v: _as_int(v, nullable=False)),
    "max_request_bytes": _positive(lambda v: _as_int(v, nullable=False)),
    "review": _as_choice(REVIEW_MODES),
    "hook_protocols": _as_protocols,
    "hook_warm_start": _as_bool,
    "evals_timeout_ms": _positive(lambda v: _as_int(v, nullable=False)),
    "evals_repeat": _positive(lambda v: _as_int(v, nullable=False)),
    "evals_project": _as_optional_str,
    "evals_on_review": _as_bool,
    "evals_auto_approve": _as_bool,
    "evals_agent_tools": _as_bool,
    "max_replays": _positive(lambda v: _as_int(v, nullable=False)),
    "max_validations": _positive(lambda v: _as_int(v, nullable=False)),
}
FIELDS = tuple(_CONVERTERS)

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _from_env_text(name: str, text: str) -> object:
    """Turn an `EVOLVE_<FIELD>` string into a JSON value of the field's declared type."""
    kind = Config.__dataclass_fields__[name].type
    stripped = text.strip()
    if stripped.lower() == "null" and "None" in str(kind):
        return None
    if kind in (bool, "bool"):
        lowered = stripped.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise _FieldError(f"expected true/false/1/0/yes/no, got {text!r}")
    if "int" in str(kind):
        try:
            return int(stripped.replace("_", ""))
        except ValueError:
            raise _FieldError(f"expected an integer, got {text!r}") from None
    return text


def blank_comments(text: str) -> str:
    """`text` with JSON5 comments replaced by spaces (newlines kept), so that positions and line
    numbers stay those of the file. String-aware: `"http://x"` is not a comment."""
    out = list(text)
    i, n = 0, len(text)
    quote: str | None = None
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for j in range(i, end):
                if out[j] != "\n":
                    out[j] = " "
            i = end
            continue
        i += 1
    return "".join(out)


def _line_of(blank: str, key: str) -> int | None:
    """The line where `key` is defined, in comment-blanked text."""
    match = re.search(rf"""(?<![\w$])["']?{re.escape(key)}["']?\s*:""", blank)
    return blank.count("\n", 0, match.start()) + 1 if match else None


_JSON5_AT = re.compile(r"<string>:(\d+) Unexpected (.*) at column (\d+)$", re.S)
_JSON5_LINE = re.compile(r"<string>:(\d+)\s*(.*)")
_QUOTED = re.compile(r"'([^']+)'")
_STARTS_VALUE = re.compile(r"""["'\w$+\-.{\[]""")


@dataclass(frozen=True)
class _ParseError:
    message: str
    line: int | None = None
    column: int | None = None


def _tokens(text: str) -> tuple[list[str], list[tuple[str, int]]]:
    """The brackets still open at the end of `text` (comment-blanked JSON5), and its tokens: a
    punctuation character or "value", each with the offset where it ends."""
    stack: list[str] = []
    tokens: list[tuple[str, int]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            tokens.append(("value", min(j + 1, n)))
            i = j + 1
        elif ch in "{}[],:":
            if ch in "{[":
                stack.append(ch)
            elif ch in "}]" and stack:
                stack.pop()
            tokens.append((ch, i + 1))
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in "{}[],:\"'":
                j += 1
            tokens.append(("value", j))
            i = j
    return stack, tokens


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset`."""
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _parse_error(exc: BaseException, blank: str) -> _ParseError:
    """Where a JSON5 syntax error is and what it is. The parser reports the first character it cannot
    take; when that is the start of a value right after another value, the mistake is the missing ','
    (or ':' after a key) before it, so that is the position reported."""
    if isinstance(exc, RecursionError):
        return _ParseError("nested too deeply")
    at = _JSON5_AT.match(str(exc))
    if at:
        line, found, column = int(at[1]), at[2][1:-1] if len(at[2]) >= 2 else at[2], int(at[3])
        if at[2] == "end of input":
            return _ParseError(
                "the file ends before the value is complete (a '}' or ']' missing?)", line, column
            )
        lines = blank.split("\n")
        offset = sum(len(x) + 1 for x in lines[: line - 1]) + column - 1
        stack, tokens = _tokens(blank[:offset])
        if not stack and tokens:
            return _ParseError(f"unexpected {found!r} after the end of the top-level value", line, column)
        if tokens and tokens[-1][0] in ("value", "}", "]") and _STARTS_VALUE.match(found):
            after_key = (
                stack[-1:] == ["{"]
                and tokens[-1][0] == "value"
                and (len(tokens) < 2 or tokens[-2][0] in "{,")
            )
            missing = "':' after the key" if after_key else "',' after the value"
            here_line, here_column = _position(blank, tokens[-1][1])
            return _ParseError(
                f"missing {missing} (the next one starts at line {line}, column {column})",
                here_line,
                here_column,
            )
        shown = "end of line (an unclosed string or an incomplete value?)" if found == "\n" else repr(found)
        return _ParseError(f"unexpected {shown}", line, column)
    match = _JSON5_LINE.match(str(exc))
    if match:
        return _ParseError(match.group(2), int(match.group(1)))
    # Some errors (a bad number like 1e) name the token but not the line: find the token.
    token = _QUOTED.search(str(exc))
    if token:
        found_at = re.search(rf"(?<![\w.]){re.escape(token.group(1))}(?![\w.])", blank)
        if found_at:
            line, column = _position(blank, found_at.start())
            return _ParseError(str(exc), line, column)
    return _ParseError(str(exc))


def parse_json5(text: str, source: str) -> tuple[Any, ConfigIssue | None]:
    """`text` as JSON5, or None and where and why it does not parse, in the words of the config's own
    errors (other workspace files in JSONC, such as the scenarios of evals/, read alike)."""
    try:
        return json5.loads(text), None
    except (ValueError, RecursionError) as exc:
        error = _parse_error(exc, blank_comments(text))
        return None, ConfigIssue(
            source, f"not valid JSON5: {error.message}", line=error.line, column=error.column
        )


def load_config(path: Path, env: Mapping[str, str] | None = None, base: Config | None = None) -> LoadedConfig:
    """Read `path` (missing is fine: defaults) and apply `EVOLVE_*` overrides from `env`.

    A file that does not parse changes nothing: the result is `base` (the last good configuration,
    or the defaults) with the error reported. Otherwise the file applies on top of the defaults (a
    field deleted from the file goes back to its default), except that a field with a wrong value
    keeps its value from `base`.
    """
    env = os.environ if env is None else env
    base = base or Config()
    result = LoadedConfig(base)
    values: dict[str, Any] = {}
    kept: list[str] = []  # fields whose new value is invalid: they keep base's
    source = str(path)
    text = ""
    parsed_ok = True
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        result.errors.append(ConfigIssue(source, f"cannot read the file: {exc}"))
        parsed_ok = False
    blank = blank_comments(text)
    if blank.strip():
        parsed: Any = None
        try:
            parsed = json5.loads(text)
        except (ValueError, RecursionError) as exc:
            error = _parse_error(exc, blank)
            result.errors.append(
                ConfigIssue(source, f"not valid JSON5: {error.message}", line=error.line, column=error.column)
            )
            parsed_ok = False
        if parsed_ok and not isinstance(parsed, dict):
            result.errors.append(
                ConfigIssue(source, f"expected an object at the top, got {json_type(parsed)}", line=1)
            )
            parsed_ok = False
        elif parsed_ok:
            for key, raw in parsed.items():
                if key.startswith("$"):
                    continue
                if key not in _CONVERTERS:
                    result.warnings.append(
                        ConfigIssue(source, "unknown field, ignored", field=key, line=_line_of(blank, key))
                    )
                    continue
                try:
                    values[key] = _CONVERTERS[key](raw)
                except _FieldError as exc:
                    result.errors.append(ConfigIssue(source, str(exc), field=key, line=_line_of(blank, key)))
                    kept.append(key)
    for name in FIELDS:
        var = f"EVOLVE_{name.upper()}"
        if var not in env:
            continue
        try:
            values[name] = _CONVERTERS[name](_from_env_text(name, env[var]))
        except _FieldError as exc:
            # Not applied: the file's value (or the default) stays.
            result.errors.append(ConfigIssue("environment", f"{var}: {exc}", field=name))
    for name in kept:
        values[name] = getattr(base, name)
    result.config = replace(Config() if parsed_ok else base, **values)
    return result
