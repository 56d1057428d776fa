"""The workspace's behaviour checks: `evals/*.jsonc`, one scenario a file (docs/evals.md).

A scenario is one or more user messages sent to the agent in a new session, and expectations about
what the agent does: the tools it calls and does not call (with matchers for their arguments), what
its answer to the last message contains or matches, at most how many steps it takes. A file that is
wrong gets errors with its file, line and column, as the config does; the other files still count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engine.evals.locate import Path as JsonPath
from engine.evals.locate import position, positions
from engine.protocol.records import ScenarioInfo
from engine.tools.schema import json_type
from engine.workspace.config import ConfigIssue, parse_json5

EVALS_DIR: Final = "evals"
SUFFIXES: Final = (".jsonc", ".json")
MAX_MESSAGES: Final = 20
MAX_FILE_BYTES: Final = 256 * 1024

# opencode's tools that reach outside the copy of the workspace: evals never give them to the agent.
OUTSIDE_TOOLS: Final = frozenset({"bash", "webfetch", "websearch", "codesearch"})

SCENARIO_KEYS: Final = ("name", "description", "agent", "messages", "expect", "timeout_ms")
CHECK_KINDS: Final = (
    "called",
    "not_called",
    "answer_contains",
    "answer_not_contains",
    "answer_matches",
    "answer_not_matches",
    "max_steps",
)
MATCHERS: Final = ("$contains", "$matches", "$absent", "$any")


class ScenarioError(ValueError):
    """A scenario file that is wrong: `issues` say where and why."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        super().__init__("; ".join(str(i) for i in issues))
        self.issues = issues


@dataclass(frozen=True)
class Expectation:
    """One thing a scenario expects. `kind` is one of CHECK_KINDS; `tool` and `args` for the tool
    checks (`args`: argument name -> a JSON value or a matcher object), `text` for the answer checks,
    `count` for `max_steps` and for `called` with `times`."""

    kind: str
    tool: str | None = None
    args: dict[str, Any] | None = None
    text: str | None = None
    count: int | None = None

    def words(self) -> str:
        """The expectation as a person says it."""
        if self.kind in ("called", "not_called"):
            verb = "calls" if self.kind == "called" else "does not call"
            out = f"{verb} {self.tool}"
            if self.args:
                out += " with " + ", ".join(_matcher_words(k, v) for k, v in self.args.items())
            if self.count is not None:
                out += f" exactly {self.count} time{'s' if self.count != 1 else ''}"
            return out
        if self.kind == "max_steps":
            return f"at most {self.count} step{'s' if self.count != 1 else ''}"
        what = {
            "answer_contains": "contains",
            "answer_not_contains": "does not contain",
            "answer_matches": "matches",
            "answer_not_matches": "does not match",
        }[self.kind]
        shown = (
            f"/{self.text}/" if self.kind.endswith("matches") else json.dumps(self.text, ensure_ascii=False)
        )
        return f"the answer {what} {shown}"


def _matcher_words(name: str, matcher: Any) -> str:
    if isinstance(matcher, dict) and len(matcher) == 1 and next(iter(matcher)) in MATCHERS:
        op, value = next(iter(matcher.items()))
        if op == "$contains":
            return f"{name} containing {json.dumps(value, ensure_ascii=False)}"
        if op == "$matches":
            return f"{name} matching /{value}/"
        if op == "$absent":
            return f"no {name}" if value else f"some {name}"
        return f"some {name}"
    return f"{name} = {json.dumps(matcher, ensure_ascii=False)}"


@dataclass(frozen=True)
class Scenario:
    name: str
    file: str  # workspace-relative
    messages: tuple[str, ...]
    expectations: tuple[Expectation, ...] = ()
    agent: str | None = None
    description: str | None = None
    timeout_ms: int | None = None  # None: the config's evals_timeout_ms

    def info(self) -> ScenarioInfo:
        return ScenarioInfo(
            name=self.name,
            file=self.file,
            messages=list(self.messages),
            expectations=[e.words() for e in self.expectations],
            agent=self.agent,
            description=self.description,
        )

    def outside_tools(self) -> list[str]:
        """The tools outside the copy that this scenario needs (expects to be called)."""
        return sorted({e.tool for e in self.expectations if e.kind == "called" and e.tool in OUTSIDE_TOOLS})


