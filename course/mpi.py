"""Lesson exercises as ``mpiexec`` programs: run the learner's code on every rank, report on
rank 0, and end every rank together with the report's exit code.

A check that fails is a normal outcome, not a crash: the job prints the report and exits 1,
without ``MPI_Abort`` and its banner. Every rank runs the simulation; when they all finish it
(or all fail in the same way, as a stub's ``NotImplementedError`` does), they meet on a
communicator of their own, rank 0 prints, and every rank calls ``MPI_Finalize`` before
exiting. Only when one rank fails while the others still wait inside the simulation for it
does the job end with ``MPI_Abort``: nothing else can stop them.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable

from course.checks import CheckFailed, not_done_name
from course.lang import WORDS, language, localize

#: how long a rank that is done waits for the others before it ends the job with MPI_Abort
GRACE_S = 20.0


def run_exercise(transport, run: Callable[[], object], report: Callable[[object], tuple],
                 describe_error: Callable[[BaseException], str], name: str,
                 grace_s: float = GRACE_S) -> int:
    """``run()`` on every rank (the simulation over ``transport``), then ``report(result)`` on
    rank 0 -> (text, ok). Returns the exit code, the same on every rank, after MPI_Finalize.
    ``describe_error`` turns the learner's exception into the report's text."""
    control = transport.comm.Dup()  # the ranks' meeting, apart from the simulation's messages
    rank = transport.rank
    result, error = None, None
    try:
        result = run()
    except Exception as exc:  # noqa: BLE001 (the learner's code: report it, do not crash)
        error = describe_error(exc)
    request = control.Ibarrier()
    deadline = time.monotonic() + grace_s
    while not request.Test():
        if time.monotonic() > deadline:  # the others wait inside the simulation for us
            print(f"{name} (rank {rank}): ✗ {error or 'the other ranks did not finish'}",
                  flush=True)
            transport.comm.Abort(1)
        time.sleep(0.005)
    errors = control.gather(error, root=0)
    code = 0
    if rank == 0:
        failed = [e for e in errors if e is not None]
        if failed:
            print(f"{name}: ✗ {failed[0]}", flush=True)
            code = 1
        else:
            try:
                text, ok = report(result)
            except Exception as exc:  # noqa: BLE001
                text, ok = f"✗ {describe_error(exc)}", False
            print(text, flush=True)
            code = 0 if ok else 1
    code = control.bcast(code, root=0)
    control.Free()
    transport.finalize()
    return code


def failure_text(error: BaseException, path: Path, lesson: str,
                 check_failed: Callable[[CheckFailed], str] | None = None) -> str:
    """What an exercise's report says when the learner's code fails on a rank: not done
    yet (a stub's ``NotImplementedError``), a failed check (``check_failed`` writes it;
    by default its message, hint and detail in the learner's language), or the error."""
    name = not_done_name(error)
    if name:
        return (f"not done yet: exercise {name}\nhint: replace the `raise NotImplementedError` "
                f"in {path} with your code (simdist lesson start {lesson} copies the stubs)")
    if isinstance(error, CheckFailed):
        return (check_failed or check_failed_text)(error)
    return f"{type(error).__name__}: {error}"


def check_failed_text(error: CheckFailed) -> str:
    """A failed check: its message, hint and detail in the learner's language."""
    lang = language()
    text = f"{error.message}\n{WORDS[lang]['hint']}: {localize(error.hint, lang)}"
    return text + (f"\n      {localize(error.detail, lang)}" if error.detail else "")


def exercise_path(argv, here: Path, doc: str, function: str) -> Path:
    """The learner's file an ``mpiexec`` exercise of lesson folder ``here`` runs: its
    ``my_exercises/`` copy, ``--solution`` (the reference) or ``--file PATH``."""
    from course.lessons import solution_path
    from course.workspace import exercise_file

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--solution", dest="file", action="store_const",
                        const=str(solution_path(here)), help="use the reference solution")
    parser.add_argument("--file", metavar="PATH",
                        help=f"use {function} from this file (default: your my_exercises/ "
                             "copy)")
    parser.set_defaults(file=str(exercise_file(here)))
    return Path(parser.parse_args(argv).file)


def task_ranks(cluster: dict, ranks: int) -> str:
    """"worker:0 on rank 0, worker:1 on rank 1, ...": where each task of ``cluster`` (a
    ClusterSpec's jobs) runs under ``mpiexec -n ranks``, as simdist spreads them."""
    from simdist.hardware.cluster import ClusterSpec, task_to_rank

    tasks = [t.name for t in ClusterSpec(cluster).tasks()]
    return ", ".join(f"{t} on rank {r}" for t, r in zip(tasks, task_to_rank(len(tasks), ranks)))


def verdict(lines: list, verify: Callable[[], str], success: str) -> tuple[str, bool]:
    """A report's ``lines`` and its last one: "✓ ``success``: " and what ``verify()`` says,
    or "✗" and the check that failed (its hint in the learner's language)."""
    try:
        detail = verify()
    except CheckFailed as failed:
        lines.append("  ✗ " + check_failed_text(failed).replace("\n", "\n      "))
        return "\n".join(lines), False
    lines.append(f"  ✓ {success}: {detail}")
    return "\n".join(lines), True
