"""Imports follow the architecture: each package imports only the layers below it, and no
package or module imports itself back through others (no cycles).

    core < timing < activities < workflows < jobs < worker < schedules < api < devstack

`core` (errors, metric names, the SQL loader) and `timing` (when a job fires) are leaves;
the engine (`activities`, `workflows`) never imports the jobs, the process or the CLI; the
jobs never import the process or the CLI. Imports under `if TYPE_CHECKING:` count too.
"""

from __future__ import annotations

import argparse
import ast
import inspect
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = [
    "core",
    "timing",
    "activities",
    "workflows",
    "jobs",
    "worker",
    "schedules",
    "api",
    "devstack",
]
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


def test_no_bench_imports_a_test_module():
    """The benches share the tests' helpers (`tests/helpers/`, the helper modules beside the
    integration tests), never a module of tests (`test_*.py`), whose import collects its
    fixtures and runs its module-level code (issue 43, item 7)."""
    offenders = {}
    for path in sorted((ROOT / "bench").rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found = [
            n for n in names if n.startswith("tests.") and n.split(".")[-1].startswith("test_")
        ]
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert not offenders, offenders


def test_the_conftest_check_sees_an_import():
    assert conftest_imports("from tests.conftest import ROOT") == ["tests.conftest"]
    assert conftest_imports("from tests import conftest") == ["tests.conftest"]
    assert conftest_imports("from .. import conftest") == ["conftest"]
    assert conftest_imports("import tests.conftest") == ["tests.conftest"]
    assert conftest_imports("from tests.helpers import ROOT") == []


# --- the library and its CLI (issue 19) ----------------------------------------------------

CLI = "schedules.cli"
ENTRY_POINT = "schedules.__main__"  # `python -m schedules`: three lines calling the CLI
MAX_LINES = 400


def _in_cli(module: str) -> bool:
    return module == CLI or module.startswith(CLI + ".")


def test_nothing_outside_the_cli_imports_it():
    """`schedules.cli` sits on top: the library under it never reaches up into it (tests and
    benchmarks may drive it)."""
    offenders = {
        module: sorted(t for t in targets if _in_cli(t))
        for module, targets in GRAPH.items()
        if not _in_cli(module) and module != ENTRY_POINT and any(_in_cli(t) for t in targets)
    }
    assert not offenders, offenders


def context_parameters(source: str) -> list[str]:
    """The functions in `source` that take the CLI's context: a parameter named `ctx` or
    annotated with `Context` (bare, dotted or as a string)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is None:
                continue
            annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if arg.arg == "ctx" or "Context" in annotation.replace("'", "").split(" | "):
                found.append(f"{getattr(node, 'name', 'lambda')}({arg.arg})")
            elif annotation.endswith((".Context", ".Context'", '.Context"')):
                found.append(f"{getattr(node, 'name', 'lambda')}({arg.arg})")
    return found


def test_no_function_outside_the_cli_takes_its_context():
    """Library functions take a Temporal `Client` or a connection string, so they can be
    called from Python without building the CLI."""
    offenders = {
        module: found
        for module, path in MODULES.items()
        if not _in_cli(module) and (found := context_parameters(path.read_text()))
    }
    assert not offenders, offenders


def test_the_context_check_sees_a_parameter():
    assert context_parameters("async def f(ctx, job): ...") == ["f(ctx)"]
    assert context_parameters("def f(c: Context): ...") == ["f(c)"]
    assert context_parameters("def f(c: 'Context | None' = None): ...") == ["f(c)"]
    assert context_parameters("def f(c: cli.Context): ...") == ["f(c)"]
    assert context_parameters("def f(client: Client, retry: Retry): ...") == []


def test_every_command_is_registered_in_the_one_tuple():
    """`python -m schedules`'s commands are exactly `COMMANDS`, each a module of
    `schedules.cli` with its own `configure` and `run`; every such module is in it."""
    from schedules.cli.main import COMMANDS, build_parser

    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(subparsers.choices) == [module.NAME for module in COMMANDS]
    for module in COMMANDS:
        assert module.__name__.startswith(CLI + "."), module
        assert callable(module.configure) and inspect.iscoroutinefunction(module.run), module
        handler = subparsers.choices[module.NAME].get_default("handler")
        assert handler is module.run, module.NAME
    commands = {
        name
        for name, path in MODULES.items()
        if _in_cli(name)
        and {"configure", "run"}
        <= {
            node.name
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    }
    assert commands == {module.__name__ for module in COMMANDS}


def test_no_command_registers_itself_another_way():
    """One registry: no side-effect imports appending to a list, no `add_*_command`."""
    for name, path in MODULES.items():
        if not name.startswith("schedules"):
            continue
        text = path.read_text()
        assert "_EXTRA_COMMANDS" not in text, name
        tree = ast.parse(text)
        defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert not [d for d in defs if d.startswith("add_") and d.endswith("_command")], name


def test_the_entry_point_only_calls_the_cli():
    source = MODULES[ENTRY_POINT].read_text()
    code = [line for line in source.splitlines() if line.strip() and not line.startswith('"""')]
    assert len(code) <= 6, code
    assert "add_parser" not in source


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith(("schedules", "api"))))
def test_no_schedules_or_api_module_is_over_400_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, f"{module}: {lines} lines (at most {MAX_LINES})"


def test_the_public_api_is_named_and_resolves():
    import schedules

    assert schedules.__all__, "schedules/__init__.py names its public API"
    missing = [name for name in schedules.__all__ if not hasattr(schedules, name)]
    assert not missing, missing
    assert not [name for name in schedules.__all__ if name.startswith("_")]


def test_no_public_name_hides_a_module():
    """`schedules.sync` must stay the package (`mock.patch("schedules.sync.apply.x")`,
    `import schedules.sync.apply`): no exported name is a submodule's name."""
    import schedules

    submodules = {name.split(".")[1] for name in MODULES if name.startswith("schedules.")}
    assert not submodules & set(schedules.__all__)


def test_the_scheduled_job_workflow_run_reads_at_once():
    """`ScheduledJobWorkflow.run` is a few named steps, under 40 lines (issue 19)."""
    from workflows.job_run import JobRunWorkflow

    lines = inspect.getsource(JobRunWorkflow.run).splitlines()
    assert len(lines) < 40, f"JobRunWorkflow.run: {len(lines)} lines"


# --- the engine's parts (issue 43, item 7) -------------------------------------------------

ENGINE_PARTS = [
    "common",
    "outbox",
    "claim",
    "chunks",
    "steps",
    "catchup",
    "runtime",
    "dependencies",
    "run",
]


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "activities" and len(parts) > 1 else None


def test_every_engine_module_is_in_a_part():
    """`activities/` holds sub-packages only, one per part of the engine, each listed."""
    loose = sorted(m for m in MODULES if m.count(".") == 1 and m.startswith("activities."))
    assert all(_part(m) in ENGINE_PARTS for m in loose), loose
    flat = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "activities").glob("*.py")
        if p.name != "__init__.py"
    )
    assert not flat, f"{flat}: put each in one of {ENGINE_PARTS}"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _part(m)))
def test_an_engine_part_imports_only_parts_before_it(module):
    rank = {part: i for i, part in enumerate(ENGINE_PARTS)}
    own = rank[_part(module)]
    wrong = sorted(t for t in GRAPH[module] if _part(t) and rank[_part(t)] > own)
    assert not wrong, f"{module} imports {wrong}, after it in {ENGINE_PARTS}"
