"""Progress over every lesson, as ``simdist check --all`` prints it: a line per lesson, a mark
and the stars of each exercise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course import workspace as ws
from course.checks import load_lesson_checks, run_checks
from course.folders import lesson_title, list_lessons


def stars(n: int) -> str:
    return "★" * n


@dataclass
class LessonStatus:
    """One row of ``simdist check --all``."""

    lesson: str
    title: str
    started: bool
    exercises: dict  # name -> (stars, "passes" | "fails" | "not done")
    passed: int
    total: int

    @property
    def done(self) -> int:
        return sum(state == "passes" for _, state in self.exercises.values())


def lesson_status(lesson_dir, workspace=None) -> LessonStatus:
    """Run a lesson's checks against the learner's exercises and sum them up."""
    lesson_dir = Path(lesson_dir)
    declared = load_lesson_checks(lesson_dir)
    results = run_checks(lesson_dir, workspace=workspace)
    states = {}
    for name in declared.exercises:
        mine = [r for r in results if r.exercise == name]
        state = ("not done" if any(r.not_done for r in mine) else
                 "passes" if all(r.passed for r in mine) else "fails")
        states[name] = (declared.difficulty[name], state)
    return LessonStatus(lesson_dir.name, lesson_title(lesson_dir),
                        ws.workspace_file(lesson_dir, workspace).is_file(), states,
                        sum(r.passed for r in results), len(results))


def all_lessons_status(folder=None, workspace=None, progress=None) -> list[LessonStatus]:
    """``lesson_status`` of every lesson, in order (``progress(i, n, lesson_dir)`` first)."""
    lessons = list_lessons(folder)
    rows = []
    for i, lesson_dir in enumerate(lessons):
        if progress:
            progress(i, len(lessons), lesson_dir)
        rows.append(lesson_status(lesson_dir, workspace))
    return rows


def format_progress(rows: list[LessonStatus], lang: str = "en") -> str:
    """The progress table: a line per lesson, a mark per exercise."""
    head = ("lesson", "exercises done", "checks", "exercises") if lang == "en" else \
        ("课程", "已完成练习", "检查", "练习")
    mark = {"passes": "✓", "fails": "✗", "not done": "·"}
    names = [row.lesson + ("" if row.started else " *") for row in rows]
    width = max([26] + [len(name) for name in names])  # "10_parameter_server_strategy *"
    lines = [f"{head[0]:<{width}} {head[1]:>14} {head[2]:>8}  {head[3]}"]
    for name, row in zip(names, rows):
        exercises = "  ".join(f"{mark[state]} {n} {stars(s)}"
                              for n, (s, state) in row.exercises.items())
        lines.append(f"{name:<{width}} {row.done:>9}/{len(row.exercises):<4} "
                     f"{row.passed:>3}/{row.total:<4}  {exercises}")
    done = sum(r.done for r in rows)
    total = sum(len(r.exercises) for r in rows)
    if lang == "en":
        lines.append(f"{done} of {total} exercises done.  ✓ passes  ✗ fails  · not done;  "
                     "* not started (simdist lesson start NN)")
    else:
        lines.append(f"共 {total} 个练习，已完成 {done} 个。  ✓ 通过  ✗ 未通过  · 未完成；  "
                     "* 尚未开始（simdist lesson start NN）")
    return "\n".join(lines)
