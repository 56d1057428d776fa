"""The boundaries of the code base, checked on its import graph (every import, also those inside
functions and under TYPE_CHECKING) and on the shim's copy of the wire contract; what a program really
loads is checked in tests/project/test_architecture.py. docs/architecture.md explains each rule."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.protocol.api import API_VERSION, SHIM_ROUTES
from tests.support.environment import REPO

STDLIB = sys.stdlib_module_names


def modules(package: str) -> dict[str, Path]:
    """Module name -> file, for every module of a package of this repository."""
    root = REPO / package
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path) -> Iterator[str]:
    """Every module `name` imports, wherever the import statement is, relative ones resolved."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            for alias in node.names:  # `from . import x` may import the submodule x
                yield f"{target}.{alias.name}"


def graph(*packages: str) -> dict[str, set[str]]:
    """Module -> the modules of these packages (or outside them) it imports."""
    known: dict[str, Path] = {}
    for package in packages:
        known.update(modules(package))
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = set()
        for target in imports_of(name, path):
            if target in known or target.split(".")[0] not in packages:
                targets.add(target)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def shim_source() -> str:
    return (REPO / "shim" / "evolve.js").read_text(encoding="utf-8")


TIERS = ("unit", "engine", "console", "project", "e2e")


def test_the_graph_sees_function_level_and_type_checking_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n"
        "def f():\n    from ..b import y\n    import textual.app\n",
        encoding="utf-8",
    )
    assert set(imports_of("pkg.sub.m", source)) >= {"pkg.sub.a", "pkg.b", "textual.app", "typing"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_in_the_engine() -> None:
    assert cycles(graph("engine")) == []


def test_no_import_cycle_in_the_console() -> None:
    assert cycles(graph("evolve_console")) == []


def test_no_import_cycle_in_the_demo() -> None:
    assert cycles(graph("evolve_demo")) == []


def test_neither_the_engine_nor_the_console_imports_the_demo() -> None:
    crossing = {
        (module, target)
        for module, targets in graph("engine", "evolve_console", "evolve_demo").items()
        if top(module) in ("engine", "evolve_console")
        for target in targets
        if top(target) == "evolve_demo"
    }
    assert crossing == set()


def test_the_engine_never_imports_the_console_or_textual() -> None:
    crossing = {
        (module, target)
        for module, targets in graph("engine").items()
        for target in targets
        if top(target) in ("evolve_console", "textual", "rich")
    }
    assert crossing == set()


def test_the_console_imports_only_the_wire_contract_from_the_engine() -> None:
    crossing = {
        (module, target)
        for module, targets in graph("evolve_console", "engine").items()
        if top(module) == "evolve_console"
        for target in targets
        if top(target) == "engine" and not (target == "engine" or target.startswith("engine.protocol"))
    }
    assert crossing == set()


MODULE_LINES = 500
CLASS_METHODS = 30


def module_docstring(tree: ast.Module) -> str:
    """The module's docstring, or its first string at the top level (engine/warm/zygote.py keeps one
    line before it on purpose)."""
    for node in tree.body[:2]:
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return ""


@pytest.mark.parametrize("package", ["engine", "evolve_console", "evolve_demo"])
def test_modules_and_classes_stay_small_or_say_why(package: str) -> None:
    """A module over 500 lines, or a class over 30 methods, says why in its docstring ("Over 500
    lines: ...", "Over 30 methods: ..."): a job grown into it goes into a module of its own."""
    unexplained = []
    for name, path in modules(package).items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, str(path))
        if len(text.splitlines()) > MODULE_LINES and "Over 500 lines" not in module_docstring(tree):
            unexplained.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [f for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > CLASS_METHODS and "Over 30 methods" not in (ast.get_docstring(node) or ""):
                    unexplained.append(f"{name}.{node.name}: {len(methods)} methods")
    assert unexplained == []


def test_the_wire_contract_imports_only_the_standard_library() -> None:
    outside = {
        (module, target)
        for module, targets in graph("engine").items()
        if module.startswith("engine.protocol")
        for target in targets
        if not target.startswith("engine.protocol") and top(target) not in STDLIB and target != "engine"
    }
    assert outside == set()
    # engine/__init__.py runs first on `import engine.protocol`: it must stay import-free too.
    assert {t for t in graph("engine")["engine"] if top(t) not in STDLIB} == set()


def test_the_shim_speaks_the_engines_api_version() -> None:
    match = re.search(r'const API_VERSION = "(\d+)";', shim_source())
    assert match is not None
    assert int(match.group(1)) == API_VERSION


def test_the_shim_calls_exactly_the_routes_of_the_contract() -> None:
    called = {
        re.sub(r"\$\{[^}]*\}", "{name}", path)
        for path in re.findall(r"""["`](/v1/[^"`?]*)["`]""", shim_source())
    }
    assert called == set(SHIM_ROUTES)


def test_the_engine_serves_every_route_of_the_contract(tmp_path: Path) -> None:
    from starlette.routing import Route

    from engine.api import build_app
    from engine.runtime import Engine

    app = build_app(Engine(tmp_path, journal=False), "t")
    served = {r.path for r in app.app.routes if isinstance(r, Route)}  # type: ignore[attr-defined]
    assert set(SHIM_ROUTES) <= served


def test_every_test_module_lives_in_a_tier() -> None:
    """scripts/test.sh --fast runs tests/unit; a test module outside the tiers would run in no tier's
    name (tests/README.md)."""
    stray = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        if path.relative_to(REPO / "tests").parts[0] not in TIERS
    ]
    assert not stray, f"test modules outside tests/{{{','.join(TIERS)}}}: {stray}"


