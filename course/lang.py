"""The learner's language for lesson checks and figures: English, or Simplified Chinese
(``zh``).

A check writes each message, hint and title once in both languages with ``tr(english,
chinese)``: the result is an ordinary ``str`` (the English text, so code that compares
messages keeps working) that carries its translation. ``localize(text, lang)`` picks the
learner's one. A lesson's figure titles and axis labels are ``say(english, chinese)``: the
text in the notebook's language. The language comes from ``--lang``, else ``set_language``
(a notebook's first cell: ``"zh"`` in the Chinese edition, ``"en"`` in the English one),
else ``DISTLAB_LANG``, else the locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``:
``zh_CN.UTF-8`` is Chinese).
"""

from __future__ import annotations

import os

from simdist.base.errors import InvalidArgumentError
from simdist.trace import figure_lang

LANGUAGES = ("en", "zh")

_chosen: str | None = None


class Text(str):
    """An English string that also knows its Chinese translation (``.zh``)."""

    zh: str

    def __new__(cls, en: str, zh: str):
        text = super().__new__(cls, en)
        text.zh = zh
        return text


def tr(en: str, zh: str) -> Text:
    """``en`` with its Simplified Chinese translation ``zh``."""
    return Text(en, zh)


def check_language(lang: str) -> str:
    """``lang`` if it is a language the checks speak, else an InvalidArgumentError."""
    if lang not in LANGUAGES:
        raise InvalidArgumentError(f"unknown language {lang!r}: expected one of "
                                   f"{', '.join(LANGUAGES)}")
    return lang


#: DISTLAB_LANG as this process found it (``set_language(None)`` gives it back)
_ENVIRONMENT_LANG = os.environ.get("DISTLAB_LANG")


def set_language(lang: str | None) -> None:
    """Choose the language of the check reports and the figures in this process (None: back
    to the environment's). A Chinese notebook's first cell calls ``set_language("zh")``
    (which also picks a CJK font for matplotlib), an English one ``set_language("en")``.
    The choice is also ``DISTLAB_LANG`` for the processes this one starts (a notebook's
    ``mpiexec`` exercise reports in the notebook's language)."""
    global _chosen
    _chosen = None if lang is None else check_language(lang)
    figure_lang.set_language(_chosen)
    chosen = _chosen if _chosen is not None else _ENVIRONMENT_LANG
    if chosen is None:
        os.environ.pop("DISTLAB_LANG", None)
    else:
        os.environ["DISTLAB_LANG"] = chosen


def language(lang: str | None = None) -> str:
    """The language to report in: ``lang``, else ``set_language``'s, ``DISTLAB_LANG``, the
    locale, else English."""
    if lang is not None:
        return check_language(lang)
    if _chosen is not None:
        return _chosen
    wanted = os.environ.get("DISTLAB_LANG")
    if wanted:
        return check_language(wanted)
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def say(en: str, zh: str, lang: str | None = None) -> str:
    """``en`` or ``zh``, whichever is the learner's language (``language(lang)``): a figure's
    title or axis label in a lesson's code, the same cell in both editions."""
    return zh if language(lang) == "zh" else en


def join(*parts) -> Text:
    """The parts (texts, ``tr`` texts or numbers) joined into one ``tr`` text, each part in
    its language: ``join(message, tr(" and ", "且"), where)``."""
    en = "".join(str(p) for p in parts)
    return Text(en, "".join(localize(p, "zh") if isinstance(p, Text) else str(p)
                            for p in parts))


def localize(text, lang: str) -> str:
    """``text`` in ``lang``: its translation where it has one, else the text itself."""
    if lang == "zh" and isinstance(text, Text):
        return text.zh
    return str(text) if text is not None else ""


#: the words of the check report, by language
WORDS = {
    "en": {"hint": "hint", "detail": "in detail", "not_done": "not done yet: exercise {name}",
           "open_stub": "open {path} and replace the `raise NotImplementedError` in {name} "
                        "with your code",
           "start": "run `simdist lesson start {lesson}` to copy the stubs into your "
                    "workspace, then",
           "same": "(the same problem as above)",
           "summary": "{passed} of {total} checks pass",
           "summary_not_done": " (not done yet: {names})",
           "checking": "lesson {lesson}: checking {path}",
           "more_after": "(a more detailed hint comes if this check fails again)",
           "bug": "fix the error (the message says where), then run the check again",
           "missing_fn": "define {name} in {file} (see the stub in the lesson's {stub})",
           "import": "fix the error, then run the check again",
           "not_impl": "something your code calls is not implemented yet",
           "no_function": "{file} has no function {name}",
           "raised": "your code raised {error}: {text}",
           "cannot_import": "cannot import {file}: {error}: {text}",
           "at": " (at {file} line {line}:{code})"},
    "zh": {"hint": "提示", "detail": "详细提示", "not_done": "尚未完成：练习 {name}",
           "open_stub": "打开 {path}，把 {name} 中的 `raise NotImplementedError` 换成你的代码",
           "start": "先运行 `simdist lesson start {lesson}` 把练习模板复制到你的工作区，然后",
           "same": "（与上面同一个问题）",
           "summary": "{total} 项检查中通过 {passed} 项",
           "summary_not_done": "（尚未完成：{names}）",
           "checking": "第 {lesson} 课：检查 {path}",
           "more_after": "（如果这项检查再次失败，会给出更详细的提示）",
           "bug": "修正这个错误（消息里写明了位置），然后再运行检查",
           "missing_fn": "在 {file} 中定义 {name}（参见本课 {stub} 里的模板）",
           "import": "修正这个错误，然后再运行检查",
           "not_impl": "你的代码调用了尚未实现的东西",
           "no_function": "{file} 中没有函数 {name}",
           "raised": "你的代码抛出了 {error}：{text}",
           "cannot_import": "无法导入 {file}：{error}：{text}",
           "at": "（位于 {file} 第 {line} 行：{code}）"},
}


def word(key: str, lang: str, **values) -> str:
    """One word or sentence of the report frame, in ``lang``."""
    return WORDS[lang][key].format(**values)


def words(key: str, **values) -> Text:
    """One sentence of the report frame in both languages (a ``tr`` text)."""
    return tr(word(key, "en", **values), word(key, "zh", **values))
