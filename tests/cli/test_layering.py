"""The layering rules of DESIGN.md, read from the source with ``ast`` (nothing is imported).

Every ``import`` of a simdist module counts, at module level or inside a function: a cycle
through function-level imports still ties the modules together. The only cycle allowed is
the TF-shaped one inside ``simdist/graph/`` (ops, graph and session refer to each other as
TensorFlow's do). No concept imports the command layer, and mpi4py is imported by the
transports module only.
"""

import ast
import functools
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "simdist"
TRANSPORTS = "simdist.sim.transports"
#: the command layer: every main(argv); nothing below it imports it
FACE = ("simdist.commands.cli", "simdist.commands", "simdist.commands.bench", "simdist.__main__")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files(*folders: str) -> dict[str, Path]:
    """Module name -> file, for every .py file under the given top-level folders."""
    return {module_name(p): p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))}


@functools.lru_cache(maxsize=None)
def syntax_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def imported_modules(name: str, path: Path, known) -> set[str]:
    """The modules of ``known`` that the file imports (absolute or relative, any depth)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # "from .x import y": y is a submodule of x when x/y.py exists, else a name in x
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


@functools.lru_cache(maxsize=None)
def import_graph() -> dict[str, set[str]]:
    files = source_files("simdist")
    return {name: imported_modules(name, path, files) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
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


def test_no_import_cycle_outside_graph():
    outside = [c for c in cycles(import_graph())
               if not all(m.startswith("simdist.graph.") or m == "simdist.graph" for m in c)]
    assert outside == [], f"import cycles: {outside}"


def test_no_concept_imports_the_command_layer():
    def in_face(name):
        return any(name == f or name.startswith(f + ".") for f in FACE)

    upward = {name: sorted(t for t in targets if in_face(t))
              for name, targets in import_graph().items() if not in_face(name)}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def test_function_level_and_package_relative_imports_count(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("import os\n\ndef f():\n    from .b import g\n    from . import c\n"
                    "    from ..x import y\n")
    known = {"pkg.sub.a", "pkg.sub.b", "pkg.sub.c", "pkg.x"}
    assert imported_modules("pkg.sub.a", path, known) == {"pkg.sub.b", "pkg.sub.c", "pkg.x"}


def test_cycles_are_the_components_of_more_than_one_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_only_the_transports_import_mpi4py():
    importers = []
    for name, path in source_files("simdist", "realdist", "lessons").items():
        for node in ast.walk(syntax_tree(path)):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m == "mpi4py" or m.startswith("mpi4py.") for m in modules):
                importers.append(name)
    assert sorted(set(importers)) == [TRANSPORTS]