@dataclass
class Loaded:
    scenarios: list[Scenario] = field(default_factory=list)
    errors: list[ConfigIssue] = field(default_factory=list)

    def named(self, names: Iterable[str]) -> list[Scenario]:
        """These scenarios, in the order asked; KeyError names the first unknown one."""
        by_name = {s.name: s for s in self.scenarios}
        out = []
        for name in names:
            if name not in by_name:
                known = ", ".join(sorted(by_name)) or "none"
                raise KeyError(f"no scenario {name!r} (the workspace has: {known})")
            out.append(by_name[name])
        return out


class _Issues:
    """The errors of one file, each placed at the value it is about."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.found = positions(text)
        self.list: list[ConfigIssue] = []

    def add(self, path: JsonPath, message: str) -> None:
        where = position(self.found, path)
        field_name = _path_text(path) or None
        self.list.append(
            ConfigIssue(
                self.source,
                message,
                field=field_name,
                line=where[0] if where else None,
                column=where[1] if where else None,
            )
        )


def _path_text(path: JsonPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def parse_scenario(text: str, file: str) -> Scenario:
    """The scenario a file holds; ScenarioError with every problem found, each at its line and column."""
    data, syntax = parse_json5(text, file)
    if syntax is not None:
        raise ScenarioError([syntax])
    issues = _Issues(file, text)
    if not isinstance(data, dict):
        issues.add((), f"expected an object at the top, got {json_type(data)}")
        raise ScenarioError(issues.list)
    for key in data:
        if key not in SCENARIO_KEYS and not str(key).startswith("$"):
            issues.add((key,), f"unknown field (a scenario has {', '.join(SCENARIO_KEYS)})")
    name = data.get("name", Path(file).stem)
    if not isinstance(name, str) or not name.strip():
        issues.add(("name",), f"expected a non-empty string, got {json_type(name)} {name!r}")
        name = Path(file).stem
    messages = _messages(data.get("messages"), issues)
    expectations = _expectations(data.get("expect", []), issues)
    agent = _optional_str(data, "agent", issues)
    description = _optional_str(data, "description", issues)
    timeout = data.get("timeout_ms")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0):
        issues.add(("timeout_ms",), f"expected a positive integer (milliseconds), got {timeout!r}")
        timeout = None
    if issues.list:
        raise ScenarioError(issues.list)
    return Scenario(
        name=name.strip(),
        file=file,
        messages=tuple(messages),
        expectations=tuple(expectations),
        agent=agent,
        description=description,
        timeout_ms=timeout,
    )


def _optional_str(data: dict[str, Any], key: str, issues: _Issues) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        issues.add((key,), f"expected a non-empty string, got {json_type(value)} {value!r}")
        return None
    return value


def _messages(value: Any, issues: _Issues) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        issues.add(("messages",), "expected the user messages: a non-empty string or list of strings")
        return []
    if len(value) > MAX_MESSAGES:
        issues.add(("messages",), f"at most {MAX_MESSAGES} messages (got {len(value)})")
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, str) or not message.strip():
            issues.add(("messages", i), f"expected a non-empty string, got {json_type(message)} {message!r}")
        else:
            out.append(message)
    return out


def _expectations(value: Any, issues: _Issues) -> list[Expectation]:
    if not isinstance(value, list):
        issues.add(("expect",), f"expected a list of expectations, got {json_type(value)}")
        return []
    out = []
    for i, item in enumerate(value):
        found = _expectation(item, ("expect", i), issues)
        if found is not None:
            out.append(found)
    return out


def _expectation(item: Any, path: JsonPath, issues: _Issues) -> Expectation | None:
    if not isinstance(item, dict):
        issues.add(path, f'expected an object such as {{"called": "notes_add"}}, got {json_type(item)}')
        return None
    kinds = [k for k in item if k in CHECK_KINDS]
    extra = [k for k in item if k not in CHECK_KINDS and k not in ("with", "times")]
    for key in extra:
        issues.add((*path, key), f"unknown field (an expectation is one of {', '.join(CHECK_KINDS)})")
    if len(kinds) != 1:
        issues.add(
            path,
            f"an expectation is exactly one of {', '.join(CHECK_KINDS)} (got {', '.join(kinds) or 'none'})",
        )
        return None
    kind = kinds[0]
    value = item[kind]
    at = (*path, kind)
    if kind in ("called", "not_called"):
        return _tool_check(kind, value, item, path, issues)
    for key in ("with", "times"):
        if key in item:
            issues.add((*path, key), f"'{key}' goes with called or not_called, not {kind}")
    if kind == "max_steps":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            issues.add(at, f"expected a whole number of steps, at least 1, got {value!r}")
            return None
        return Expectation(kind, count=value)
    if not isinstance(value, str) or not value:
        issues.add(at, f"expected a non-empty string, got {json_type(value)} {value!r}")
        return None
    if kind.endswith("matches"):
        try:
            re.compile(value)
        except re.error as exc:
            issues.add(at, f"not a regular expression: {exc}")
            return None
    return Expectation(kind, text=value)


def _tool_check(
    kind: str, value: Any, item: dict[str, Any], path: JsonPath, issues: _Issues
) -> Expectation | None:
    if not isinstance(value, str) or not value.strip():
        issues.add((*path, kind), f"expected a tool name, got {json_type(value)} {value!r}")
        return None
    args = item.get("with")
    if args is not None:
        if not isinstance(args, dict):
            issues.add(
                (*path, "with"),
                f"expected an object: argument name -> value or matcher, got {json_type(args)}",
            )
            return None
        for name, matcher in args.items():
            problem = _matcher_problem(matcher)
            if problem:
                issues.add((*path, "with", name), problem)
    times = item.get("times")
    if times is not None:
        if kind != "called":
            issues.add((*path, "times"), "'times' goes with called (not_called means none)")
        elif isinstance(times, bool) or not isinstance(times, int) or times < 1:
            issues.add((*path, "times"), f"expected a whole number, at least 1, got {times!r}")
            times = None
    return Expectation(kind, tool=value.strip(), args=args or None, count=times if kind == "called" else None)


def _matcher_problem(matcher: Any) -> str | None:
    """What is wrong with an argument matcher, or None."""
    if not isinstance(matcher, dict):
        return None  # a JSON value: the argument must equal it
    ops = [k for k in matcher if str(k).startswith("$")]
    if not ops:
        return None  # an object value
    if len(matcher) != 1 or ops[0] not in MATCHERS:
        return f"a matcher is one of {', '.join(MATCHERS)}, alone (got {', '.join(map(str, matcher))})"
    op, value = ops[0], matcher[ops[0]]
    if op == "$matches":
        if not isinstance(value, str):
            return f"$matches takes a regular expression, got {json_type(value)}"
        try:
            re.compile(value)
        except re.error as exc:
            return f"$matches: not a regular expression: {exc}"
    if op in ("$absent", "$any") and value is not True:
        return f"{op} takes true"
    return None


def scenario_files(root: Path) -> list[Path]:
    """The scenario files of a workspace, by name."""
    folder = root / EVALS_DIR
    if not folder.is_dir():
        return []
    return sorted(
        p for p in folder.iterdir() if p.suffix in SUFFIXES and p.is_file() and not p.name.startswith(".")
    )


def load_scenarios(root: Path) -> Loaded:
    """Every scenario of the workspace at `root`; a wrong file is an error, and the others count."""
    loaded = Loaded()
    names: dict[str, str] = {}
    for path in scenario_files(root):
        rel = f"{EVALS_DIR}/{path.name}"
        try:
            data = path.read_bytes()
        except OSError as exc:
            loaded.errors.append(ConfigIssue(rel, f"cannot read the file: {exc}"))
            continue
        if len(data) > MAX_FILE_BYTES:
            loaded.errors.append(ConfigIssue(rel, f"larger than {MAX_FILE_BYTES // 1024} KiB"))
            continue
        try:
            scenario = parse_scenario(data.decode("utf-8"), rel)
        except UnicodeDecodeError:
            loaded.errors.append(ConfigIssue(rel, "not UTF-8 text"))
            continue
        except ScenarioError as exc:
            loaded.errors.extend(exc.issues)
            continue
        if scenario.name in names:
            loaded.errors.append(
                ConfigIssue(
                    rel,
                    f"the scenario name {scenario.name!r} is taken by {names[scenario.name]}",
                    field="name",
                )
            )
            continue
        names[scenario.name] = rel
        loaded.scenarios.append(scenario)
    return loaded


def check_text(text: str, file: str) -> str | None:
    """What is wrong with a scenario file's proposed content (a tool's validation), or None."""
    try:
        parse_scenario(text, file)
    except ScenarioError as exc:
        return "\n".join(str(i) for i in exc.issues)
    return None
