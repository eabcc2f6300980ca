"""The fuzz suite, second part: generated options and inputs for the programs a learner runs
most: ``simdist ps``, the queue programs' Python API (``loader_trainer``, ``ensemble``),
``simdist calibrate --from-csv`` and the lesson checker (``simdist check --file``).

Every outcome is a finish or a clear refusal: exit 0, 1 (a failed run or check, reported),
2 (a bad value: last line ``simdist ...: error: ...``) or 3 (a deadlock, reported), never a
traceback, a hang or an unbounded message; the API raises a ``SimdistError`` or returns.
Seeded (``derandomize``); the runs are kept small by the limits every example gets, so the
file takes about a minute on one core.
"""

from __future__ import annotations

import ast
import re
from datetime import timedelta

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the fuzz suite needs the dev extra: "
                                                      "pip install -e '.[dev]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from simdist.base.errors import SimdistError  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.sim.test_fuzz import TEXT, cli  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def fuzz(examples: int):
    return settings(derandomize=True, max_examples=examples, deadline=timedelta(seconds=60),
                    database=None, suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.function_scoped_fixture])


#: the limits every generated run gets: nothing may take long
LIMITS = ["--timeout", "20", "--max-events", "100000"]
#: numbers of every kind a user could type, as text
NUMBER = st.one_of(st.integers(-3, 12).map(str), st.sampled_from(
    ["0", "-1", "1e9", "nan", "inf", "-inf", "0.5", "1e-30", "abc", "", "2,", "10**9",
     "99999999999999999999"]))


def assert_reported(code, err, allowed=(0, 1, 2, 3)):
    """A finish or a clear report: no traceback, a bounded last line naming simdist."""
    assert code in allowed, (code, err)
    assert "Traceback" not in err, err
    if code == 2:
        last = err.strip().splitlines()[-1]
        assert last.startswith("simdist") and "error" in last, err
    for line in err.splitlines():
        assert len(line) < 2000, "an error message must cut long values short"


# -- simdist ps --------------------------------------------------------------------------------

PS_OPTIONS = st.fixed_dictionaries({}, optional={
    "--mode": st.sampled_from(["sync", "async", "both", ""]),
    "--workers": NUMBER, "--ps": NUMBER, "--steps": NUMBER,
    "--step-us": st.one_of(NUMBER, st.lists(NUMBER, max_size=4).map(",".join)),
    "--replicas-to-aggregate": NUMBER, "--stall-us": NUMBER, "--stall-probability": NUMBER,
    "--max-staleness": NUMBER, "--warmup-steps": NUMBER, "--learning-rate": NUMBER,
    "--features": NUMBER, "--examples": NUMBER, "--seed": NUMBER,
    "--model": st.sampled_from(["dense", "sparse"]),
    "--gradient-dtype": st.sampled_from(["float32", "float16", "int8"]),
    "--fail": st.one_of(TEXT, st.tuples(st.sampled_from(["ps:0", "worker:1", "chief:0",
                                                         "ps:9", "worker"]),
                                        st.sampled_from(["@1ms", "@0", "@1e30", "@-1ms",
                                                         "@2ms+1ms", "@x", ""])).map("".join)),
})


@fuzz(40)
@given(PS_OPTIONS)
def test_simdist_ps_options(options):
    argv = ["ps"]
    for name, value in options.items():
        argv.append(f"{name}={value}")  # "=" keeps a value such as "-1" a value
    code, _, err = cli([*argv, *LIMITS])
    assert_reported(code, err)


# -- the queue programs' Python API --------------------------------------------------------------

VALUES = st.one_of(st.integers(-2, 40), st.floats(allow_nan=True, allow_infinity=True),
                   st.booleans(), st.none(), st.text(max_size=4))


@fuzz(40)
@given(st.fixed_dictionaries({}, optional={
    "capacity": VALUES, "loader_threads": VALUES, "steps": VALUES, "batch": VALUES,
    "element_size": VALUES, "read_us": VALUES, "stall_us": VALUES,
    "stall_probability": VALUES, "seed": VALUES}))
