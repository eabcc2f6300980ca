"""Every lesson against its checks: each check passes on the reference solution
(``lessons/solutions/NN_slug.py``) and fails on the untouched stubs as "not done yet", and so
does each ``mpiexec`` exercise (``lessons/NN_slug/*_mpi.py``, marked mpi) that no file of
its own runs: those of lessons 05 to 12 run at 1, 2 and 4 ranks in their lesson's file (the
solution) and in ``test_lesson_mpi_stubs.py`` (the stub). Tests of one lesson's wrong
answers and hints live in its own file (``test_lesson_NN_*.py``)."""

import re
from pathlib import Path

import pytest

from course import lessons
from course.report import format_summary
from simdist.sim.launcher import run_mpi

from tests.conftest import ROOT
from tests.course.test_lesson_mpi_stubs import PROGRAMS as STUB_PROGRAMS

LESSONS = lessons.list_lessons()
MPI_EXERCISES = [script for lesson in LESSONS for script in sorted(lesson.glob("*_mpi.py"))]
#: the mpiexec exercises no lesson file of their own runs (each is run once more here)
OTHER_MPI_EXERCISES = [s for s in MPI_EXERCISES
                       if f"{s.parent.name}/{s.name}" not in STUB_PROGRAMS]

#: a stub: ``raise NotImplementedError("exercise NAME: ...")``
_STUB = re.compile(r"NotImplementedError\(\s*f?[\"']exercise (\w+)")

#: what the reference run of some mpiexec exercises prints besides its ranks and its ✓ marks
MPI_REFERENCE_SHOWS = {
    "ring_mpi.py": ["on 4 tasks over 4 MPI rank(s)", "4 of 4 checks pass"],
    "mwms_mpi.py": ["3 workers (10.0.0.1:2222, 10.0.0.2:2222, 10.0.0.3:2222) over 3 MPI rank(s)",
                    '"task": {"type": "worker", "index": 2}',
                    "✓ every worker created MultiWorkerMirroredStrategy from its TF_CONFIG"],
}


def stub_exercises(lesson_dir) -> set[str]:
    """The exercises a lesson's stubs leave to the learner."""
    return set(_STUB.findall((lesson_dir / lessons.EXERCISES).read_text(encoding="utf-8")))


def mpi_ranks(script) -> int:
    """The ranks the exercise's docstring runs it on (``mpiexec -n N``)."""
    return int(re.search(r"mpiexec -n (\d+)", script.read_text(encoding="utf-8")).group(1))


def test_every_lesson_and_mpi_exercise_is_found():
    assert [d.name[:2] for d in LESSONS] == [f"{n:02d}" for n in range(1, len(LESSONS) + 1)]
    assert set(MPI_REFERENCE_SHOWS) <= {s.name for s in OTHER_MPI_EXERCISES}
    # every exercise runs somewhere: here, or in the stubs table and its lesson's own file
    assert set(STUB_PROGRAMS) <= {f"{s.parent.name}/{s.name}" for s in MPI_EXERCISES}
    for program in STUB_PROGRAMS:
        lesson = program[:2]
        own = [p for p in (ROOT / "tests" / "course").glob(f"test_lesson*{lesson}*.py")
               if f"{Path(program).stem}_passes_with_the_solution" in p.read_text("utf-8")]
        assert own, f"no lesson file runs {program} with its solution"


@pytest.mark.parametrize("lesson_dir", LESSONS, ids=lambda d: d.name)
def test_every_check_passes_against_the_reference_solution(lesson_dir):
    results = lessons.run_checks(lesson_dir, solution=True)
    assert results
    failed = [f"{r.name}: {r.message} (hint: {r.hint})" for r in results if not r.passed]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("lesson_dir", LESSONS, ids=lambda d: d.name)
def test_every_check_fails_against_the_untouched_stubs_as_not_done(lesson_dir):
    exercises = lessons.load_lesson_checks(lesson_dir).exercises
    assert set(exercises) == stub_exercises(lesson_dir), "every stub is checked, and only stubs"
    results = lessons.run_checks(lesson_dir)
    assert results and not any(r.passed for r in results)
    assert all(r.not_done and r.hint for r in results)
    assert {r.message for r in results} == {f"not done yet: exercise {name}"
                                            for name in exercises}
    assert format_summary(results) == (f"0 of {len(results)} checks pass (not done yet: "
                                       f"{', '.join(sorted(exercises))})")


@pytest.mark.mpi
@pytest.mark.timeout(150)
@pytest.mark.parametrize("script", OTHER_MPI_EXERCISES,
                         ids=lambda s: f"{s.parent.name[:2]}_{s.stem}")
def test_every_mpi_exercise_passes_with_the_reference_solution(script):
    ranks = mpi_ranks(script)
    proc = run_mpi(ranks, [str(script.relative_to(ROOT)), "--solution"], timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"over {ranks} MPI rank(s)" in proc.stdout
    assert "✓" in proc.stdout and "✗" not in proc.stdout
    missing = [line for line in MPI_REFERENCE_SHOWS.get(script.name, ()) if line not in proc.stdout]
    assert not missing, proc.stdout


@pytest.mark.mpi
@pytest.mark.timeout(150)
@pytest.mark.parametrize("script", OTHER_MPI_EXERCISES,
                         ids=lambda s: f"{s.parent.name[:2]}_{s.stem}")
def test_every_mpi_exercise_fails_with_the_untouched_stubs_without_aborting(script):
    proc = run_mpi(mpi_ranks(script), [str(script.relative_to(ROOT))], timeout=120, cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    not_done = re.search(r"✗ not done yet: exercise (\w+)", proc.stdout)
    assert not_done and not_done.group(1) in stub_exercises(script.parent), proc.stdout
    assert "MPI_ABORT" not in proc.stdout + proc.stderr
