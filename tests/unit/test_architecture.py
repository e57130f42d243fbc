"""The house's rules that import-linter does not state: no import cycle among agentwatch's modules,
every setting declared once, and rooms and functions of a size a person can read."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentwatch import config
from tests.conftest import ROOT

SRC = ROOT / "src" / "agentwatch"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# A function may be longer when a comment on its `def` line, or the line above, says why:
# `# long: <reason>`.
LONG_OK = re.compile(r"#\s*long:\s*\S")


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """agentwatch modules `name` imports anywhere in its file (lazy imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, package)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            module = target
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != name:
                found.add(module)
    return found


def imported_from(node: ast.ImportFrom, package: str) -> str:
    """The absolute name of the module a `from ... import` in `package` imports from."""
    base = node.module or ""
    if node.level:
        parent = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parent, base]).strip(".")
    return base


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def import_graph() -> dict[str, set[str]]:
    found = dict(modules())
    known = set(found)
    graph = {name: imported(name, path, known) for name, path in found.items()}
    # A package's __init__ is imported with any of its modules: that edge is Python's, not a choice.
    return {name: {t for t in deps if not name.startswith(t + ".")} for name, deps in graph.items()}


def test_no_import_cycle_among_agentwatch_modules() -> None:
    graph = import_graph()
    assert len(graph) > 30, "the walk found the project's modules"
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_nothing_below_the_commands_imports_them() -> None:
    graph = import_graph()
    users = sorted(n for n, deps in graph.items() if any(d.startswith("agentwatch.cli") for d in deps))
    outside = [n for n in users if not n.startswith("agentwatch.cli")]
    assert outside == ["agentwatch.__main__"], "only the entry point imports cli/"


def test_no_module_over_600_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for _, p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_over_80_lines_unless_a_comment_says_why() -> None:
    long: dict[str, int] = {}
    for _, path in modules():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = node.end_lineno - first + 1
                said = lines[node.lineno - 1] + lines[first - 2] if first >= 2 else lines[node.lineno - 1]
                if size > MAX_FUNCTION_LINES and not LONG_OK.search(said):
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = size
    assert long == {}


@pytest.mark.parametrize("pattern", [r"\b(?:AGENTWATCH|GENIE)_[A-Z0-9_]+\b"])
def test_every_variable_the_code_reads_is_declared_once_in_config(pattern: str) -> None:
    used: set[str] = set()
    for _, path in modules():
        used |= set(re.findall(pattern, path.read_text()))
    declared = [s.name for s in config.SETTINGS]
    assert len(declared) == len(set(declared)), "each setting is declared once"
    assert used - set(declared) == set(), "declare these in config.SETTINGS"
    assert set(declared) - used == set(), "these settings are declared but never read"


def test_every_setting_is_documented() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    missing = [s.name for s in config.SETTINGS if f"`{s.name}`" not in page]
    assert missing == []


def test_no_module_imports_another_modules_private_name() -> None:
    """A name with a leading underscore is its module's own: another module that needs it asks
    for it to be made public (named for what it is), so a change inside a module stays there."""
    found = []
    for name, path in modules():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = imported_from(node, package)
            if base.split(".")[0] != "agentwatch" or base == name:
                continue
            found += [
                f"{name}:{node.lineno} imports {base}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    assert not found, "\n".join(found)
