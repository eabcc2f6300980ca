"""Files a user hands in (traces, run results) are checked as they are read, and the files a
run will write are checked before it starts: one line naming the file and what is wrong."""

import json

import pytest

from simdist.commands.cli import main as simdist_main
from simdist.commands.compare import main as compare_main
from simdist.training import simulate_exercise
from simdist.base.errors import InvalidArgumentError
from simdist.training.exercises import Exercise, RunResult
from simdist.trace.schema import Trace

from tests.conftest import literal

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(a trace file, a run result file) of one small run."""
    folder = tmp_path_factory.mktemp("saved")
    run = simulate_exercise(Exercise(strategy="mirrored", steps=2))
    return run.trace.save(folder / "trace.json"), run.save(folder / "result.json")


def edited(path, tmp_path, change):
    data = json.loads(path.read_text())
    change(data)
    out = tmp_path / path.name
    out.write_text(json.dumps(data))
    return out


def first(kind):
    def pick(data):
        return next(e for e in data["traceEvents"] if e.get("ph") == kind)
    return pick


TRACE_EDITS = [
    (lambda d: first("X")(d).update(dur=-5), "event 36: 'dur' is -5: a duration must be >= 0"),
    (lambda d: first("X")(d).update(ts="soon"), "'ts' is 'soon': expected a number of "
                                               "microseconds"),
    (lambda d: first("X")(d).update(ts=1e300), "'ts' is 1e+300: expected a number"),
    (lambda d: first("X")(d).pop("name"), "(ph 'X') has no 'name'"),
    (lambda d: first("X")(d).update(pid=[1]), "'pid' is [1]: expected an int or a string"),
    (lambda d: first("X")(d).update(args=[]), "'args' is []: expected an object"),
    (lambda d: first("X")(d).update(ph="Q"), "phase 'ph' 'Q': expected one of"),
    (lambda d: d["traceEvents"].append(7), "is 7: expected an object"),
    (lambda d: first("M")(d)["args"].update(name=None), "process_name needs a string "
                                                        "args.name, got None"),
    (lambda d: d["otherData"].update(schema_version="one"), "schema_version 'one': expected "
                                                            "an int >= 1"),
    (lambda d: d["otherData"].update(schema_version=99), "has trace schema version 99"),
    (lambda d: d.update(otherData=[]), "'otherData' is []: expected an object"),
    (lambda d: d.pop("traceEvents"), "has no 'traceEvents' list"),
]


@pytest.mark.parametrize("change, expected", TRACE_EDITS)
def test_a_hand_edited_trace_is_one_clear_line(saved, tmp_path, capsys, change, expected):
    path = edited(saved[0], tmp_path, change)
    assert simdist_main(["summary", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"trace file '{path}'" in err and expected in err and err.count("\n") == 1, err


RESULT_EDITS = [
    (lambda d: d.update(schema=2), "run result schema 2: expected 1"),
    (lambda d: d.pop("weights"), "has no 'weights'"),
    (lambda d: d.update(losses="low"), "'losses' is 'low': expected a JSON list"),
    (lambda d: d.update(losses=[1, "x"]), "losses [1, 'x']: expected numbers"),
    (lambda d: d.update(step_times_ns=[-1, 5]), "step_times_ns [-1, 5]: expected ints >= 0"),
    (lambda d: d.update(source="me"), "source 'me': expected 'simdist' or 'realdist'"),
    (lambda d: d["weights"]["kernel"].update(dtype="O"), "weight 'kernel': dtype 'O': expected a numeric"),
    (lambda d: d["weights"]["kernel"].update(dtype="nonsense"), "dtype 'nonsense': expected"),
    (lambda d: d["weights"]["kernel"].update(shape=[3, 3]), "shape [3, 3] does not hold the 8"),
    (lambda d: d["weights"]["kernel"].update(data=["a"] * 8), "data ['a', 'a', 'a', 'a', 'a', "),
    (lambda d: d["weights"].update(kernel=5), "weight 'kernel' is 5: expected an object"),
    (lambda d: d["exercise"].update(steps=-2), "its exercise: steps must be an int >= 1"),
    (lambda d: d["exercise"].update(strategy=[1]), "strategy must be a string, got [1]"),
    (lambda d: d["exercise"].update(dataset="mnist"), "unknown dataset 'mnist'"),
    (lambda d: d["exercise"].update(colour="red"), "unknown exercise field(s) ['colour']"),
    (lambda d: d["trace"]["traceEvents"].append({"ph": "X"}), "its trace: event"),
]


@pytest.mark.parametrize("change, expected", RESULT_EDITS)
def test_a_hand_edited_result_is_one_clear_line(saved, tmp_path, capsys, change, expected):
    path = edited(saved[1], tmp_path, change)
    assert compare_main([str(path), str(saved[1])]) == 2
    err = capsys.readouterr().err
    assert f"run result file '{path}'" in err and expected in err and err.count("\n") == 1, err


@pytest.mark.parametrize("content, expected", [
    (b"", "is not valid JSON: Expecting value at line 1, column 1 (the file ends early"),
    (b'{"traceEvents": [{"ph": "X", ', "(the file ends early: truncated?)"),
    (b"\x00\x01\xfe\xff", "is not text (byte 2 is not UTF-8)"),
])
def test_a_truncated_or_binary_file_is_one_clear_line(tmp_path, content, expected):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    for load in (Trace.load, RunResult.load):
        with pytest.raises(InvalidArgumentError, match=literal(expected)):
            load(path)


def test_a_directory_or_the_wrong_kind_of_file_is_named(saved, tmp_path, capsys):
    assert simdist_main(["summary", str(tmp_path)]) == 2
    assert f"trace file '{tmp_path}' is a directory" in capsys.readouterr().err
    assert simdist_main(["summary", str(saved[1])]) == 2
    assert "is a run result (simdist run --result, realdist run), not a trace" \
        in capsys.readouterr().err
    assert compare_main([str(saved[0]), str(saved[1])]) == 2
    assert "is a trace (--trace), not a run result" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, expected", [
    ("--trace", "DIR", "--trace '{}' is a directory: expected a file name"),
    ("--result", "DIR", "--result '{}' is a directory"),
    ("--timeline", "DIR/t.txt", "--timeline '{}' must end in .png, got .txt"),
    ("--trace", "FILE/t.json", "is not a directory"),
])
def test_output_paths_are_checked_before_the_run(tmp_path, capsys, option, value, expected):
    (tmp_path / "FILE").write_text("x")
    path = value.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))
    assert simdist_main(["run", "mirrored", "--steps", "2", option, path]) == 2
    captured = capsys.readouterr()
    assert expected.format(path) in captured.err and captured.out == ""  # nothing ran


def test_plot_and_compare_outputs_must_be_png(saved, tmp_path, capsys):
    assert simdist_main(["plot", str(saved[0]), "-o", str(tmp_path / "t.svg")]) == 2
    assert "-o '" in capsys.readouterr().err
    assert compare_main([str(saved[1]), str(saved[1]), "-o", str(tmp_path)]) == 2
    assert "must end in .png" in capsys.readouterr().err
