"""CONTRIBUTING.md's "Adding ..." sections: each lists as many files as it says ("Three
files:"), every file exists, and each holds what the section says it holds."""

import ast
import inspect
import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import ROOT
from tests.docs.test_links import TEMPLATE, code_paths

COUNTS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5, "Six": 6}


class Section(NamedTuple):
    """An "Adding ..." section: the count it announces, the repository paths of each item of
    its numbered list, and every repository path it writes."""

    count: int
    items: list
    paths: list


def sections(text: str) -> dict[str, Section]:
    found = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        if not title.startswith("Adding "):
            continue
        count = re.search(r"\b(" + "|".join(COUNTS) + r") files\b", body)
        items = re.findall(r"^\d+\. (.*?)(?=^\d+\. |^$)", body, flags=re.M | re.S)
        found[title] = Section(COUNTS[count.group(1)] if count else 0,
                               [code_paths(item) for item in items], code_paths(body))
    return found


SECTIONS = sections((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))


def tree(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def defined(path: str, kind=(ast.FunctionDef, ast.ClassDef)) -> set[str]:
    """The names of the functions and classes (``kind``) a file defines, at any depth."""
    return {n.name for n in ast.walk(tree(path)) if isinstance(n, kind)}


def assigned(path: str) -> set[str]:
    """The names a file assigns, at any depth (module constants, class attributes)."""
    return {t.id for n in ast.walk(tree(path)) if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)}


def calls(path: str, name: str) -> int:
    """How many calls of ``name(...)`` or ``x.name(...)`` a file makes."""
    return sum(isinstance(n, ast.Call) and name in (getattr(n.func, "id", None),
                                                   getattr(n.func, "attr", None))
               for n in ast.walk(tree(path)))


def test_every_kind_of_addition_has_its_section():
    assert sorted(SECTIONS) == sorted([
        "Adding an all-reduce algorithm", "Adding a strategy", "Adding a TF1 op",
        "Adding a blocking op (a queue, an accumulator, a token queue)", "Adding a host cost",
        "Adding a lesson"])


@pytest.mark.parametrize("title", sorted(SECTIONS))
def test_a_section_lists_as_many_files_as_it_says_and_they_exist(title):
    section = SECTIONS[title]
    assert section.count > 0, f"{title}: no 'N files:' line"
    assert len(section.items) == section.count
    assert all(section.items), f"{title}: an item names no file"
    for path in section.paths:
        assert TEMPLATE.search(path) or (ROOT / path).exists(), path


def test_sections_are_parsed_as_written():
    text = ("## Adding a thing\n\nTwo files:\n\n1. **`simdist/a.py`**: one\n   `tests/b.py`\n"
            "2. **`docs/c.md`**\n\nThen `lessons/d/`.\n\n## Tests\n\n1. **`simdist/x.py`**\n")
    assert sections(text) == {"Adding a thing": Section(
        2, [["simdist/a.py", "tests/b.py"], ["docs/c.md"]],
        ["simdist/a.py", "tests/b.py", "docs/c.md", "lessons/d/"])}


def test_every_all_reduce_algorithm_has_the_files_the_section_names():
    from simdist.collectives.registry import ALGORITHMS

    module, formulas, registry = (item[0] for item in SECTIONS[
        "Adding an all-reduce algorithm"].items)
    assert module == "simdist/collectives/NAME.py"
    assert "ALGORITHMS" in assigned(registry)
    folder = ROOT / Path(module).parent
    for name, record in ALGORITHMS.items():
        source = Path(inspect.getsourcefile(record.function))
        assert source.parent == folder and source.name not in (Path(registry).name,
                                                               Path(formulas).name), name
        closed_form = record.formula or record.layout_formula
        if record.formula:
            assert record.formula.__name__ in defined(formulas), name
        assert closed_form is not None, f"{name} has no closed form"


