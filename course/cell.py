"""A notebook's check cell: ``check(EXERCISE)`` runs one exercise's checks against the
learner's workspace copy, prints the report and, where the lesson draws one, shows the
learner's trace beside the reference's (``side_by_side``).
"""

from __future__ import annotations

from pathlib import Path

from course.checks import first_lines, load_checks, load_lesson_checks, target_file
from course.folders import LessonError, find_lesson, list_lessons, load_module, solution_path
from course.lang import say
from course.report import print_checks


def find_exercise(exercise: str, folder=None) -> Path:
    """The lesson whose checks check ``exercise``."""
    found = [d for d in list_lessons(folder) if any(c.exercise == exercise
                                                     for c in load_checks(d))]
    if len(found) != 1:
        where = ", ".join(d.name for d in found) or "no lesson"
        raise LessonError(f"exercise {exercise!r} is checked by {where}: pass the lesson too, "
                          f"check({exercise!r}, lesson='NN')")
    return found[0]


def check(exercise: str, lesson=None, lang: str | None = None, workspace=None,
          picture: bool = True, detail: bool = False) -> bool:
    """A notebook's check cell: run one exercise's checks against the learner's workspace
    copy (or the stub) and print the report; where the lesson draws one, show the learner's
    trace beside the reference's. True when every check passes."""
    lesson_dir = find_lesson(lesson) if lesson is not None else find_exercise(exercise)
    ok = print_checks(lesson_dir, exercise=exercise, lang=lang, workspace=workspace,
                      detail=detail)
    lesson_checks = load_lesson_checks(lesson_dir)
    draw = lesson_checks.pictures.get(exercise)
    if picture and draw is not None:
        _show_picture(draw, lesson_dir, exercise, workspace, lang)
    return ok


def _show_picture(draw, lesson_dir, exercise, workspace, lang=None) -> None:
    try:
        mine = load_module(target_file(lesson_dir, workspace=workspace))
        reference = load_module(solution_path(lesson_dir))
        figure = draw(mine, reference)
    except NotImplementedError:
        return  # nothing of the learner's to draw yet
    except Exception as error:  # the report above already says what is wrong
        why = f"{type(error).__name__}: {first_lines(str(error), 2)}"
        print(say(f"(no picture: {why})", f"（没有图：{why}）", lang))
        return
    try:
        from IPython.display import display
    except ImportError:
        return
    display(figure)


def side_by_side(left, right, dpi: int = 72):
    """Two matplotlib figures next to each other, as one figure: a check cell's picture of
    the learner's run beside the reference's."""
    import io

    from matplotlib.figure import Figure
    from matplotlib.image import imread

    images = []
    for figure in (left, right):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        buffer.seek(0)
        images.append(imread(buffer))
    width = sum(image.shape[1] for image in images)
    height = max(image.shape[0] for image in images)
    out = Figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    x = 0
    for image in images:
        h, w = image.shape[:2]
        ax = out.add_axes((x / width, 1 - h / height, w / width, h / height))
        ax.imshow(image)
        ax.set_axis_off()
        x += w
    return out
