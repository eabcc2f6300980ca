"""Lesson exercises as ``mpiexec`` programs: run the learner's code on every rank, report on
rank 0, and end every rank together with the report's exit code.

A program is its own ``run`` and ``report`` handed to ``main``, which reads the command line
(``--solution``, ``--file PATH``, ``--lang``), loads the lesson's ``checks.py``, makes the
``MPITransport`` and runs them (``run_exercise``). A check that fails is a normal outcome, not
a crash: the job prints the report and exits 1, without ``MPI_Abort`` and its banner. Every
rank runs the simulation; when they all finish it (or all fail in the same way, as a stub's
``NotImplementedError`` does), they meet on a communicator of their own, rank 0 prints, and
every rank calls ``MPI_Finalize`` before exiting. Only when one rank fails while the others
still wait inside the simulation for it does the job end with ``MPI_Abort``: nothing else can
stop them. The report speaks the learner's language, chosen as ``simdist check`` chooses it.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

from course.checks import CheckFailed, not_done_name
from course.lang import LANGUAGES, language, localize, say, word

#: how long a rank that is done waits for the others before it ends the job with MPI_Abort
GRACE_S = 20.0


@dataclass(frozen=True)
class MPIExercise:
    """What a lesson's ``mpiexec`` program hands its ``run`` and ``report``: the learner's file
    (``path``), the lesson's ``checks`` module, this rank's ``MPITransport`` (the simulation's
    messages as MPI messages) and the report's language (``lang``)."""

    path: Path
    checks: ModuleType
    transport: object
    lang: str

    def say(self, en: str, zh: str) -> str:
        """``en`` or ``zh``: a report line of the program's own in the report's language."""
        return say(en, zh, self.lang)


def main(program: str, doc: str, function: str, run: Callable[[MPIExercise], object],
         report: Callable[[MPIExercise, object], tuple], argv=None,
         check_failed: Callable[[CheckFailed, str], str] | None = None) -> int:
    """A lesson's ``mpiexec`` program (``program``: its ``__file__``; ``doc``: its
    ``__doc__``), exercise ``function``: ``run(exercise)`` on every rank, then
    ``report(exercise, result)`` on rank 0 -> (text, ok). Returns the exit code.
    ``check_failed(error, lang)`` writes a CheckFailed the learner's code raised (default:
    ``check_failed_text``)."""
    from course.folders import load_module
    from simdist.sim.transports import MPITransport

    here = Path(program).resolve().parent
    args = parse_args(argv, here, doc, function)
    lang = language(args.lang)
    path = Path(args.file)
    exercise = MPIExercise(path, load_module(here / "checks.py"), MPITransport(), lang)
    return run_exercise(exercise.transport, lambda: run(exercise),
                        lambda result: report(exercise, result),
                        lambda e: failure_text(e, path, here.name[:2], check_failed, lang),
                        Path(program).stem, lang=lang)


def run_exercise(transport, run: Callable[[], object], report: Callable[[object], tuple],
                 describe_error: Callable[[BaseException], str], name: str,
                 grace_s: float = GRACE_S, lang: str = "en") -> int:
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
            print(f"{name} (rank {rank}): ✗ "
                  f"{error or say('the other ranks did not finish', '其他 rank 没有结束', lang)}",
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
                 check_failed: Callable[[CheckFailed, str], str] | None = None,
                 lang: str = "en") -> str:
    """What an exercise's report says, in ``lang``, when the learner's code fails on a rank:
    not done yet (a stub's ``NotImplementedError``), a failed check (``check_failed`` writes
    it; by default its message, hint and detail), or the error."""
    name = not_done_name(error)
    if name:
        return (f"{word('not_done', lang, name=name)}\n{word('hint', lang)}: " + say(
            f"replace the `raise NotImplementedError` in {path} with your code (simdist lesson "
            f"start {lesson} copies the stubs)",
            f"把 {path} 中的 `raise NotImplementedError` 换成你的代码（simdist lesson start "
            f"{lesson} 会复制练习模板）", lang))
    if isinstance(error, CheckFailed):
        return (check_failed or check_failed_text)(error, lang)
    return f"{type(error).__name__}: {error}"


def check_failed_text(error: CheckFailed, lang: str | None = None) -> str:
    """A failed check: its message, hint and detail in ``lang`` (default: the learner's)."""
    lang = language(lang)
    text = f"{localize(error.message, lang)}\n{word('hint', lang)}: {localize(error.hint, lang)}"
    return text + (f"\n      {localize(error.detail, lang)}" if error.detail else "")


def parse_args(argv, here: Path, doc: str, function: str) -> argparse.Namespace:
    """The command line of an ``mpiexec`` exercise of lesson folder ``here``: ``file``, the
    learner's ``my_exercises/`` copy, ``--solution`` (the reference) or ``--file PATH``;
    ``lang``, ``--lang`` (None: ``course.lang.language``'s rule)."""
    from course.lessons import solution_path
    from course.workspace import exercise_file

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--solution", dest="file", action="store_const",
                       const=str(solution_path(here)), help="use the reference solution")
    which.add_argument("--file", metavar="PATH",
                       help=f"use {function} from this file (default: your my_exercises/ "
                            "copy)")
    parser.add_argument("--lang", choices=LANGUAGES,
                        help="the language of the report (default: DISTLAB_LANG or the "
                             "locale; zh: 简体中文)")
    parser.set_defaults(file=str(exercise_file(here)))
    return parser.parse_args(argv)


def task_ranks(cluster: dict, ranks: int, lang: str = "en") -> str:
    """"worker:0 on rank 0, worker:1 on rank 1, ...": where each task of ``cluster`` (a
    ClusterSpec's jobs) runs under ``mpiexec -n ranks``, as simdist spreads them."""
    from simdist.hardware.cluster import ClusterSpec

    return on_ranks([t.name for t in ClusterSpec(cluster).tasks()], ranks, lang)


def on_ranks(tasks: list, ranks: int, lang: str = "en") -> str:
    """"ps:0 on rank 0, worker:0 on rank 0, ...": where each of ``tasks`` (in simdist's order)
    runs under ``mpiexec -n ranks``, in ``lang``."""
    from simdist.hardware.cluster import task_to_rank

    on = say("{task} on rank {rank}", "{task} 在 rank {rank}", lang)
    return say(", ", "，", lang).join(on.format(task=t, rank=r) for t, r in
                                      zip(tasks, task_to_rank(len(tasks), ranks)))


def verdict(lines: list, verify: Callable[[], str], success: str,
            lang: str = "en") -> tuple[str, bool]:
    """A report's ``lines`` and its last one, in ``lang``: "✓ ``success``: " and what
    ``verify()`` says, or "✗" and the check that failed (its message and hint)."""
    try:
        detail = verify()
    except CheckFailed as failed:
        lines.append("  ✗ " + check_failed_text(failed, lang).replace("\n", "\n      "))
        return "\n".join(lines), False
    sep = say(": ", "：", lang)
    lines.append(f"  ✓ {localize(success, lang)}{sep}{localize(detail, lang)}")
    return "\n".join(lines), True
