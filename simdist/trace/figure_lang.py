"""The language of the figures: the words the plotting helpers write themselves (axis labels,
panel titles, legends) in English or Simplified Chinese, and a CJK font for matplotlib when
the figures speak Chinese. A lesson's Chinese notebook chooses it through
``course.lang.set_language("zh")``; everything else draws in English.
"""

from __future__ import annotations

from pathlib import Path

from simdist.base.errors import InvalidArgumentError

LANGUAGES = ("en", "zh")

#: the CJK font families tried in order (fonts-noto-cjk installs both)
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC",
                "WenQuanYi Zen Hei")

_chosen = ["en"]

#: the figures' own words, by language
WORDS = {
    "en": {"simulated_time": "simulated time ({unit})", "time": "time ({unit})",
           "steps_of": ": step{s} {which} of {n}",
           "whole_run": "the whole run: {n} steps (the steps drawn above are shaded)",
           "empty": "empty trace: nothing was recorded", "counters": "counters",
           "message": "message", "message_some": "message ({drawn} of {total} shown)",
           "instant": "instant", "queue_title": "queue {queue!r}: occupancy and consumer "
                                                "starvation",
           "in_queue": "elements in the queue", "starved": "starved\n{share:.0f}%",
           "worker": "worker {k}", "loss_title": "loss seen by each worker",
           "loss": "loss (its own shard)", "step_title": "global step after each run",
           "global_step": "global step", "staleness_title": "staleness of applied gradients",
           "in_between": "updates in between", "gradients": "gradients",
           "applied": "applied", "dropped": "dropped (stale)",
           "per_worker": "gradients per worker", "worker_axis": "worker",
           "ps_title": "between-graph {mode} training on parameter servers",
           "loader_threads": "{n} loader thread(s)",
           "capacity": "queue capacity (elements)",
           "starved_share": "trainer starved (% of the time)",
           "starvation_title": "a shared input queue: starvation vs capacity and enqueue "
                               "threads"},
    "zh": {"simulated_time": "模拟时间（{unit}）", "time": "时间（{unit}）",
           "steps_of": "：共 {n} 步中的第 {which} 步",
           "whole_run": "整个运行：{n} 步（上图画出的步用阴影标出）",
           "empty": "空的 trace：什么也没有记录", "counters": "计数器",
           "message": "消息", "message_some": "消息（共 {total} 条，画出 {drawn} 条）",
           "instant": "瞬时事件", "queue_title": "队列 {queue!r}：占用与消费者饥饿",
           "in_queue": "队列中的元素数", "starved": "饥饿\n{share:.0f}%",
           "worker": "工作器 {k}", "loss_title": "各工作器看到的损失",
           "loss": "损失（它自己的分片）", "step_title": "每次运行后的全局步数",
           "global_step": "全局步数", "staleness_title": "被应用梯度的陈旧度",
           "in_between": "其间的更新次数", "gradients": "梯度数",
           "applied": "已应用", "dropped": "已丢弃（陈旧）",
           "per_worker": "各工作器的梯度", "worker_axis": "工作器",
           "ps_title": "参数服务器上的图间{mode}训练",
           "loader_threads": "{n} 个加载线程",
           "capacity": "队列容量（元素数）",
           "starved_share": "训练器饥饿（占时间的 %）",
           "starvation_title": "共享输入队列：饥饿与容量、入队线程数的关系"},
}

#: how the words name a training mode
MODES = {"en": {}, "zh": {"sync": "同步", "async": "异步"}}


def set_language(lang: str | None) -> None:
    """Draw the figures in ``lang`` ("en", "zh"; None: English); for Chinese, put a CJK font
    family first in matplotlib's sans-serif list when one is installed."""
    lang = lang or "en"
    if lang not in LANGUAGES:
        raise InvalidArgumentError(f"unknown figure language {lang!r}: expected one of "
                                   f"{', '.join(LANGUAGES)}")
    _chosen[0] = lang
    if lang == "zh":
        use_cjk_font()


def figure_language(lang: str | None = None) -> str:
    """``lang``, else the one ``set_language`` chose (English until then)."""
    return lang or _chosen[0]


def word(key: str, lang: str | None = None, **values) -> str:
    """One of the figures' own words in ``lang`` (default: ``figure_language()``)."""
    lang = figure_language(lang)
    if "mode" in values:
        values["mode"] = MODES[lang].get(values["mode"], values["mode"])
    return WORDS[lang][key].format(**values)


def cjk_family() -> str | None:
    """The first of ``CJK_FAMILIES`` matplotlib can use, else None. A font installed after
    matplotlib cached its font list is added from the system's font folders."""
    from matplotlib import font_manager

    def known() -> set:
        return {font.name for font in font_manager.fontManager.ttflist}

    names = known()
    if not any(family in names for family in CJK_FAMILIES):
        for path in font_manager.findSystemFonts():
            if "CJK" in Path(path).name or "wqy" in Path(path).name.lower():
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
        names = known()
    return next((family for family in CJK_FAMILIES if family in names), None)


def use_cjk_font() -> str | None:
    """Put a CJK font family first in matplotlib's sans-serif list (the family it picks);
    None, and matplotlib as it was, when no CJK font is installed (fonts-noto-cjk)."""
    import matplotlib

    family = cjk_family()
    if family is not None:
        rest = [f for f in matplotlib.rcParams["font.sans-serif"] if f != family]
        matplotlib.rcParams["font.sans-serif"] = [family] + rest
        matplotlib.rcParams["font.family"] = ["sans-serif"]
        matplotlib.rcParams["axes.unicode_minus"] = False
    return family
