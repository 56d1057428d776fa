"""JSON Schemas for hook tool parameters, argument validation, and permission patterns.

A hook's `discover` output declares tools whose `parameters` map each parameter name to a spec
(docs/hooks.md, "Parameter specs and their JSON Schema"). This module turns those specs into JSON Schema, validates the arguments of a call
against that schema before `execute_tool` runs, and computes the permission patterns a
hook tool call asks for.

Schema rules (as the original TypeScript host made them, with the decisions below):

- A bare string spec is a required string; the string is its description.
- An object spec is `{type?, description?, optional?, enum?}`. The description defaults to the
  parameter name and is put on *every* property.
- A non-empty `enum` gives `{"type": "string", "enum": [...]}`; `type` is then ignored.
- `type` is parsed with `^(\\w+)(?:\\[(.+)\\])?$`; no match means `string`. `string`, `number`,
  `boolean`, `object`, `array` and `any` are known; anything else (`integer`, `int`, `dict`, ...)
  is "any JSON value". `array[T]` has items of the simple type T (a nested `array[...]` is any JSON
  value, extra comma-separated inner types are ignored). `object[K, V]` (exactly two parts) is a
  string-keyed record of V; `object[X]` is the same as `object`.
- A truthy `optional` (JavaScript truthiness, as in the original) leaves the parameter out of
  `required`; `required` lists the others in declared order.
- The tool envelope is `{"$schema": <2020-12>, "type": "object", "properties": ..., "required": ...}`
  without `additionalProperties: false` (the original host accepted extra keys).

Decision: schemas are **self-contained**, with no `$ref` and no `$defs`. The original (zod 4)
emitted the JSON-value union as `{"$ref": "#/$defs/__schema0"}`; opencode 1.18 re-serialises plugin
tool schemas and places the definitions elsewhere, so the `$ref` dangles in what the LLM receives.
The JSON-value union is therefore written inline as `{}` (any JSON value): `object` becomes
`{"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": {}}`, `array`
becomes `{"type": "array", "items": {}}`, and `any`/`integer`/unknown types become `{}` (plus the
description). For JSON input this accepts exactly what the union accepted.

Decision: a malformed spec raises `ToolSpecError` naming the parameter and the problem, so the
caller can skip that one tool with a warning. Besides the obvious cases (parameters not a mapping,
spec neither a string nor a mapping, enum not a list or with non-string values) a `type` or
`description` that is present but not a string is also malformed. An empty `description` falls back
to the parameter name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

JSONDict = dict[str, Any]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_TYPE_RE = re.compile(r"(\w+)(?:\[(.+)\])?", re.ASCII)

__all__ = [
    "SCHEMA_DIALECT",
    "ToolSpecError",
    "param_schema",
    "permission_patterns",
    "tool_schema",
    "validate_args",
]


class ToolSpecError(ValueError):
    """A hook tool's parameter spec cannot be turned into a schema; the message names the parameter."""


# --------------------------------------------------------------------------------------------
# Spec -> JSON Schema


def _json_value() -> JSONDict:
    """The JSON-value union, inline: any JSON value."""
    return {}


def _record(values: JSONDict) -> JSONDict:
    return {
        "type": "object",
        "propertyNames": {"type": "string"},
        "additionalProperties": values,
    }


def _simple_type(name: str) -> JSONDict:
    """Schema for a type name without brackets, as used inside `array[...]` / `object[K, V]`."""
    if name in ("string", "number", "boolean"):
        return {"type": name}
    if name == "object":
        return _record(_json_value())
    if name == "array":
        return {"type": "array", "items": _json_value()}
    # "any", unknown names, and nested bracketed forms such as "array[string]".
    return _json_value()


def _type_schema(type_text: str) -> JSONDict:
    match = _TYPE_RE.fullmatch(type_text)
    if match is None:
        return {"type": "string"}
    base, inner = match.group(1), match.group(2)
    if base in ("string", "number", "boolean"):
        return {"type": base}
    if base == "array":
        if inner is None:
            return {"type": "array", "items": _json_value()}
        first = inner.split(",")[0].strip()
        return {"type": "array", "items": _simple_type(first)}
    if base == "object":
        if inner is not None:
            parts = [part.strip() for part in inner.split(",")]
            if len(parts) == 2:
                return _record(_simple_type(parts[1]))
        return _record(_json_value())
    # "any", "integer", "int", "dict", and every other unknown base type.
    return _json_value()


