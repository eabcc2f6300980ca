"""The tracebacks issue 30 (item 11) found outside `simdist ps`, each now one line: a program
file that raises as it is imported, a --help text that argparse cannot format, an infinite
time given to realdist's loader/trainer, and `course build -o` naming a file."""

import pytest

from realdist.cli import main as realdist_main
from simdist.commands.cli import main as simdist_main

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("body,expected", [
    ("x = 1\nraise RuntimeError('boom')\n", "line 2 raised RuntimeError as it was imported: boom"),
    ("import sys\nsys.exit(3)\n", "line 2 raised SystemExit as it was imported: 3"),
    ("import no_such_module_in_distlab\n", "line 1 raised ModuleNotFoundError as it was "
                                           "imported: No module named"),
    ("def f():\n    return 1 / 0\nf()\n", "line 2 raised ZeroDivisionError"),
])
def test_a_program_file_that_raises_as_it_is_imported_is_one_line(tmp_path, capsys, body,
                                                                   expected):
    path = tmp_path / "bad.py"
    path.write_text(body)
    assert simdist_main(["run", str(path)]) == 2  # the README: one line, exit status 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"simdist: error: program file '{path}' ") and \
        expected in captured.err and len(captured.err.splitlines()) == 1, captured.err


def test_every_help_text_of_simdist_and_realdist_formats():
    """A '%' that argparse reads as a format (realdist measure's "5%") breaks --help; the CLI
    reference page writes such a failure as '(--help fails: ...)'."""
    from tests.docs.cli_reference import generate

    assert "(--help fails" not in generate()


def test_realdist_measure_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        realdist_main(["measure", "--help"])
    assert exit_.value.code == 0 and "over 5% of their mean" in capsys.readouterr().out


@pytest.mark.parametrize("argv,expected", [
    (["queues", "loader-trainer", "--train-ms", "inf"], "train_ms=inf, expected a finite "
                                                        "number of ms >= 0"),
    (["queues", "loader-trainer", "--load-ms", "nan"], "load_ms=nan"),
    (["queues", "ensemble", "--slow-ms", "inf"], "slow_ms=inf"),
])
def test_an_infinite_time_for_the_queue_programs_is_one_line_before_tf_starts(capsys, argv,
                                                                              expected):
    assert realdist_main(argv) == 2
    captured = capsys.readouterr()
    assert expected in captured.err and len(captured.err.splitlines()) == 1
    assert "starting TensorFlow" not in captured.out


@pytest.mark.parametrize("option", ["-o", "--executed"])
def test_course_build_into_a_file_is_one_line(tmp_path, capsys, option):
    file = tmp_path / "FILE"
    file.write_text("not a folder")
    argv = ["course", "build", "--no-execute", "--no-checks", option, str(file)]
    if option == "--executed":
        argv += ["-o", str(tmp_path / "site")]
    assert simdist_main(argv) == 2
    err = capsys.readouterr().err
    assert f"{option} '{file}' is a file: expected a folder" in err and \
        len(err.splitlines()) == 1
    assert file.read_text() == "not a folder" and not (tmp_path / "site").exists()
