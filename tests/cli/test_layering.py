"""The layering rules of docs/architecture.md, read from the source with ``ast`` (nothing is
imported), over simdist/, realdist/ and course/.

Every ``import`` of a module of ours counts, at module level or inside a function: a cycle
through function-level imports still ties the modules together. The rules:

- no import cycle, but for the TF-shaped one inside ``simdist.graph`` (ops, graph and session
  refer to each other as TensorFlow's do);
- the packages are ranked (``LAYERS``, low to high, one record per package as in
  docs/architecture.md's table): a package imports only the lower ones its record names, so
  simdist never imports realdist or the course, realdist never simdist's command layer;
- simdist never imports TensorFlow, and mpi4py is imported by the transports module only;
- the roots of simdist/ and realdist/ hold their entry points only;
- every package's ``__init__`` docstring says what it holds and what it may import;
- a source file over ``LONG`` lines says why in a ``# long file:`` comment at its top.
"""

import ast
import functools
import re
from pathlib import Path
from typing import NamedTuple

from tests.conftest import ROOT

#: the folders of our Python packages, and the other folders of source that the file rules see
PACKAGES = ("simdist", "realdist", "course")
SOURCES = PACKAGES + ("benchmarks",)
TRANSPORTS = "simdist.sim.transports"
#: the modules allowed at the root of simdist/ and realdist/
ENTRY_POINTS = ("__init__", "__main__", "cli")
#: the TF API package, whose modules may import each other in a cycle
TF_API = "simdist.graph"
LONG = 450


class Layer(NamedTuple):
    """A package (or an entry-point module) and the lower packages it may import."""

    package: str
    may_import: tuple[str, ...] = ()


_ENGINE = ("simdist.base", "simdist.hardware", "simdist.trace", "simdist.sim")
_CONCEPTS = _ENGINE + ("simdist.models", "simdist.collectives", "simdist.graph",
                       "simdist.distribute")
_SIMDIST = _CONCEPTS + ("simdist.training", "simdist.calibration")
#: what realdist may use of simdist: the errors, units, trace schema, registry, exercise spec,
#: models and data, and the measuring protocol
_FOR_REALDIST = ("simdist.base", "simdist.hardware", "simdist.trace", "simdist.distribute",
                 "simdist.training", "simdist.calibration")
_REALDIST = ("realdist.runtime", "realdist.graph", "realdist.training", "realdist.distribute",
             "realdist", "realdist.calibration")

#: low to high; a record names only packages above it in this list
LAYERS = (
    Layer("simdist.base"),
    Layer("simdist.hardware", ("simdist.base",)),
    Layer("simdist.models", ("simdist.base", "simdist.hardware")),
    Layer("simdist.trace", ("simdist.base", "simdist.hardware")),
    Layer("simdist.sim", ("simdist.base", "simdist.hardware", "simdist.trace")),
    Layer("simdist", _ENGINE),
    Layer("simdist.collectives", _ENGINE),
    Layer("simdist.graph", _ENGINE),
    Layer("simdist.distribute", _ENGINE + ("simdist.collectives",)),
    Layer("simdist.training", _CONCEPTS),
    Layer("simdist.calibration", _CONCEPTS + ("simdist.training",)),
    Layer("realdist.runtime", ("simdist.base", "simdist.hardware", "simdist.trace")),
    # realdist.graph runs each TF1 snippet on real TF beside the same snippet in simdist.graph
    Layer("realdist.graph", ("realdist.runtime", "simdist.graph") + _FOR_REALDIST),
    Layer("realdist.training", ("realdist.runtime", "realdist.graph") + _FOR_REALDIST),
    Layer("realdist.distribute", ("realdist.runtime", "realdist.training") + _FOR_REALDIST),
    Layer("realdist", _REALDIST[:4] + _FOR_REALDIST),
    Layer("realdist.calibration", ("realdist.runtime", "realdist.distribute", "realdist")
          + _FOR_REALDIST),
    Layer("realdist.commands", _REALDIST + _FOR_REALDIST),
    Layer("realdist.cli", _REALDIST + ("realdist.commands",) + _FOR_REALDIST),
    Layer("realdist.__main__", ("realdist.cli",)),
    Layer("course", _SIMDIST + _REALDIST),
    Layer("simdist.commands", _SIMDIST + ("course",)),
    Layer("simdist.__main__", ("simdist.commands",)),
)
RANK = {layer.package: i for i, layer in enumerate(LAYERS)}


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
    files = source_files(*PACKAGES)
    return {name: imported_modules(name, path, files) for name, path in files.items()}


