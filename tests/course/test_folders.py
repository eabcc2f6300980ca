"""Finding the course (course.folders): $DISTLAB_LESSONS, else the checkout beside the package,
else the working directory or a parent of it; a one-line error naming where it looked."""

import shutil

import pytest

from course import folders, lessons, workspace

from tests.conftest import ROOT

LESSON = "01_collectives"


@pytest.fixture
def copy(tmp_path):
    """A course outside the checkout: lesson 01, its solution and the folders beside them."""
    root = tmp_path / "course"
    shutil.copytree(ROOT / "lessons" / LESSON, root / "lessons" / LESSON)
    (root / "lessons" / "solutions").mkdir()
    shutil.copy(ROOT / "lessons" / "solutions" / f"{LESSON}.py", root / "lessons" / "solutions")
    return root


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """As from an installed package: no lessons/ beside it, no DISTLAB_LESSONS."""
    monkeypatch.setattr(folders, "_CHECKOUT", tmp_path / "site-packages")
    monkeypatch.delenv(folders.ENV, raising=False)


def test_a_checkout_finds_its_own_lessons(monkeypatch, tmp_path):
    monkeypatch.delenv(folders.ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # the checkout wins over the working directory
    assert folders.lessons_dir() == ROOT / "lessons"
    assert folders.course_root() == ROOT


def test_the_environment_variable_names_the_lessons_folder(monkeypatch, copy):
    monkeypatch.setenv(folders.ENV, str(copy / "lessons"))
    assert folders.lessons_dir() == copy / "lessons"
    assert lessons.list_lessons() == [copy / "lessons" / LESSON]
    assert lessons.find_lesson("01") == copy / "lessons" / LESSON
    assert lessons.LESSONS_DIR == copy / "lessons"
    assert lessons.run_checks("01", solution=True)[0].passed


def test_an_installed_package_finds_the_lessons_in_the_working_directory_or_a_parent(
        monkeypatch, copy, installed):
    monkeypatch.chdir(copy / "lessons" / LESSON)
    assert folders.lessons_dir() == copy / "lessons"
    monkeypatch.delenv("DISTLAB_WORKSPACE")  # the default workspace: beside the lessons
    assert workspace.workspace_dir() == copy.resolve() / "my_exercises"
    assert folders.repo_relative(copy / "lessons" / LESSON) == f"lessons/{LESSON}"


def test_no_lessons_anywhere_is_a_one_line_error_naming_where_it_looked(
        monkeypatch, tmp_path, installed):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lessons").mkdir()  # a lessons/ folder without a lesson does not count
    with pytest.raises(lessons.LessonError) as error:
        folders.lessons_dir()
    message = str(error.value)
    assert "\n" not in message
    assert f"{folders.ENV} is not set" in message
    assert str(tmp_path / "site-packages") in message and str(tmp_path) in message


def test_an_environment_variable_that_names_no_folder_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv(folders.ENV, str(tmp_path / "missing"))
    with pytest.raises(lessons.LessonError, match=f"{folders.ENV}=.*missing is not a folder"):
        lessons.list_lessons()