def _js_truthy(value: object) -> bool:
    """JavaScript truthiness: `[]` and `{}` are truthy, `0`, `""`, NaN, null and false are not."""
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def json_type(value: object) -> str:
    """The JSON name of a value's type (null, boolean, number, string, array, object), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_required(spec: object) -> bool:
    return not (isinstance(spec, dict) and _js_truthy(spec.get("optional")))


def param_schema(name: str, spec: object) -> JSONDict:
    """JSON Schema for one parameter `name` with spec `spec` (a string or a spec object).

    Raises ToolSpecError when the spec is malformed.
    """
    if isinstance(spec, str):
        return {"type": "string", "description": spec}
    if not isinstance(spec, dict):
        raise ToolSpecError(f'parameter "{name}": spec must be a string or an object (got {json_type(spec)})')

    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise ToolSpecError(
            f'parameter "{name}": description must be a string (got {json_type(description)})'
        )
    if not description:
        description = name

    enum = spec.get("enum")
    if enum is not None:
        if not isinstance(enum, list):
            raise ToolSpecError(f'parameter "{name}": enum must be a list of strings (got {json_type(enum)})')
        bad = [value for value in enum if not isinstance(value, str)]
        if bad:
            raise ToolSpecError(
                f'parameter "{name}": enum values must be strings (got {json_type(bad[0])} {_show(bad[0])})'
            )
        if enum:
            return {"type": "string", "enum": list(enum), "description": description}

    type_text = spec.get("type")
    if type_text is None:
        schema: JSONDict = {"type": "string"}
    elif isinstance(type_text, str):
        schema = _type_schema(type_text)
    else:
        raise ToolSpecError(f'parameter "{name}": type must be a string (got {json_type(type_text)})')
    schema["description"] = description
    return schema


def tool_schema(parameters: JSONDict | None) -> JSONDict:
    """JSON Schema (draft 2020-12) for a whole hook tool, from its `parameters` mapping.

    `None` or `{}` gives an object schema with no properties. Raises ToolSpecError when
    `parameters` or one of its specs is malformed.
    """
    properties: JSONDict = {}
    required: list[str] = []
    if parameters is not None:
        if not isinstance(parameters, dict):
            raise ToolSpecError(
                f"parameters must be an object mapping parameter names to specs (got {json_type(parameters)})"
            )
        for name, spec in parameters.items():
            if not isinstance(name, str):
                raise ToolSpecError(f"parameter name {name!r} must be a string")
            properties[name] = param_schema(name, spec)
            if _is_required(spec):
                required.append(name)
    return {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "properties": properties,
        "required": required,
    }


# --------------------------------------------------------------------------------------------
# Argument validation

_MAX_SHOWN = 80


def _show(value: object) -> str:
    """A compact JSON rendering of a value for messages, truncated when long."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 1] + "…"
    return text


def _got(value: object) -> str:
    """`string "x"`, `number 3`, `null`, ... for "(got ...)" parts of messages."""
    kind = json_type(value)
    if value is None:
        return kind
    return f"{kind} {_show(value)}"


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*", re.ASCII)


def _format_path(path: Sequence[object]) -> str:
    """`tags[1]`, `meta.key`, `meta['odd key']` from a jsonschema path."""
    out = ""
    for index, part in enumerate(path):
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif index == 0:
            out += str(part)
        elif isinstance(part, str) and _PLAIN_KEY.fullmatch(part):
            out += f".{part}"
        else:
            out += f"[{str(part)!r}]"
    return out


def _subject(path: Sequence[object]) -> str:
    return f'argument "{_format_path(path)}"' if path else "arguments"


def _type_names(expected: object) -> str:
    if isinstance(expected, list):
        names = [str(name) for name in expected]
        return " or ".join(names)
    return str(expected)


def _extra_keys(error: ValidationError) -> list[str]:
    instance = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    if not isinstance(instance, dict):
        return []
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = []
    for key in instance:
        if isinstance(known, dict) and key in known:
            continue
        if isinstance(patterns, dict) and any(re.search(p, str(key)) for p in patterns):
            continue
        extras.append(str(key))
    return extras