def package_of(module: str) -> str:
    """The package a module belongs to: ``simdist.sim`` for ``simdist.sim.core``, the module
    itself for an entry point at the root (``simdist``, ``realdist.cli``), ``course``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("simdist", "realdist") else parts[0]


def external_imports(path: Path) -> set[str]:
    """The top-level names of the absolute imports of a file (``tensorflow``, ``mpi4py``)."""
    found = set()
    for node in ast.walk(syntax_tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add((node.module or "").split(".")[0])
    return found


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


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """'importer -> imported' for every import of a package that the importer's record does
    not name (its own package aside)."""
    allowed = {layer.package: set(layer.may_import) | {layer.package} for layer in LAYERS}
    return [f"{name} -> {target}" for name, targets in sorted(graph.items())
            for target in sorted(targets) if package_of(target) not in allowed[package_of(name)]]


def test_no_import_cycle_outside_the_tf_api_package():
    def in_tf_api(module):
        return module == TF_API or module.startswith(TF_API + ".")

    outside = [c for c in cycles(import_graph()) if not all(in_tf_api(m) for m in c)]
    assert outside == [], f"import cycles: {outside}"


def test_the_layers_are_ranked_and_name_every_package():
    for layer in LAYERS:
        above = [p for p in layer.may_import if RANK.get(p, len(LAYERS)) >= RANK[layer.package]]
        assert not above, f"{layer.package} may import only packages below it, not {above}"
    packages = {package_of(name) for name in import_graph()}
    assert sorted(packages ^ set(RANK)) == [], "every package has one record in LAYERS"


def test_no_package_imports_one_its_layer_does_not_name():
    violations = layer_violations(import_graph())
    assert not violations, "imports that LAYERS does not allow:\n" + "\n".join(violations)


def test_simdist_never_imports_tensorflow():
    importers = sorted(name for name, path in source_files("simdist").items()
                       if external_imports(path) & {"tensorflow", "tf_keras", "keras"})
    assert importers == []


def test_function_level_and_package_relative_imports_count(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("import os\n\ndef f():\n    from .b import g\n    from . import c\n"
                    "    from ..x import y\n")
    known = {"pkg.sub.a", "pkg.sub.b", "pkg.sub.c", "pkg.x"}
    assert imported_modules("pkg.sub.a", path, known) == {"pkg.sub.b", "pkg.sub.c", "pkg.x"}


def test_cycles_are_the_components_of_more_than_one_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_an_upward_import_is_a_violation_and_a_downward_one_is_not():
    graph = {"simdist.sim.core": {"simdist.base.errors", "simdist.training.exercises"},
             "realdist.graph.tf1": {"simdist.commands.ps", "realdist.runtime.tfenv"},
             "simdist.commands.cli": {"course.lessons"}}
    assert layer_violations(graph) == ["realdist.graph.tf1 -> simdist.commands.ps",
                                       "simdist.sim.core -> simdist.training.exercises"]


def test_only_the_transports_import_mpi4py():
    importers = sorted(name for name, path in source_files(*SOURCES, "lessons").items()
                       if "mpi4py" in external_imports(path))
    assert importers == [TRANSPORTS]


def test_the_roots_of_simdist_and_realdist_hold_only_entry_points():
    extra = sorted(str(path.relative_to(ROOT)) for folder in ("simdist", "realdist")
                   for path in (ROOT / folder).glob("*.py") if path.stem not in ENTRY_POINTS)
    assert extra == [], "a module belongs in the package of its layer"


def test_every_package_says_what_it_holds_and_what_it_may_import():
    unsaid = []
    for folder in PACKAGES:
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            doc = ast.get_docstring(syntax_tree(init)) or ""
            if not doc.strip() or not re.search(r"\b(may import|imports nothing)\b", doc, re.I):
                unsaid.append(str(init.relative_to(ROOT)))
    assert not unsaid, ("a package's docstring says what it holds and what it may import "
                        "('May import ...'):\n" + "\n".join(unsaid))


def test_a_long_source_file_says_why_at_its_top():
    unexplained = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            reason = [line for line in lines[:5] if re.match(r"# long file: \S", line)]
            if len(lines) > LONG and not reason:
                unexplained.append(f"{path.relative_to(ROOT)} ({len(lines)} lines)")
    assert not unexplained, (f"over {LONG} lines without a '# long file: REASON' comment in "
                             "the first 5 lines:\n" + "\n".join(unexplained))
