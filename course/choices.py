"""A "why" question as a checked multiple choice: the learner's function returns one of the
listed letters, a wrong letter gets the hint aimed at that mistake (issue 28, "predict, then
run"). Used by the lessons' checks; every text is a ``tr(english, chinese)``."""

from __future__ import annotations

from course.lang import Text, tr
from course.lessons import CheckFailed


def check_choice(function: str, answer, options: dict[str, Text], right: str,
                 hints: dict[str, Text], why: Text) -> Text:
    """``answer`` (what ``function`` returned) against ``options`` ({letter: the option's
    text}): the pass message ``why`` when it is ``right`` (case and spaces ignored), else a
    CheckFailed naming the option chosen with ``hints[letter]``."""
    letters = ", ".join(repr(letter) for letter in options)
    chosen = answer.strip().lower() if isinstance(answer, str) else None
    if chosen not in options:
        raise CheckFailed(tr(f"{function} returned {answer!r}, expected one of {letters}",
                             f"{function} 返回了 {answer!r}，应为 {letters} 之一"),
                          tr("return the letter of the option, a str such as 'a'",
                             "返回选项的字母，一个字符串，例如 'a'"))
    if chosen != right:
        option = options[chosen]
        raise CheckFailed(tr(f"{function}: {chosen!r} ({option}) is not why",
                             f"{function}：{chosen!r}（{option.zh}）不是原因"), hints[chosen])
    return tr(f"{right!r}: {why}", f"{right!r}：{why.zh}")