SortKey = tuple[tuple[tuple[int, Any], ...], str]


def _path_key(path: Iterable[object]) -> tuple[tuple[int, Any], ...]:
    key: list[tuple[int, Any]] = []
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            key.append((0, part))
        else:
            key.append((1, str(part)))
    return tuple(key)


def _messages(error: ValidationError) -> list[tuple[list[object], str]]:
    """(path, message) pairs for one jsonschema error."""
    path: list[object] = list(error.absolute_path)
    keyword = error.validator
    value = error.validator_value
    instance = error.instance

    schema_path = list(error.absolute_schema_path)
    if len(schema_path) >= 2 and schema_path[-2] == "propertyNames":
        # propertyNames validates each key as an instance but reports the parent object's path.
        return [
            (
                path,
                f"{_subject(path)} has an invalid key {_show(instance)}: {error.message}",
            )
        ]
    if keyword == "required":
        required = value if isinstance(value, list) else []
        if not isinstance(instance, dict):
            return [(path, error.message)]
        return [
            (
                [*path, name],
                f'missing required argument "{_format_path([*path, name])}"',
            )
            for name in required
            if name not in instance
        ]
    if keyword == "type":
        if not path:
            return [
                (
                    path,
                    f"arguments must be of type {_type_names(value)} (got {json_type(instance)})",
                )
            ]
        return [
            (
                path,
                f"{_subject(path)} must be of type {_type_names(value)} (got {_got(instance)})",
            )
        ]
    if keyword == "enum":
        allowed = ", ".join(_show(v) for v in value) if isinstance(value, list) else _show(value)
        return [(path, f"{_subject(path)} must be one of {allowed} (got {_show(instance)})")]
    if keyword == "const":
        return [(path, f"{_subject(path)} must be {_show(value)} (got {_show(instance)})")]
    if keyword == "additionalProperties":
        extras = _extra_keys(error)
        if not path:
            return [([name], f'unexpected argument "{name}"') for name in extras] or [
                (path, f"arguments: {error.message}")
            ]
        return [([*path, name], f'{_subject(path)} has unexpected key "{name}"') for name in extras] or [
            (path, f"{_subject(path)}: {error.message}")
        ]
    if keyword in ("anyOf", "oneOf"):
        return [
            (
                path,
                f"{_subject(path)} does not match any allowed form (got {_got(instance)})",
            )
        ]
    return [(path, f"{_subject(path)}: {error.message}")]


def validate_args(schema: JSONDict, args: object) -> list[str]:
    """Validate a tool call's arguments against `schema`.

    Returns human-readable messages naming the offending argument (and, for enums, the allowed
    values and the value given), sorted by argument path; an empty list means the call is valid.
    """
    if schema.get("type") == "object" and not isinstance(args, dict):
        return [f"arguments must be an object (got {json_type(args)})"]
    # Imported at the first call: jsonschema and what it loads cost ~45 ms of CPU, which every engine
    # start and every `evolve` command paid, although most never validate a call.
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    found: dict[str, SortKey] = {}
    for error in validator.iter_errors(args):
        for path, message in _messages(error):
            found.setdefault(message, (_path_key(path), message))
    return [message for message, _ in sorted(found.items(), key=lambda item: item[1])]


# --------------------------------------------------------------------------------------------
# Permission patterns


def permission_patterns(permission: object, args: JSONDict) -> list[str]:
    """Patterns a hook tool call asks permission for (docs/hooks.md, "Permissions").

    `permission` is the tool definition's `permission` value. Without an `arg` (a string or a list
    of strings) the pattern is `["*"]`; otherwise the values of those arguments that are non-empty
    strings, in declared order, or `["*"]` when there are none.
    """
    if not isinstance(permission, dict):
        return ["*"]
    arg = permission.get("arg")
    if isinstance(arg, str):
        names: list[object] = [arg]
    elif isinstance(arg, list):
        names = list(arg)
    else:
        return ["*"]
    if not isinstance(args, dict):
        return ["*"]
    patterns: list[str] = []
    for name in names:
        if not isinstance(name, str):
            continue
        value = args.get(name)
        if isinstance(value, str) and value:
            patterns.append(value)
    return patterns or ["*"]
