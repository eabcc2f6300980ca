"""Two options naming one file, or an output naming a file the command reads, are refused
before anything runs, in one line naming both options and the path (issue 30, item 6): they
had reported both files written and kept one, or overwritten the input."""

import pytest

from simdist.commands.cli import main as simdist_main
from realdist.cli import main as realdist_main

pytestmark = pytest.mark.timeout(60)

TABLE = "strategy,workers,replicas,model,global_batch,step_ms\nmirrored,1,2,softmax,64,3.0\n"

#: (command line, the file that exists before, the two options the error names); A, B and
#: T.csv are files in the test's folder
CASES = [
    (["simdist", "run", "mirrored", "--steps", "2", "--trace", "A", "--result", "A"], None,
     "--trace and --result both name"),
    (["simdist", "run", "mirrored", "--steps", "2", "--trace", "t.png", "--timeline", "t.png"],
     None, "--trace and --timeline both name"),
    (["simdist", "run", "mirrored", "--steps", "2", "--trace", "A", "--result", "L"], None,
     "--trace and --result both name"),  # L is a link to A
    (["simdist", "run", "mirrored", "--trace", "p.yaml", "--profiles-file", "p.yaml"], "p.yaml",
     "--trace 'p.yaml' is also --profiles-file"),
    (["simdist", "plot", "t.png", "-o", "t.png"], "t.png", "-o 't.png' is also TRACE"),
    (["simdist", "ps", "--plot", "P.png", "--timeline", "P.png"], None,
     "--plot and --timeline both name"),
    (["simdist", "ps", "--trace", "c.json", "--checkpoint-dir", "c.json"], None,
     "--trace 'c.json' is also --checkpoint-dir"),
    (["simdist", "calibrate", "--from-csv", "T.csv", "-o", "T.csv"], "T.csv",
     "--output 'T.csv' is also --from-csv"),
    (["simdist", "calibrate", "-o", "a.json", "--csv", "a.json"], None,
     "--output and --csv both name"),
    (["simdist", "compare", "r.png", "r.png", "-o", "r.png"], "r.png", "-o 'r.png' is also FIRST"),
    (["simdist", "plot-collectives", "-o", "p.png", "--profiles-file", "p.png"], "p.png",
     "-o 'p.png' is also --profiles-file"),
    (["simdist", "bench", "predict", "--csv", "p.json", "--profiles-file", "p.json"], "p.json",
     "--csv 'p.json' is also --profiles-file"),
    (["realdist", "run", "mirrored", "--steps", "2", "--result", "A", "--trace", "A"], None,
     "--result and --trace both name"),
    (["realdist", "ps", "--trace", "c.json", "--checkpoint-dir", "c.json"], None,
     "--trace 'c.json' is also --checkpoint-dir"),
    (["realdist", "queues", "loader-trainer", "--trace", "q.png", "--plot", "q.png"], None,
     "--trace and --plot both name"),
]


@pytest.mark.parametrize("argv,existing,expected", CASES, ids=lambda x: " ".join(x)
                         if isinstance(x, list) else None)
def test_two_options_naming_one_file_or_an_input_are_refused(tmp_path, monkeypatch, capsys,
                                                             argv, existing, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "L").symlink_to(tmp_path / "A")
    if existing:
        (tmp_path / existing).write_text(TABLE)
    main = simdist_main if argv[0] == "simdist" else realdist_main
    assert main(argv[1:]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"L", existing} - {None})
    if existing:
        assert (tmp_path / existing).read_text() == TABLE  # the input is untouched


def test_different_files_in_one_run_are_all_written(tmp_path, capsys):
    trace, result, timeline = tmp_path / "t.json", tmp_path / "r.json", tmp_path / "t.png"
    assert simdist_main(["run", "mirrored", "--steps", "2", "--quiet", "--trace", str(trace),
                         "--result", str(result), "--timeline", str(timeline)]) == 0
    assert trace.stat().st_size and result.stat().st_size and timeline.stat().st_size
