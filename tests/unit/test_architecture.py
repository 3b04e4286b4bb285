"""Imports follow the architecture: each package imports only the layers below it, and no
package or module imports itself back through others (no cycles).

    core < timing < activities < workflows < jobs < worker < schedules < devstack

`core` (errors, metric names, the SQL loader) and `timing` (when a job fires) are leaves;
the engine (`activities`, `workflows`) never imports the jobs, the process or the CLI; the
jobs never import the process or the CLI. Imports under `if TYPE_CHECKING:` count too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["core", "timing", "activities", "workflows", "jobs", "worker", "schedules", "devstack"]
RANK = {name: rank for rank, name in enumerate(LAYERS)}


def modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = modules()


def imports_of(name: str, path: Path) -> set[str]:
    """The project modules `name` imports, resolved to the longest known module name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets.add(base)
            targets |= {f"{base}.{alias.name}" for alias in node.names}
    resolved = set()
    for target in targets:
        parts = target.split(".")
        while parts and ".".join(parts) not in MODULES:
            parts.pop()
        if parts and ".".join(parts) != name:
            resolved.add(".".join(parts))
    return resolved


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}


def test_the_layers_cover_every_package():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages == set(LAYERS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_a_module_imports_only_lower_layers(module):
    layer = module.split(".")[0]
    wrong = sorted(target for target in GRAPH[module] if RANK[target.split(".")[0]] > RANK[layer])
    assert not wrong, f"{module} ({layer}) imports {wrong}, above it in {LAYERS}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in `graph`, if it has any (iterative depth-first search)."""
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the path, 2 done
    for start in sorted(graph):
        if state[start]:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            node = next(stack[-1], None)
            if node is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[node] == 1:
                return [*path[path.index(node) :], node]
            elif state[node] == 0:
                state[node] = 1
                path.append(node)
                stack.append(iter(sorted(graph.get(node, ()))))
    return None


def test_no_module_imports_itself_back():
    cycle = _cycle(GRAPH)
    assert cycle is None, " -> ".join(cycle or [])


def test_no_package_imports_itself_back():
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        # A job family, the CLI's modules ... each sub-package is a node of its own.
        source = ".".join(module.split(".")[:2]) if module.count(".") else module
        for target in targets:
            node = ".".join(target.split(".")[:2]) if target.count(".") else target
            if node != source:
                packages[source].add(node)
    cycle = _cycle(packages)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_checker_sees_a_violation():
    """The rules are not vacuous: an engine module importing the CLI is caught."""
    graph = {"activities.x": {"schedules.sync.plan"}, "schedules.sync.plan": {"activities.x"}}
    assert _cycle(graph) == ["activities.x", "schedules.sync.plan", "activities.x"]
    assert RANK["schedules"] > RANK["activities"]


def conftest_imports(source: str) -> list[str]:
    """The imports in `source` that reach a conftest module (absolute or relative)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[-1] == "conftest"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [f"{module}.{a.name}".lstrip(".") for a in node.names]
            found += [n for n in [module, *names] if n.split(".")[-1] == "conftest"]
    return found


def test_no_test_module_imports_conftest():
    """Helpers live in tests/helpers/; conftest.py holds fixtures and hooks only."""
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path.name != "conftest.py" and (found := conftest_imports(path.read_text()))
    }
    assert not offenders, offenders


def test_the_conftest_check_sees_an_import():
    assert conftest_imports("from tests.conftest import ROOT") == ["tests.conftest"]
    assert conftest_imports("from tests import conftest") == ["tests.conftest"]
    assert conftest_imports("from .. import conftest") == ["conftest"]
    assert conftest_imports("import tests.conftest") == ["tests.conftest"]
    assert conftest_imports("from tests.helpers import ROOT") == []
