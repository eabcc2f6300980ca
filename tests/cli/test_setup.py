"""The project's own set-up files agree with each other."""

import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip vendors the same parser
    from pip._vendor import tomli as tomllib

import yaml

from tests.conftest import ROOT


def pins_from_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    return {re.split("==", d)[0].lower(): d.split("==")[1] for d in deps}


def test_every_dependency_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for dep in project["dependencies"] + project["optional-dependencies"]["dev"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", dep), dep


def test_environment_yml_lists_the_same_pins_as_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = {p.split("==")[0].lower(): p.split("==")[1] for p in pip}
    assert conda_pins == pins_from_pyproject()


def test_ci_runs_the_readme_test_command_and_nothing_else():
    lines = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    assert lines[-1] == "make test"
    assert all(ln.startswith(("set ", "cd ")) for ln in lines[:-1])
    assert "make test" in (ROOT / "README.md").read_text()
