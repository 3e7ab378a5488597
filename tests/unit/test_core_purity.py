"""The layer rules, and what the pure modules may not call.

Which package may import which is import-linter's contract in ``pyproject.toml`` (the layers
of ``hooks/``, the core and the schedulers' pure modules free of I/O imports, paramiko only in
``hooks.ssh``, flask only in ``hooks.app``); the first test runs it. What an import rule cannot
see is checked here on the source: a pure module must not read a clock or the environment, or
call a builtin that does I/O. And the core's decisions read top to bottom: no continuation
lambda, no function of more than six parameters.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import grimp
import pytest

HOOKS = Path(__file__).resolve().parents[2] / "hooks"
CORE = sorted((HOOKS / "core").rglob("*.py"))
"""Every module of the core, at any depth of its packages."""
PURE = [
    *CORE,
    *sorted(path for path in (HOOKS / "schedulers").glob("*/*.py")
            if path.stem in ("rules", "commands", "parse", "states", "description",
                             "accounting", "reasons", "waiting")),
]
CLOCK_READS = frozenset(
    {
        "now", "utcnow", "today", "time", "time_ns", "monotonic", "monotonic_ns",
        "perf_counter", "perf_counter_ns", "process_time", "localtime", "gmtime",
    }
)
IO_BUILTINS = frozenset({"open", "print", "input", "exec", "eval", "compile", "__import__"})


def test_the_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], capture_output=True, text=True, cwd=HOOKS.parent,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def import_cycles(imports: Mapping[str, set[str]]) -> list[list[str]]:
    """The cycles of a module graph (its strongly connected components of more than one
    module), where importing a module also runs its packages' ``__init__``."""
    edges = {module: {ancestor for name in names for ancestor in _with_packages(name)
                      if ancestor in imports and ancestor != module}
             for module, names in imports.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(edges[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def _with_packages(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:end]) for end in range(1, len(parts) + 1)]


def test_no_import_cycle_anywhere_in_hooks() -> None:
    graph = grimp.build_graph("hooks")
    imports = {module: set(graph.find_modules_directly_imported_by(module))
               for module in graph.modules}
    assert import_cycles(imports) == []


def test_the_cycle_finder_sees_a_cycle_through_a_package() -> None:
    imports = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": set(), "q": {"p.b"}}
    assert import_cycles(imports) == [["p", "p.a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def violations(source: str) -> Iterator[str]:
    """The calls and reads in ``source`` that make a module impure, one line per finding."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            called = (
                func.attr if isinstance(func, ast.Attribute)
                else func.id if isinstance(func, ast.Name) else ""
            )
            if called in CLOCK_READS:
                yield f"line {node.lineno}: reads a clock ({called}())"
            if isinstance(func, ast.Name) and called in IO_BUILTINS:
                yield f"line {node.lineno}: calls {called}()"
        elif isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            yield f"line {node.lineno}: reads the environment ({node.attr})"


def test_the_pure_modules_of_the_design_are_all_checked() -> None:
    names = {f"{path.parent.name}/{path.stem}" for path in PURE}
    assert names >= {
        "values/job", "values/phases", "values/units", "spec/batchjob", "sites/secret",
        "wire/request", "decide/sync", "decide/finalize", "status/aggregate", "status/record",
        "status/lifecycle", "wire/log_pod", "wire/response", "decide/answer", "slurm/states",
        "slurm/parse", "htcondor/states", "htcondor/parse", "htcondor/description",
    }


@pytest.mark.parametrize(
    "path", [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in PURE]
)
def test_pure_module_reads_no_clock_and_does_no_io(path: Path) -> None:
    assert list(violations(path.read_text())) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("import datetime\ndatetime.datetime.now()", "reads a clock (now())",
                     id="datetime-now"),
        pytest.param("from datetime import datetime\ndatetime.utcnow()",
                     "reads a clock (utcnow())", id="utcnow"),
        pytest.param("import datetime\ndatetime.date.today()", "reads a clock (today())",
                     id="date-today"),
        pytest.param("x.time()", "reads a clock (time())", id="time-time"),
        pytest.param("x.monotonic()", "reads a clock (monotonic())", id="monotonic"),
        pytest.param("open('f')", "calls open()", id="open"),
        pytest.param("print('x')", "calls print()", id="print"),
        pytest.param("x = environ['HOME']\ny = o.environ", "reads the environment (environ)",
                     id="environ"),
    ],
)
def test_checker_catches(source: str, expected: str) -> None:
    assert any(expected in found for found in violations(source)), list(violations(source))


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import datetime\ndatetime.datetime.fromtimestamp(0, tz=datetime.UTC)",
                     id="epoch-conversion"),
        pytest.param("import datetime\ndatetime.datetime.strptime(t, '%Y')", id="strptime"),
    ],
)
def test_checker_accepts(source: str) -> None:
    assert list(violations(source)) == []


MAX_PARAMETERS = 6


def shape_findings(source: str) -> Iterator[str]:
    """What keeps a core decision from reading top to bottom: a lambda other than a sort key
    (a continuation), and a function of more than ``MAX_PARAMETERS`` parameters."""
    tree = ast.parse(source)
    sort_keys = {id(keyword.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                 for keyword in node.keywords if keyword.arg == "key"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and id(node) not in sort_keys:
            yield f"line {node.lineno}: a lambda"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            count = len([arg for arg in named if arg.arg not in ("self", "cls")])
            count += (args.vararg is not None) + (args.kwarg is not None)
            if count > MAX_PARAMETERS:
                yield f"line {node.lineno}: {node.name}() takes {count} parameters"


@pytest.mark.parametrize(
    "path", [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in CORE]
)
def test_the_core_has_no_continuation_and_no_long_parameter_list(path: Path) -> None:
    assert list(shape_findings(path.read_text())) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("Step(a, lambda result: go(result))", "line 1: a lambda",
                     id="continuation"),
        pytest.param("def f(a, b, c, d, *, e, f, g): pass", "line 1: f() takes 7 parameters",
                     id="seven-parameters"),
        pytest.param("def f(a, b, c, d, e, f, *g): pass", "line 1: f() takes 7 parameters",
                     id="varargs-count"),
    ],
)
def test_shape_checker_catches(source: str, expected: str) -> None:
    assert list(shape_findings(source)) == [expected]


def test_shape_checker_accepts_a_sort_key_and_six_parameters() -> None:
    source = ("def f(self, a, b, c, d, e, f):\n"
              "    return sorted(a, key=lambda x: x.name)\n")
    assert list(shape_findings(source)) == []
