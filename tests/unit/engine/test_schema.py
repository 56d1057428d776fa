"""Tests for engine.schema: parameter specs -> JSON Schema, argument validation, permission patterns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engine.tools.schema import (
    SCHEMA_DIALECT,
    ToolSpecError,
    param_schema,
    permission_patterns,
    tool_schema,
    validate_args,
)

RECORD_OF_ANY = {
    "type": "object",
    "propertyNames": {"type": "string"},
    "additionalProperties": {},
}
ARRAY_OF_ANY = {"type": "array", "items": {}}


def with_desc(schema: dict[str, Any], description: str = "p") -> dict[str, Any]:
    return {**schema, "description": description}


# ---------------------------------------------------------------------------------------------
# The parameter spec table of docs/hooks.md, adjusted for the inline JSON-value union ({}), description always present


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("desc", {"type": "string", "description": "desc"}),
        ({"type": "string"}, with_desc({"type": "string"})),
        ({"type": "number"}, with_desc({"type": "number"})),
        ({"type": "boolean"}, with_desc({"type": "boolean"})),
        ({"type": "object"}, with_desc(RECORD_OF_ANY)),
        ({"type": "array"}, with_desc(ARRAY_OF_ANY)),
        ({"type": "any"}, with_desc({})),
        ({"type": "integer"}, with_desc({})),
        (
            {"type": "array[string]"},
            with_desc({"type": "array", "items": {"type": "string"}}),
        ),
        (
            {"type": "object[string, number]"},
            with_desc(
                {
                    "type": "object",
                    "propertyNames": {"type": "string"},
                    "additionalProperties": {"type": "number"},
                }
            ),
        ),
        (
            {"enum": ["low", "high"], "type": "number"},
            with_desc({"type": "string", "enum": ["low", "high"]}),
        ),
        ({"type": "list of strings"}, with_desc({"type": "string"})),
    ],
)
def test_table_rows(spec: object, expected: dict[str, Any]) -> None:
    assert param_schema("p", spec) == expected


def test_bare_string_is_required_string() -> None:
    schema = tool_schema({"text": "the text"})
    assert schema["properties"]["text"] == {"type": "string", "description": "the text"}
    assert schema["required"] == ["text"]


def test_description_defaults_to_param_name() -> None:
    assert param_schema("title", {}) == {"type": "string", "description": "title"}
    assert param_schema("title", {"type": "number"}) == {
        "type": "number",
        "description": "title",
    }
    assert param_schema("title", {"description": ""})["description"] == "title"
    assert param_schema("title", {"description": None})["description"] == "title"


def test_explicit_description_kept() -> None:
    assert param_schema("n", {"type": "number", "description": "how many"}) == {
        "type": "number",
        "description": "how many",
    }


def test_missing_type_is_string() -> None:
    assert param_schema("p", {"description": "d"}) == {
        "type": "string",
        "description": "d",
    }


def test_enum_ignores_type_and_keeps_description() -> None:
    assert param_schema("level", {"enum": ["a", "b"], "type": "object", "description": "d"}) == {
        "type": "string",
        "enum": ["a", "b"],
        "description": "d",
    }


def test_empty_enum_falls_back_to_type() -> None:
    assert param_schema("p", {"enum": [], "type": "number"}) == with_desc({"type": "number"})


def test_enum_list_is_copied() -> None:
    values = ["a"]
    schema = param_schema("p", {"enum": values})
    values.append("b")
    assert schema["enum"] == ["a"]


@pytest.mark.parametrize("type_name", ["integer", "int", "dict", "float", "whatever", "any"])
def test_unknown_base_types_are_any_json_value(type_name: str) -> None:
    assert param_schema("p", {"type": type_name}) == with_desc({})


@pytest.mark.parametrize("type_name", ["list of strings", "", "string[", "array[]", " string"])
def test_no_regex_match_is_string(type_name: str) -> None:
    assert param_schema("p", {"type": type_name}) == with_desc({"type": "string"})


@pytest.mark.parametrize(
    ("type_name", "items"),
    [
        ("array[string]", {"type": "string"}),
        ("array[number]", {"type": "number"}),
        ("array[boolean]", {"type": "boolean"}),
        ("array[any]", {}),
        ("array[integer]", {}),
        ("array[object]", RECORD_OF_ANY),
        ("array[array]", ARRAY_OF_ANY),
        ("array[array[string]]", {}),  # nested bracketed form -> any JSON value
        ("array[string, number]", {"type": "string"}),  # extra inner types ignored
        ("array[ number ]", {"type": "number"}),
    ],
)
def test_array_of_t(type_name: str, items: dict[str, Any]) -> None:
    assert param_schema("p", {"type": type_name}) == with_desc({"type": "array", "items": items})


@pytest.mark.parametrize(
    ("type_name", "values"),
    [
        ("object[string, number]", {"type": "number"}),
        ("object[string,string]", {"type": "string"}),
        ("object[string, boolean]", {"type": "boolean"}),
        ("object[string, any]", {}),
        ("object[string, array]", ARRAY_OF_ANY),
        ("object[string, object]", RECORD_OF_ANY),
        ("object[string, array[string]]", {}),
        ("object[string, integer]", {}),
    ],
)
def test_object_record(type_name: str, values: dict[str, Any]) -> None:
    assert param_schema("p", {"type": type_name}) == with_desc(
        {
            "type": "object",
            "propertyNames": {"type": "string"},
            "additionalProperties": values,
        }
    )


@pytest.mark.parametrize("type_name", ["object[string]", "object[a, b, c]", "object[x]"])
def test_object_with_other_inner_is_plain_object(type_name: str) -> None:
    assert param_schema("p", {"type": type_name}) == with_desc(RECORD_OF_ANY)


@pytest.mark.parametrize("optional", [True, 1, "yes", [], {}])
def test_optional_truthy_leaves_out_of_required(optional: object) -> None:
    schema = tool_schema({"a": {"optional": optional}, "b": "b"})
    assert schema["required"] == ["b"]
    assert "a" in schema["properties"]


@pytest.mark.parametrize("optional", [False, 0, "", None])
def test_optional_falsy_is_required(optional: object) -> None:
    assert tool_schema({"a": {"optional": optional}})["required"] == ["a"]


def test_whole_tool_envelope_and_required_order() -> None:
    schema = tool_schema(
        {
            "zeta": "z",
            "alpha": {"type": "number"},
            "maybe": {"type": "boolean", "optional": True},
            "mid": {"enum": ["x"]},
        }
    )
    assert schema == {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "properties": {
            "zeta": {"type": "string", "description": "z"},
            "alpha": {"type": "number", "description": "alpha"},
            "maybe": {"type": "boolean", "description": "maybe"},
            "mid": {"type": "string", "enum": ["x"], "description": "mid"},
        },
        "required": ["zeta", "alpha", "mid"],
    }
    assert SCHEMA_DIALECT == "https://json-schema.org/draft/2020-12/schema"
    assert "additionalProperties" not in schema
    assert list(schema["properties"]) == ["zeta", "alpha", "maybe", "mid"]


@pytest.mark.parametrize("parameters", [None, {}])
def test_empty_tool(parameters: dict[str, Any] | None) -> None:
    assert tool_schema(parameters) == {
        "$schema": SCHEMA_DIALECT,
        "type": "object",
        "properties": {},
        "required": [],
    }


def test_generated_schemas_are_valid_draft_2020_12() -> None:
    schema = tool_schema(ALL_SPECS)
    Draft202012Validator.check_schema(schema)


# ---------------------------------------------------------------------------------------------
# malformed specs


@pytest.mark.parametrize(
    ("parameters", "fragments"),
    [
        (["a"], ["parameters", "got array"]),
        ("text", ["parameters", "got string"]),
        ({"count": 5}, ['parameter "count"', "string or an object", "got number"]),
        ({"count": None}, ['parameter "count"', "got null"]),
        ({"count": ["a"]}, ['parameter "count"', "got array"]),
        ({"level": {"enum": "low,high"}}, ['parameter "level"', "enum", "got string"]),
        ({"level": {"enum": {"a": 1}}}, ['parameter "level"', "enum", "got object"]),
        (
            {"level": {"enum": ["low", 2]}},
            ['parameter "level"', "enum values", "number 2"],
        ),
        ({"level": {"enum": [None]}}, ['parameter "level"', "enum values", "null"]),
        ({"n": {"type": 3}}, ['parameter "n"', "type must be a string"]),
        (
            {"n": {"description": ["x"]}},
            ['parameter "n"', "description must be a string"],
        ),
    ],
)
def test_malformed_specs_raise(parameters: Any, fragments: list[str]) -> None:
    with pytest.raises(ToolSpecError) as info:
        tool_schema(parameters)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message


def test_malformed_enum_message_exact() -> None:
    with pytest.raises(ToolSpecError, match=r'^parameter "level": enum must be a list of strings'):
        param_schema("level", {"enum": "low"})


def test_tool_spec_error_is_value_error() -> None:
    assert issubclass(ToolSpecError, ValueError)


# ---------------------------------------------------------------------------------------------
# no $ref anywhere

ALL_SPECS: dict[str, Any] = {
    "bare": "d",
    "string": {"type": "string"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "object": {"type": "object"},
    "array": {"type": "array"},
    "any": {"type": "any"},
    "integer": {"type": "integer"},
    "int": {"type": "int"},
    "dict": {"type": "dict"},
    "arr_str": {"type": "array[string]"},
    "arr_obj": {"type": "array[object]"},
    "arr_arr": {"type": "array[array]"},
    "arr_nested": {"type": "array[array[string]]"},
    "arr_any": {"type": "array[any]"},
    "rec": {"type": "object[string, number]"},
    "rec_any": {"type": "object[string, any]"},
    "rec_obj": {"type": "object[string, object]"},
    "obj_x": {"type": "object[string]"},
    "enum": {"enum": ["a", "b"], "type": "number"},
    "nomatch": {"type": "list of strings"},
    "opt": {"type": "object", "optional": True},
}


def test_no_ref_or_defs_anywhere() -> None:
    text = json.dumps(tool_schema(ALL_SPECS))
    assert "$ref" not in text
    assert "$defs" not in text
    assert "definitions" not in text
    for name, spec in ALL_SPECS.items():
        assert "$ref" not in json.dumps(param_schema(name, spec))


# ---------------------------------------------------------------------------------------------
# validate_args

SCHEMA = tool_schema(
    {
        "text": "the text",
        "priority": {"enum": ["low", "normal", "high"], "optional": True},
        "count": {"type": "number", "optional": True},
        "flag": {"type": "boolean", "optional": True},
        "tags": {"type": "array[string]", "optional": True},
        "meta": {"type": "object[string, number]", "optional": True},
        "blob": {"type": "object", "optional": True},
        "anything": {"type": "any", "optional": True},
        "list": {"type": "array", "optional": True},
    }
)


def test_valid_call_returns_no_errors() -> None:
    args = {
        "text": "hi",
        "priority": "high",
        "count": 2.5,
        "flag": False,
        "tags": ["a", "b"],
        "meta": {"a": 1, "b": 2},
        "blob": {"x": [1, {"y": None}]},
        "anything": None,
        "list": [1, "a", True, None, {"k": []}],
    }
    assert validate_args(SCHEMA, args) == []
    assert validate_args(SCHEMA, {"text": ""}) == []


def test_extra_arguments_are_accepted() -> None:
    assert validate_args(SCHEMA, {"text": "hi", "unknown": 1}) == []


def test_empty_tool_accepts_empty_args() -> None:
    assert validate_args(tool_schema(None), {}) == []


def test_missing_required() -> None:
    assert validate_args(SCHEMA, {}) == ['missing required argument "text"']


def test_missing_several_required_in_order() -> None:
    schema = tool_schema({"b": "b", "a": "a", "c": {"optional": True}})
    assert validate_args(schema, {}) == [
        'missing required argument "a"',
        'missing required argument "b"',
    ]


def test_enum_error() -> None:
    assert validate_args(SCHEMA, {"text": "t", "priority": "urgent"}) == [
        'argument "priority" must be one of "low", "normal", "high" (got "urgent")'
    ]


def test_enum_error_with_non_string_value() -> None:
    assert validate_args(SCHEMA, {"text": "t", "priority": 3}) == [
        'argument "priority" must be of type string (got number 3)',
        'argument "priority" must be one of "low", "normal", "high" (got 3)',
    ]


def test_type_errors() -> None:
    assert validate_args(SCHEMA, {"text": "t", "count": "x"}) == [
        'argument "count" must be of type number (got string "x")'
    ]
    assert validate_args(SCHEMA, {"text": 5}) == ['argument "text" must be of type string (got number 5)']
    assert validate_args(SCHEMA, {"text": "t", "count": True}) == [
        'argument "count" must be of type number (got boolean true)'
    ]
    assert validate_args(SCHEMA, {"text": None}) == ['argument "text" must be of type string (got null)']
    assert validate_args(SCHEMA, {"text": "t", "flag": "yes"}) == [
        'argument "flag" must be of type boolean (got string "yes")'
    ]
    assert validate_args(SCHEMA, {"text": "t", "tags": "a,b"}) == [
        'argument "tags" must be of type array (got string "a,b")'
    ]
    assert validate_args(SCHEMA, {"text": "t", "blob": [1, 2]}) == [
        'argument "blob" must be of type object (got array [1, 2])'
    ]


@pytest.mark.parametrize(
    ("args", "kind"),
    [([1], "array"), ("x", "string"), (None, "null"), (3, "number"), (True, "boolean")],
)
def test_arguments_not_an_object(args: object, kind: str) -> None:
    assert validate_args(SCHEMA, args) == [f"arguments must be an object (got {kind})"]


def test_array_item_errors() -> None:
    assert validate_args(SCHEMA, {"text": "t", "tags": ["a", 3, "b", False]}) == [
        'argument "tags[1]" must be of type string (got number 3)',
        'argument "tags[3]" must be of type string (got boolean false)',
    ]


def test_array_item_errors_sorted_numerically() -> None:
    tags: list[object] = ["a"] * 12
    tags[2] = 2
    tags[10] = 10
    assert validate_args(SCHEMA, {"text": "t", "tags": tags}) == [
        'argument "tags[2]" must be of type string (got number 2)',
        'argument "tags[10]" must be of type string (got number 10)',
    ]


def test_record_value_errors() -> None:
    assert validate_args(SCHEMA, {"text": "t", "meta": {"a": 1, "b": "two", "odd key": None}}) == [
        'argument "meta.b" must be of type number (got string "two")',
        "argument \"meta['odd key']\" must be of type number (got null)",
    ]


def test_property_names_error() -> None:
    schema = {
        "type": "object",
        "properties": {"m": {"type": "object", "propertyNames": {"maxLength": 2}}},
    }
    assert validate_args(schema, {"m": {"ok": 1, "toolong": 2}}) == [
        'argument "m" has an invalid key "toolong": \'toolong\' is too long'
    ]


def test_additional_properties_false() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "o": {"type": "object", "additionalProperties": False},
        },
        "additionalProperties": False,
    }
    assert validate_args(schema, {"a": "x", "zz": 1, "b": 2, "o": {"k": 1}}) == [
        'unexpected argument "b"',
        'argument "o" has unexpected key "k"',
        'unexpected argument "zz"',
    ]


def test_errors_sorted_by_path() -> None:
    errors = validate_args(
        SCHEMA,
        {"priority": "urgent", "count": "x", "tags": ["a", 3], "meta": {"a": "b"}},
    )
    assert errors == [
        'argument "count" must be of type number (got string "x")',
        'argument "meta.a" must be of type number (got string "b")',
        'argument "priority" must be one of "low", "normal", "high" (got "urgent")',
        'argument "tags[1]" must be of type string (got number 3)',
        'missing required argument "text"',
    ]


def test_long_values_are_truncated() -> None:
    (message,) = validate_args(SCHEMA, {"text": "t", "count": "x" * 500})
    assert message.startswith('argument "count" must be of type number (got string "xxx')
    assert message.endswith("…)")
    assert len(message) < 200


def test_nested_generic_fallback() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number", "minimum": 1}}}
    assert validate_args(schema, {"n": 0}) == ['argument "n": 0 is less than the minimum of 1']


# ---------------------------------------------------------------------------------------------
# permission_patterns


@pytest.mark.parametrize(
    ("permission", "args", "expected"),
    [
        (None, {"file": "a.md"}, ["*"]),
        ({}, {"file": "a.md"}, ["*"]),
        ({"arg": None}, {"file": "a.md"}, ["*"]),
        ("file", {"file": "a.md"}, ["*"]),
        ({"arg": "file"}, {"file": "a.md"}, ["a.md"]),
        ({"arg": "file"}, {}, ["*"]),
        ({"arg": "file"}, {"file": ""}, ["*"]),
        ({"arg": "file"}, {"file": 3}, ["*"]),
        ({"arg": "file"}, {"file": ["a.md"]}, ["*"]),
        ({"arg": ["dst", "src"]}, {"src": "a", "dst": "b"}, ["b", "a"]),
        ({"arg": ["dst", "src"]}, {"src": "a"}, ["a"]),
        ({"arg": ["dst", "src"]}, {"src": "", "dst": None}, ["*"]),
        ({"arg": []}, {"src": "a"}, ["*"]),
        ({"arg": ["x", 5, "y"]}, {"x": "1", "y": "2"}, ["1", "2"]),
        ({"arg": 5}, {"file": "a.md"}, ["*"]),
    ],
)
def test_permission_patterns(permission: object, args: dict[str, Any], expected: list[str]) -> None:
    assert permission_patterns(permission, args) == expected
