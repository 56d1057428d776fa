"""Tests for engine.config: config/evolve.jsonc plus EVOLVE_<FIELD> overrides."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from engine.workspace.config import FIELDS, Config, ConfigIssue, LoadedConfig, Model, load_config
from tests.support.environment import REPO

# A base that differs from the defaults in every field, to tell "kept from base" from "default".
BASE = Config(
    heartbeat_ms=111,
    hook_timeout=222,
    heartbeat_title="base title",
    heartbeat_agent="base agent",
    model=Model("base", "model"),
    heartbeat_cleanup="compact",
    heartbeat_cleanup_count=3,
    heartbeat_cleanup_tokens=4,
    heartbeat_skip_active=False,
    hook_output_limit=555,
    journal_max_runs=666,
    journal_max_bytes=777,
    max_request_bytes=888,
    review="gate",
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config" / "evolve.jsonc"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path, env: dict[str, str] | None = None, base: Config | None = None) -> LoadedConfig:
    return load_config(path, env or {}, base)


def only_error(loaded: LoadedConfig) -> ConfigIssue:
    assert len(loaded.errors) == 1, loaded.errors
    return loaded.errors[0]


# --- defaults ---------------------------------------------------------------------------


def test_defaults_follow_the_readme() -> None:
    c = Config()
    assert c.heartbeat_ms == 1_800_000
    assert c.hook_timeout == 30_000
    assert c.heartbeat_title == "heartbeat"
    assert c.heartbeat_agent == "evolve"
    assert c.model is None
    assert c.heartbeat_cleanup == "none"
    assert c.heartbeat_cleanup_count is None
    assert c.heartbeat_cleanup_tokens is None
    assert c.heartbeat_skip_active is True
    assert c.hook_output_limit > 0 and c.journal_max_runs > 0


def test_fields_cover_the_nine_original_keys() -> None:
    original = {
        "heartbeat_ms",
        "hook_timeout",
        "heartbeat_title",
        "heartbeat_agent",
        "model",
        "heartbeat_cleanup",
        "heartbeat_cleanup_count",
        "heartbeat_cleanup_tokens",
        "heartbeat_skip_active",
    }
    assert original <= set(FIELDS)
    assert set(FIELDS) == {f.name for f in fields(Config)}


def test_missing_file_gives_defaults_without_issues(tmp_path: Path) -> None:
    loaded = load(tmp_path / "config" / "evolve.jsonc")
    assert loaded.config == Config()
    assert loaded.errors == [] and loaded.warnings == []


@pytest.mark.parametrize("text", ["", "  \n\n", "{}", "{\n  // nothing set\n}\n"])
def test_empty_file_gives_defaults(tmp_path: Path, text: str) -> None:
    loaded = load(write(tmp_path, text))
    assert loaded.config == Config()
    assert loaded.errors == [] and loaded.warnings == []


def test_comment_only_file_gives_defaults(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, '// {\n//   "hook_timeout": 5000,\n// }\n'))
    assert loaded.errors == []
    assert loaded.config == Config()


def test_to_dict() -> None:
    d = Config(model=Model("anthropic", "claude/x")).to_dict()
    assert d["model"] == "anthropic/claude/x"
    assert set(d) == set(FIELDS)
    assert Config().to_dict()["model"] is None
    assert Model("a", "b/c").to_dict() == {"providerID": "a", "modelID": "b/c"}


# --- JSON5 parsing -----------------------------------------------------------


def test_json5_comments_urls_and_trailing_commas(tmp_path: Path) -> None:
    text = """// leading comment
