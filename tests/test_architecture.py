"""Structure rules for builder/: no import cycles, no import from a lower rung of the
ladder to a higher one (lazy and type-only imports included in both), no import of the
test support under tests/, and no module over 400 lines unless it says why it holds
together. The ladder is written once, as the layers contract in `.importlinter`, which CI
also checks with import-linter's `lint-imports`; this test reads the same contract so the
plain test run checks it too, and also that every top-level module stands on a rung
(import-linter leaves a module it is not told about unconstrained)."""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "builder"
CONTRACT = PACKAGE.parent / ".importlinter"
LADDER_SECTION = "importlinter:contract:ladder"
MAX_LINES = 400
ROOT = "__init__"  # the rung name of builder/__init__.py itself: below every rung


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every builder module this one imports, wherever the import statement stands."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif base in known:
                    out.add(base)
    out.discard(name)
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _ladder() -> list[list[str]]:
    """The rungs, top first, from the layers contract: one rung a line, the modules of a
    rung (which may import each other) separated by `:`; builder/__init__ below them all."""
    config = configparser.ConfigParser()
    config.read(CONTRACT, encoding="utf-8")
    lines = config[LADDER_SECTION]["layers"].strip().splitlines()
    return [[name.strip() for name in line.split(":")] for line in lines] + [[ROOT]]


def _top(module: str) -> str:
    """`builder.run.runner` -> `run`; `builder` -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _upward(graph: dict[str, set[str]], ladder: list[list[str]]) -> list[str]:
    """Every import of a module on a higher rung (nearer the top) than the importer's."""
    rung = {name: i for i, names in enumerate(ladder) for name in names}
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if rung[_top(b)] < rung[_top(a)])


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_ladder_finder_sees_an_upward_import():
    graph = {
        "builder.run.runner": {"builder.publish.card"},
        "builder.publish.card": {"builder.run.outdir"},
        "builder.run.outdir": set(),
    }
    assert _upward(graph, [["run"], ["publish"]]) == ["builder.publish.card -> builder.run.outdir"]


def test_every_top_level_module_stands_on_one_rung():
    names = [n for rung in _ladder() for n in rung]
    assert sorted(names) == sorted({_top(m) for m in _modules()})


def test_no_import_runs_up_the_ladder():
    assert _upward(_graph(), _ladder()) == []


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_among_builder_modules():
    assert _cycles(_graph()) == []


def test_no_module_over_400_lines_without_a_reason():
    # Size is judged by cohesion: a module may run longer when it says, in a
    # "# cohesive: ..." line, why splitting it would scatter one concept.
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len((text := p.read_text(encoding="utf-8")).splitlines())) > MAX_LINES
        and not re.search(r"^# cohesive: \S", text, re.MULTILINE)
    }
    assert long == {}


def test_the_package_never_imports_test_support():
    # tests/ (the local OpenAI-compatible server, llama-server helpers) is not installed with
    # builder, so an import of it would work in a checkout and fail everywhere else.
    def imports_tests(path: Path) -> bool:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == "tests" or n.startswith("tests.") for n in names):
                return True
        return False

    assert sorted(name for name, path in _modules().items() if imports_tests(path)) == []