def test_the_api_never_sees_the_engine() -> None:
    """Each route module (engine/api/) gets the few services it needs, never the Engine."""
    crossing = {
        (module, target)
        for module, targets in graph("engine").items()
        if module == "engine.api" or module.startswith("engine.api.")
        for target in targets
        if target == "engine.runtime" or target.startswith("engine.runtime.")
    }
    assert crossing == set()


def test_the_engine_is_assembled_in_order() -> None:
    """In Engine.__init__, what a service is given (a lambda, a bound method of the engine) reaches
    only services already built, and nothing is set on a service after it is built: the dependencies
    between services form no hidden cycle (one that needs the bus is broken there)."""
    tree = ast.parse((REPO / "engine" / "runtime.py").read_text(encoding="utf-8"))
    engine = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    methods = {n.name: n for n in engine.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def own(node: ast.AST) -> list[str]:
        """The attributes of the engine a piece of code names (`self.x`)."""
        return [
            n.attr
            for n in ast.walk(node)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        ]

    def reach(name: str, seen: set[str]) -> set[str]:
        """The attributes a name leads to: itself, or for a method everything its body reaches."""
        if name not in methods:
            return {name}
        if name in seen:
            return set()
        seen.add(name)
        return set().union(*(reach(a, seen) for a in own(methods[name])))

    built: set[str] = set()
    problems = []
    for statement in methods["__init__"].body:
        targets = statement.targets if isinstance(statement, ast.Assign) else []
        if isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        assigned = {t.attr for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)}
        if any(isinstance(t, ast.Attribute) and not isinstance(t.value, ast.Name) for t in targets):
            problems.append(f"line {statement.lineno}: sets an attribute of a service after building it")
        used = own(statement.value) if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)) else []
        for name in used:
            early = reach(name, set()) - built - assigned
            if early and not (name in assigned and name not in methods):
                problems.append(f"line {statement.lineno}: self.{name} reaches {sorted(early)}, built later")
        built |= assigned
    assert problems == []


def test_the_wheel_lists_every_package_of_the_code() -> None:
    """pyproject.toml names its packages one by one (the shim is a directory installed under another
    name): a package missing there is missing from an installed evolve."""
    import tomllib

    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for top in ("engine", "evolve_console", "evolve_demo")
        for init in (REPO / top).rglob("__init__.py")
        if "example" not in init.parts
    }
    assert found - listed == set(), (
        f"add these to [tool.setuptools] packages in pyproject.toml: {sorted(found - listed)}"
    )
    assert listed - found - {"evolve_shim"} == set()