def test_loader_trainer_arguments(kwargs):
    from simdist.sim.limits import RunLimits
    from simdist.training.input_pipeline import loader_trainer

    try:
        run = loader_trainer(**kwargs, limits=RunLimits(max_events=100_000, timeout_s=20))
    except SimdistError as error:
        assert len(str(error)) < 2000
        return
    assert run is not None and run.end_time >= 0


@fuzz(30)
@given(st.fixed_dictionaries({}, optional={
    "predictors": VALUES, "inputs": VALUES, "slow": VALUES, "slowdown": VALUES,
    "timeout_ms": VALUES}))
def test_ensemble_arguments(kwargs):
    from simdist.training.ensemble import ensemble

    kwargs = {k: (min(v, 8) if isinstance(v, int) and not isinstance(v, bool) else v)
              for k, v in kwargs.items()}  # small clusters: the fuzz is about the values
    try:
        run = ensemble(**kwargs)
    except SimdistError as error:
        assert len(str(error)) < 2000
        return
    assert run is not None


# -- calibrate --from-csv ------------------------------------------------------------------------

COLUMNS = ["strategy", "workers", "replicas", "devices", "model", "dataset", "hidden",
           "global_batch", "examples", "split", "step_ms", "step_s", "epoch_s", "speed", ""]
CELLS = st.one_of(NUMBER, st.sampled_from(["mirrored", "multi_worker_mirrored", "mlp",
                                           "linear", "resnet50", "fit", "check", "digits",
                                           '"a,b"', "\x00", "µ"]))


@fuzz(30)
@given(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=6),
       st.lists(st.lists(CELLS, min_size=0, max_size=7), max_size=5))
def test_calibration_tables(tmp_path, header, rows):
    table = tmp_path / "table.csv"
    table.write_text("\n".join(",".join(line) for line in [header, *rows]) + "\n")
    code, _, err = cli(["calibrate", "--from-csv", str(table), "-o",
                        str(tmp_path / "profile.json")])
    assert_reported(code, err)


# -- the lesson checker --------------------------------------------------------------------------

ANSWERS = st.one_of(
    st.integers(-5, 2000).map(repr), st.floats(allow_nan=True).map(repr),
    st.sampled_from(["None", "True", "'abc'", "[]", "()", "{}", "(1, 2)", "[1, 2, 3]",
                     "{'a': 1}", "float('nan')", "lambda *a: 0", "object()",
                     "tuple(range(10**6))", "'ckpt-0'", "('inline', 2, 3)"]))
BODIES = st.one_of(ANSWERS.map(lambda a: f"    return {a}"), st.sampled_from([
    "    raise ValueError('mine')", "    raise SystemExit(0)", "    import os; os._exit(3)",
    "    return args[0] if args else None", "    1 / 0"]))
LESSONS = sorted(p.name for p in (ROOT / "lessons").iterdir() if p.is_dir()
                 and (p / "exercises.py").is_file())


def exercise_names(lesson: str) -> list[str]:
    tree = ast.parse((ROOT / "lessons" / lesson / "exercises.py").read_text())
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]


@fuzz(12)
@given(st.sampled_from(LESSONS), st.data())
def test_the_checker_reports_any_answer(tmp_path, lesson, data):
    names = exercise_names(lesson)
    source = "".join(f"def {name}(*args, **kwargs):\n{data.draw(BODIES)}\n\n\n"
                     for name in names)
    mine = tmp_path / "mine.py"
    mine.write_text(source)
    code, out, err = cli(["check", lesson[:2], "--file", str(mine), "--timeout", "60"])
    assert_reported(code, err, allowed=(0, 1))
    assert "Traceback" not in out
    assert re.search(r"^\d+ of \d+ checks pass$", out, re.M), out  # the summary line