def test_every_strategy_has_the_files_the_section_names():
    from simdist.distribute.registry import STRATEGIES

    section = SECTIONS["Adding a strategy"]
    classes, registry, exercises, runners = section.items
    assert "STRATEGIES" in assigned(registry[0])
    for name, record in STRATEGIES.items():
        tf_class = record.tf_class.rsplit(".", 1)[1]
        assert any(tf_class in defined(path, ast.ClassDef) for path in classes), name
        module, function = record.realdist.split(":")
        runner = module.replace(".", "/") + ".py"
        assert runner in runners and function in defined(runner) | assigned(runner), name
        assert record.training_loop.replace(".", "/") + ".py" in section.paths, name
    assert {"Exercise", "add_arguments", "from_args", "validate"} <= defined(exercises[0])
    assert {"step_costs", "mirrored_runtime"} <= assigned(classes[0])
    assert calls("simdist/training/sync_loop.py", "host_step")


def test_every_file_that_registers_an_op_is_a_family_the_section_names():
    from simdist.graph.registry import OP_DEFS

    families, init, test = SECTIONS["Adding a TF1 op"].items
    registering = {str(p.relative_to(ROOT)) for p in sorted((ROOT / "simdist/graph").rglob("*.py"))
                   if p.name != "registry.py" and calls(str(p.relative_to(ROOT)), "register")}
    assert set(families) == registering
    exported = {n.module for n in ast.walk(tree(init[0])) if isinstance(n, ast.ImportFrom)}
    assert {p[:-3].replace("/", ".") for p in families} <= exported
    assert "_build_every_op" in defined(test[0]) and "OP_DEFS" in (ROOT / test[0]).read_text()
    assert len(OP_DEFS) >= sum(calls(p, "register") for p in families)


def test_a_blocking_op_waits_on_a_store_of_the_resources_file():
    resources, family = SECTIONS[
        "Adding a blocking op (a queue, an accumulator, a token queue)"].items
    assert {"Store", "_take"} <= defined(resources[0])
    kernels = [f for f in ast.walk(tree(family[0])) if isinstance(f, ast.FunctionDef)
               and any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(f))]
    assert kernels, f"{family[0]} has no kernel that waits (a generator)"


def test_every_host_cost_is_one_field_that_the_calibration_fits_and_strategies_name():
    import simdist.distribute
    from simdist.calibration.fit import NAMES, catalog_for
    from simdist.distribute.registry import STRATEGIES
    from simdist.hardware.host_costs import HOST_COST_NAMES, HostCosts

    record, strategies = SECTIONS["Adding a host cost"].items
    assert {"HostCosts", "step_ns", "ops_ns", "collective_launch_ns"} <= defined(record[0])
    assert set(HOST_COST_NAMES) <= set(NAMES)  # fitted under the record's own names
    fitted = catalog_for({name: 1000.0 + i for i, name in enumerate(NAMES)})
    costs = fitted.devices[fitted.systems["calibrated"].device].host_costs
    assert isinstance(costs, HostCosts) and [n for n in HOST_COST_NAMES if not getattr(
        costs, n)] == []  # each set from its parameter
    assert "step_costs" in assigned(strategies[0])
    for name, strategy in STRATEGIES.items():
        cls = getattr(simdist.distribute, strategy.tf_class.rsplit(".", 1)[1])
        assert set(getattr(cls, "step_costs", ())) <= set(HOST_COST_NAMES), name


def test_every_lesson_has_the_files_the_section_names():
    section = SECTIONS["Adding a lesson"]
    lessons = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]_*") if p.is_dir())
    assert lessons, "no lessons"
    for lesson in lessons:
        for item in section.items:
            path = item[0].replace("NN_slug", lesson)
            assert (ROOT / path).is_file(), path
        for notebook in (f"notebooks/{lesson}.ipynb", f"notebooks/zh/{lesson}.ipynb"):
            assert (ROOT / notebook).is_file(), notebook
