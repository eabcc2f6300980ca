"""The Chinese edition down to the last English lines (issue 28, deliverable 4): an mpiexec
exercise's report (its own lines, its verdict and its failures), ``simdist check --all``'s
progress line and a check cell's "(no picture: ...)" in the language asked for, English
unchanged."""

from pathlib import Path

import pytest

from course import cell, mpi
from course.checks import CheckFailed
from course.folders import find_lesson
from course.lang import tr
from simdist.commands import check as check_command

from tests.conftest import lesson_mpi
from tests.course.test_lang_messages import CJK, _untranslated

COORDINATOR = Path("lessons") / "10_parameter_server_strategy" / "coordinator_mpi.py"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_an_mpiexec_exercise_reports_in_chinese_with_lang_zh():
    proc = lesson_mpi(COORDINATOR, 1, "--solution", "--lang", "zh")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("coordinator_mpi：来自 10_parameter_server_strategy.py 的 "
                               "register_functions；一个主工作器、2 个工作器和 1 个 ps 分布在 1 "
                               "个 MPI rank 上（chief:0 在 rank 0，"), lines[0]
    assert lines[1] == "  每个 rank 上注册的：count_labels, dataset_fn", lines
    assert lines[2].startswith("  ✓ 工作器按名字找到了 count_labels 和 dataset_fn："), lines
    assert not [line for line in lines if _untranslated(line)], lines


@pytest.mark.parametrize("lang, line", [
    ("en", "not done yet: exercise predict_sidecar\nhint: replace the `raise "
           "NotImplementedError` in ex.py with your code (simdist lesson start 12 copies the "
           "stubs)"),
    ("zh", "尚未完成：练习 predict_sidecar\n提示: 把 ex.py 中的 `raise NotImplementedError` "
           "换成你的代码（simdist lesson start 12 会复制练习模板）"),
])
def test_an_mpiexec_exercise_says_not_done_in_the_learners_language(lang, line):
    stub = NotImplementedError("exercise predict_sidecar: your answer here")
    assert mpi.failure_text(stub, Path("ex.py"), "12", lang=lang) == line


def test_a_failed_check_and_the_verdict_speak_the_learners_language():
    failed = CheckFailed(tr("wrong", "错了"), tr("think again", "再想想"))
    assert mpi.failure_text(failed, Path("ex.py"), "12", lang="zh") == "错了\n提示: 再想想"

    def verify():
        return tr("4 of 4", "4 项全对")

    assert mpi.verdict(["head"], verify, tr("all right", "全对"), "zh") == (
        "head\n  ✓ 全对：4 项全对", True)
    assert mpi.verdict(["head"], verify, tr("all right", "全对")) == (
        "head\n  ✓ all right: 4 of 4", True)
    assert mpi.task_ranks({"worker": 2}, 2, "zh") == "worker:0 在 rank 0，worker:1 在 rank 1"


@pytest.mark.parametrize("lang, line", [("en", "[1/12] checking 06_queues ..."),
                                        ("zh", "[1/12] 正在检查 06_queues ...")])
def test_simdist_check_all_shows_its_progress_in_the_language_asked_for(lang, line,
                                                                         monkeypatch, capsys):
    def status(folder, workspace, progress):
        progress(0, 12, Path("06_queues"))
        return []

    monkeypatch.setattr(check_command, "all_lessons_status", status)
    monkeypatch.setattr(check_command, "format_progress", lambda rows, lang: "")
    monkeypatch.setattr(check_command.sys.stdout, "isatty", lambda: True)
    assert check_command.main(["--all", "--lang", lang]) == 0
    assert capsys.readouterr().out.startswith(line + "\r")


@pytest.mark.parametrize("lang, line", [("en", "(no picture: ValueError: no data)"),
                                        ("zh", "（没有图：ValueError: no data）")])
def test_a_check_cell_says_why_it_has_no_picture_in_the_language_asked_for(lang, line,
                                                                            capsys):
    def draw(mine, reference):
        raise ValueError("no data")

    cell._show_picture(draw, find_lesson("01"), "ring_all_reduce", None, lang)
    out = capsys.readouterr().out
    assert out == line + "\n" and bool(CJK.search(out)) == (lang == "zh")


def test_a_notebook_s_language_reaches_the_programs_it_starts(monkeypatch):
    """A Chinese notebook's ``set_language("zh")`` is DISTLAB_LANG for its mpiexec cells."""
    import os
    import subprocess
    import sys

    from course.lang import set_language

    monkeypatch.delenv("DISTLAB_LANG", raising=False)
    child = [sys.executable, "-c", "import os; print(os.environ.get('DISTLAB_LANG'))"]
    try:
        set_language("zh")
        assert subprocess.run(child, capture_output=True, text=True).stdout.strip() == "zh"
    finally:
        set_language(None)
    assert "DISTLAB_LANG" not in os.environ or os.environ["DISTLAB_LANG"] != "zh"