/* block
   comment */
{
  // Milliseconds between heartbeats.
  "heartbeat_ms": 60000, // trailing comment
  heartbeat_title: "http://x//y", /* inline */
  'heartbeat_agent': "per/*not a comment*/",
  "model": "openai/gpt-4o//mini",
  "heartbeat_cleanup": "new",
  "heartbeat_cleanup_count": 1,
  "heartbeat_skip_active": false,
  "hook_timeout": 5000.0,
}
"""
    loaded = load(write(tmp_path, text))
    assert loaded.errors == [] and loaded.warnings == []
    c = loaded.config
    assert c.heartbeat_ms == 60000
    assert c.heartbeat_title == "http://x//y"
    assert c.heartbeat_agent == "per/*not a comment*/"
    assert c.model == Model("openai", "gpt-4o//mini")
    assert c.heartbeat_cleanup == "new"
    assert c.heartbeat_cleanup_count == 1
    assert c.heartbeat_skip_active is False
    assert c.hook_timeout == 5000 and isinstance(c.hook_timeout, int)
    # untouched fields keep their defaults
    assert c.heartbeat_cleanup_tokens is None
    assert c.journal_max_runs == Config().journal_max_runs


def test_example_workspace_config_parses_to_defaults() -> None:
    example = REPO / "engine" / "example" / "config" / "evolve.jsonc"
    loaded = load(example)
    assert loaded.errors == [] and loaded.warnings == []
    assert loaded.config == Config()


def test_model_as_object_and_null(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, '{"model": {"providerID": "p", "modelID": "m/n"}}'))
    assert loaded.errors == []
    assert loaded.config.model == Model("p", "m/n")
    loaded = load(write(tmp_path, '{"model": null}'), base=BASE)
    assert loaded.errors == []
    assert loaded.config.model is None


@pytest.mark.parametrize(
    ("text", "line", "column", "what"),
    [
        ('{\n  "heartbeat_ms": 1000,\n  "hook_timeout": ,\n}\n', 3, 19, "unexpected ','"),
        # A missing comma is reported where the comma belongs, not at the next key.
        ('{\n  "heartbeat_ms": 1000\n  "hook_timeout": 5\n}\n', 2, 23, "missing ',' after the value"),
        ('{\n  "heartbeat_ms": 1000 // ms\n\n  hook_timeout: 5\n}\n', 2, 23, "missing ',' after the value"),
        (
            '// c\n// c\n{\n  "heartbeat_title": "a",\n\n  "heartbeat_agent": "b" "c",\n}\n',
            6,
            25,
            "missing ',' after the value",
        ),
        ('{\n  "heartbeat_ms" 1000\n}\n', 2, 17, "missing ':' after the key"),
        ('{\n  "heartbeat_title": "a\n}\n', 2, 24, "unexpected end of line"),
        ('{\n  "heartbeat_ms": 1000,\n', 3, 1, "the file ends"),
        ('{"heartbeat_ms": 1000}\nx\n', 2, 1, "unexpected 'x' after the end of the top-level value"),
    ],
)
def test_unparsable_file_is_an_error_with_file_line_and_column_and_base_is_kept(
    tmp_path: Path, text: str, line: int, column: int, what: str
) -> None:
    path = write(tmp_path, text)
    loaded = load(path, base=BASE)
    issue = only_error(loaded)
    assert issue.source == str(path)
    assert (issue.line, issue.column) == (line, column), str(issue)
    assert issue.field is None
    assert str(issue).startswith(f"{path}:{line}:{column}: not valid JSON5: {what}"), str(issue)
    # nothing from the file applies, not even the fields before the syntax error
    assert loaded.config == BASE


def test_number_typo_error_names_the_line(tmp_path: Path) -> None:
    issue = only_error(load(write(tmp_path, '{\n  "heartbeat_ms": 1,\n  "hook_timeout": 1e,\n}\n')))
    assert issue.line == 3


def test_deeply_nested_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, '{"x": ' + "[" * 5000), base=BASE)
    assert len(loaded.errors) == 1
    assert loaded.config == BASE


def test_unparsable_file_without_base_gives_defaults(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, '{"heartbeat_ms": 5,,}'))
    assert len(loaded.errors) == 1
    assert loaded.config == Config()


def test_unparsable_file_still_takes_env_overrides(tmp_path: Path) -> None:
    loaded = load(write(tmp_path, "{oops"), env={"EVOLVE_HEARTBEAT_AGENT": "envagent"}, base=BASE)
    assert len(loaded.errors) == 1
    assert loaded.config == replace(BASE, heartbeat_agent="envagent")


@pytest.mark.parametrize("text", ["[1, 2]", '"a string"', "42", "null"])
def test_top_level_not_an_object(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    loaded = load(path, base=BASE)
    if text == "null":
        # `null` is "no settings"; either an error or nothing at all, never a crash or a change
        assert loaded.config == BASE
        return
    issue = only_error(loaded)
    assert issue.source == str(path)
    assert issue.line == 1
    assert "object" in issue.message
    assert loaded.config == BASE


def test_non_utf8_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "evolve.jsonc"
    path.write_bytes(b'{"heartbeat_title": "\xff\xfe"}')
    loaded = load(path, base=BASE)
    issue = only_error(loaded)
    assert issue.source == str(path)
    assert loaded.config == BASE


# --- wrong types: error naming file, line and field; other fields apply ------------------------


def test_wrong_type_names_file_line_field_and_keeps_base_value(tmp_path: Path) -> None:
    text = '{\n  "heartbeat_title": "new title",\n  "hook_timeout": "fast",\n  "heartbeat_ms": 42,\n}\n'
    path = write(tmp_path, text)
    loaded = load(path, base=BASE)
    issue = only_error(loaded)
    assert issue.source == str(path)
    assert issue.field == "hook_timeout"
    assert issue.line == 3
    assert str(issue).startswith(f"{path}:3:")
    assert "'hook_timeout'" in str(issue)
    assert loaded.config == replace(
        Config(), heartbeat_title="new title", heartbeat_ms=42, hook_timeout=BASE.hook_timeout
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("heartbeat_ms", '"1000"'),
        ("heartbeat_ms", "true"),
        ("heartbeat_ms", "1.5"),
        ("heartbeat_ms", "null"),
        ("heartbeat_ms", "NaN"),
        ("heartbeat_ms", "Infinity"),
        ("hook_timeout", "0"),
        ("hook_timeout", "-5"),
        ("hook_timeout", "[]"),
        ("heartbeat_title", "3"),
        ("heartbeat_title", "null"),
        ("heartbeat_agent", "{}"),
        ("heartbeat_agent", "false"),
        ("model", '"no-slash"'),
        ("model", '"/model"'),
        ("model", '"provider/"'),
        ("model", "7"),
        ("model", '{"providerID": "p"}'),
        ("heartbeat_cleanup", '"delete"'),
        ("heartbeat_cleanup", '"None"'),
        ("heartbeat_cleanup", "null"),
        ("heartbeat_cleanup_count", '"7"'),
        ("heartbeat_cleanup_count", "0"),
        ("heartbeat_cleanup_tokens", "-1"),
        ("heartbeat_cleanup_tokens", "2.5"),
        ("heartbeat_skip_active", '"false"'),
        ("heartbeat_skip_active", "0"),
        ("heartbeat_skip_active", "null"),
        ("hook_output_limit", "0"),
        ("journal_max_runs", '"many"'),
        ("review", '"maybe"'),
    ],
)
def test_each_field_rejects_wrong_values(tmp_path: Path, key: str, value: str) -> None:
    path = write(tmp_path, f'{{\n  "heartbeat_agent_ok": 1,\n  "{key}": {value}\n}}\n')
    loaded = load(path, base=BASE)
    assert [e.field for e in loaded.errors] == [key]
    issue = loaded.errors[0]
    assert issue.source == str(path)
    assert issue.line == 3
    assert getattr(loaded.config, key) == getattr(BASE, key)
    # Fields the file leaves out have their defaults; the bad one keeps its last good value.
    assert loaded.config == replace(Config(), **{key: getattr(BASE, key)})


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("heartbeat_ms", "-1", -1),  # a negative value disables the heartbeat
        ("heartbeat_ms", "0", 0),
        ("heartbeat_cleanup_count", "null", None),
        ("heartbeat_cleanup_tokens", "100000", 100000),
        ("heartbeat_cleanup", '"archive"', "archive"),
        ("heartbeat_title", '""', ""),
    ],
)
def test_accepted_edge_values(tmp_path: Path, key: str, value: str, expected: Any) -> None:
    loaded = load(write(tmp_path, f'{{"{key}": {value}}}'), base=BASE)
    assert loaded.errors == []
    assert getattr(loaded.config, key) == expected


def test_several_wrong_fields_each_reported(tmp_path: Path) -> None:
    text = '{\n  "hook_timeout": 0,\n  "heartbeat_agent": "a",\n  "heartbeat_cleanup": "x",\n}'
    loaded = load(write(tmp_path, text), base=BASE)
    assert [(e.field, e.line) for e in loaded.errors] == [("hook_timeout", 2), ("heartbeat_cleanup", 4)]
    assert loaded.config == replace(
        Config(),
        heartbeat_agent="a",
        hook_timeout=BASE.hook_timeout,
        heartbeat_cleanup=BASE.heartbeat_cleanup,
    )


def test_error_line_with_unquoted_and_single_quoted_keys(tmp_path: Path) -> None:
    text = "{\n  heartbeat_ms: 1,\n\n  'hook_timeout': 'soon',\n}\n"
    issue = only_error(load(write(tmp_path, text)))
    assert (issue.field, issue.line) == ("hook_timeout", 4)


def test_error_line_for_a_key_at_the_start_of_a_line(tmp_path: Path) -> None:
    text = '{\n"heartbeat_ms": 1,\n"hook_timeout": "fast"\n}\n'
    issue = only_error(load(write(tmp_path, text)))
    assert (issue.field, issue.line) == ("hook_timeout", 3)


def test_error_line_ignores_the_key_inside_a_comment(tmp_path: Path) -> None:
    text = '{\n  // "hook_timeout": 5000,   (old value)\n  "hook_timeout": "fast",\n}\n'
    issue = only_error(load(write(tmp_path, text)))
    assert (issue.field, issue.line) == ("hook_timeout", 3)


def test_unknown_field_is_a_warning(tmp_path: Path) -> None:
    text = '{\n  "$schema": "./schema.json",\n  "heartbeat_ms": 5,\n  "heartbeat_msec": 10,\n}\n'
    path = write(tmp_path, text)
    loaded = load(path)
    assert loaded.errors == []
    assert len(loaded.warnings) == 1
    warning = loaded.warnings[0]
    assert warning.source == str(path)
    assert warning.field == "heartbeat_msec"
    assert warning.line == 4
    assert "unknown" in warning.message
    assert loaded.config == replace(Config(), heartbeat_ms=5)


# --- environment overrides ------------------------------------------------------


@pytest.mark.parametrize(
    ("var", "text", "attr", "expected"),
    [
        ("EVOLVE_HEARTBEAT_MS", "60000", "heartbeat_ms", 60000),
        ("EVOLVE_HEARTBEAT_MS", "-1", "heartbeat_ms", -1),
        ("EVOLVE_HEARTBEAT_MS", " 1_000 ", "heartbeat_ms", 1000),
        ("EVOLVE_HOOK_TIMEOUT", "5000", "hook_timeout", 5000),
        ("EVOLVE_HEARTBEAT_TITLE", "hb run", "heartbeat_title", "hb run"),
        ("EVOLVE_HEARTBEAT_AGENT", "per", "heartbeat_agent", "per"),
        ("EVOLVE_MODEL", "anthropic/claude-sonnet-4", "model", Model("anthropic", "claude-sonnet-4")),
        ("EVOLVE_MODEL", "provider/model/with/slash", "model", Model("provider", "model/with/slash")),
        ("EVOLVE_MODEL", "null", "model", None),
        ("EVOLVE_HEARTBEAT_CLEANUP", "new", "heartbeat_cleanup", "new"),
        ("EVOLVE_HEARTBEAT_CLEANUP", "archive", "heartbeat_cleanup", "archive"),
        ("EVOLVE_HEARTBEAT_CLEANUP", "compact", "heartbeat_cleanup", "compact"),
        ("EVOLVE_HEARTBEAT_CLEANUP", "none", "heartbeat_cleanup", "none"),
        ("EVOLVE_HEARTBEAT_CLEANUP_COUNT", "7", "heartbeat_cleanup_count", 7),
        ("EVOLVE_HEARTBEAT_CLEANUP_COUNT", "null", "heartbeat_cleanup_count", None),
        ("EVOLVE_HEARTBEAT_CLEANUP_COUNT", "NULL", "heartbeat_cleanup_count", None),
        ("EVOLVE_HEARTBEAT_CLEANUP_TOKENS", "150000", "heartbeat_cleanup_tokens", 150000),
        ("EVOLVE_HEARTBEAT_CLEANUP_TOKENS", "null", "heartbeat_cleanup_tokens", None),
        ("EVOLVE_HOOK_OUTPUT_LIMIT", "2048", "hook_output_limit", 2048),
        ("EVOLVE_JOURNAL_MAX_RUNS", "10", "journal_max_runs", 10),
        ("EVOLVE_REVIEW", "gate", "review", "gate"),
    ],
)
def test_env_override_every_field(var: str, text: str, attr: str, expected: Any) -> None:
    loaded = load_config(Path("/nonexistent/evolve.jsonc"), {var: text}, BASE)
    assert loaded.errors == [], loaded.errors
    value = getattr(loaded.config, attr)
    assert value == expected
    assert type(value) is type(expected)
    assert loaded.config == replace(Config(), **{attr: expected})


def test_env_covers_every_field() -> None:
    """Every field has an EVOLVE_<FIELD> variable that changes it."""
    env = {
        "EVOLVE_HEARTBEAT_MS": "1",
        "EVOLVE_HOOK_TIMEOUT": "2",
        "EVOLVE_HEARTBEAT_TITLE": "t",
        "EVOLVE_HEARTBEAT_AGENT": "a",
        "EVOLVE_MODEL": "p/m",
        "EVOLVE_HEARTBEAT_CLEANUP": "new",
        "EVOLVE_HEARTBEAT_CLEANUP_COUNT": "3",
        "EVOLVE_HEARTBEAT_CLEANUP_TOKENS": "4",
        "EVOLVE_HEARTBEAT_SKIP_ACTIVE": "false",
        "EVOLVE_HOOK_OUTPUT_LIMIT": "5",
        "EVOLVE_JOURNAL_MAX_RUNS": "6",
        "EVOLVE_JOURNAL_MAX_BYTES": "7",
        "EVOLVE_MAX_REQUEST_BYTES": "8",
        "EVOLVE_REVIEW": "gate",
        "EVOLVE_HOOK_PROTOCOLS": '{"a.py": "hcp"}',
        "EVOLVE_HOOK_WARM_START": "off",
        "EVOLVE_EVALS_TIMEOUT_MS": "9",
        "EVOLVE_EVALS_REPEAT": "3",
        "EVOLVE_EVALS_PROJECT": "/p",
        "EVOLVE_EVALS_ON_REVIEW": "yes",
        "EVOLVE_EVALS_AUTO_APPROVE": "1",
        "EVOLVE_EVALS_AGENT_TOOLS": "on",
        "EVOLVE_MAX_REPLAYS": "3",
        "EVOLVE_MAX_VALIDATIONS": "4",
    }
    assert {f"EVOLVE_{name.upper()}" for name in FIELDS} == set(env)
    loaded = load_config(Path("/nonexistent/evolve.jsonc"), env)
    assert loaded.errors == []
    changed = {name for name in FIELDS if getattr(loaded.config, name) != getattr(Config(), name)}
    assert changed == set(FIELDS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        ("yes", True),
        ("YES", True),
        ("Yes", True),
        (" true ", True),
        ("false", False),
        ("FALSE", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("NO", False),
        ("No", False),
    ],
)
def test_env_boolean(text: str, expected: bool) -> None:
    base = replace(BASE, heartbeat_skip_active=not expected)
    loaded = load_config(Path("/nonexistent"), {"EVOLVE_HEARTBEAT_SKIP_ACTIVE": text}, base)
    assert loaded.errors == []
    assert loaded.config.heartbeat_skip_active is expected


@pytest.mark.parametrize(("text", "expected"), [("0", False), ("off", False), ("on", True), ("1", True)])
def test_env_turns_warm_starts_off_and_on(text: str, expected: bool) -> None:
    base = replace(BASE, hook_warm_start=not expected)
    loaded = load_config(Path("/nonexistent"), {"EVOLVE_HOOK_WARM_START": text}, base)
    assert loaded.errors == []
    assert loaded.config.hook_warm_start is expected


def test_warm_starts_are_on_by_default_and_a_file_turns_them_off(tmp_path: Path) -> None:
    assert Config().hook_warm_start is True
    path = tmp_path / "evolve.jsonc"
    path.write_text('{"hook_warm_start": false}')
    assert load_config(path, {}).config.hook_warm_start is False
    path.write_text('{"hook_warm_start": "no"}')
    issue = only_error(load_config(path, {}))
    assert issue.field == "hook_warm_start" and "true or false" in issue.message


@pytest.mark.parametrize("text", ["maybe", "", "2", "truthy", "null"])
def test_env_invalid_boolean(text: str) -> None:
    loaded = load_config(Path("/nonexistent"), {"EVOLVE_HEARTBEAT_SKIP_ACTIVE": text}, BASE)
    issue = only_error(loaded)
    assert issue.source == "environment"
    assert issue.field == "heartbeat_skip_active"
    assert "EVOLVE_HEARTBEAT_SKIP_ACTIVE" in str(issue)
    assert repr(text) in issue.message
    assert loaded.config == Config()


@pytest.mark.parametrize(
    ("var", "text"),
    [
        ("EVOLVE_HEARTBEAT_MS", "soon"),
        ("EVOLVE_HEARTBEAT_MS", ""),
        ("EVOLVE_HEARTBEAT_MS", "1.5"),
        ("EVOLVE_HEARTBEAT_MS", "null"),
        ("EVOLVE_HOOK_TIMEOUT", "abc"),
        ("EVOLVE_HOOK_TIMEOUT", "0"),
        ("EVOLVE_HOOK_TIMEOUT", "-100"),
        ("EVOLVE_HEARTBEAT_CLEANUP_COUNT", "seven"),
        ("EVOLVE_HEARTBEAT_CLEANUP_COUNT", "0"),
        ("EVOLVE_HEARTBEAT_CLEANUP_TOKENS", "1e5"),
        ("EVOLVE_HOOK_OUTPUT_LIMIT", "-1"),
        ("EVOLVE_JOURNAL_MAX_RUNS", "lots"),
        ("EVOLVE_MODEL", "no-slash"),
        ("EVOLVE_MODEL", "/model"),
        ("EVOLVE_MODEL", "provider/"),
        ("EVOLVE_MODEL", ""),
        ("EVOLVE_HEARTBEAT_CLEANUP", "delete"),
        ("EVOLVE_HEARTBEAT_CLEANUP", "NEW"),
        ("EVOLVE_HEARTBEAT_CLEANUP", ""),
    ],
)
def test_env_invalid_values_are_errors(var: str, text: str) -> None:
    loaded = load_config(Path("/nonexistent"), {var: text}, BASE)
    issue = only_error(loaded)
    name = var.removeprefix("EVOLVE_").lower()
    assert issue.source == "environment"
    assert issue.field == name
    assert var in issue.message
    # The override is not applied; with no file, every field has its default.
    assert loaded.config == Config()


def test_env_wins_over_file(tmp_path: Path) -> None:
    text = '{"hook_timeout": 5000, "heartbeat_agent": "file", "model": "a/b", "heartbeat_skip_active": true}'
    env = {
        "EVOLVE_HOOK_TIMEOUT": "7000",
        "EVOLVE_MODEL": "c/d/e",
        "EVOLVE_HEARTBEAT_SKIP_ACTIVE": "no",
        "UNRELATED": "x",
    }
    loaded = load(write(tmp_path, text), env=env)
    assert loaded.errors == [] and loaded.warnings == []
    assert loaded.config == replace(
        Config(),
        hook_timeout=7000,
        heartbeat_agent="file",
        model=Model("c", "d/e"),
        heartbeat_skip_active=False,
    )


def test_env_null_overrides_file_value(tmp_path: Path) -> None:
    loaded = load(
        write(tmp_path, '{"heartbeat_cleanup_count": 5, "model": "a/b"}'),
        env={"EVOLVE_HEARTBEAT_CLEANUP_COUNT": "null", "EVOLVE_MODEL": "null"},
    )
    assert loaded.errors == []
    assert loaded.config.heartbeat_cleanup_count is None
    assert loaded.config.model is None


def test_bad_env_keeps_the_file_value(tmp_path: Path) -> None:
    """An env value that does not convert is reported and does not win: the file value stays."""
    loaded = load(write(tmp_path, '{"hook_timeout": 5000}'), env={"EVOLVE_HOOK_TIMEOUT": "x"}, base=BASE)
    assert len(loaded.errors) == 1
    assert loaded.config.hook_timeout == 5000


def test_env_defaults_to_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVE_HEARTBEAT_TITLE", "from os.environ")
    loaded = load_config(tmp_path / "missing.jsonc")
    assert loaded.config.heartbeat_title == "from os.environ"


def test_empty_env_mapping_ignores_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOLVE_HEARTBEAT_TITLE", "from os.environ")
    loaded = load_config(tmp_path / "missing.jsonc", {})
    assert loaded.config == Config()


def test_lowercase_env_names_are_ignored() -> None:
    loaded = load_config(Path("/nonexistent"), {"evolve_hook_timeout": "5", "EVOLVE_UNKNOWN": "x"})
    assert loaded.errors == []
    assert loaded.config == Config()


# --- reloads -------------------------------------------------------------------------------------


def test_reload_with_field_removed_goes_back_to_default(tmp_path: Path) -> None:
    path = write(tmp_path, '{"hook_timeout": 5000, "heartbeat_agent": "per"}')
    first = load(path)
    assert first.config.hook_timeout == 5000
    path.write_text('{"heartbeat_agent": "per"}')  # "delete a line to get the default"
    second = load(path, base=first.config)
    assert second.errors == []
    assert second.config.hook_timeout == Config().hook_timeout


def test_reload_after_a_broken_edit_keeps_the_last_good_config(tmp_path: Path) -> None:
    path = write(tmp_path, '{"hook_timeout": 5000}')
    good = load(path)
    path.write_text('{"hook_timeout": 6000,,}')
    broken = load(path, base=good.config)
    assert len(broken.errors) == 1
    assert broken.config == good.config
    path.write_text('{"hook_timeout": 6000}')
    fixed = load(path, base=broken.config)
    assert fixed.errors == []
    assert fixed.config.hook_timeout == 6000


def test_issue_str_format() -> None:
    assert str(ConfigIssue("/w/config/evolve.jsonc", "bad", field="hook_timeout", line=3)) == (
        "/w/config/evolve.jsonc:3: field 'hook_timeout': bad"
    )
    assert (
        str(ConfigIssue("environment", "EVOLVE_X: bad", field="x")) == "environment: field 'x': EVOLVE_X: bad"
    )
    assert str(ConfigIssue("/f", "broken")) == "/f: broken"
