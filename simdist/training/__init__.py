"""Programs built on the TF APIs: the exercise spec and its result, the models and datasets,
the training loops of every strategy (synchronous, parameter servers, TPU), evaluation,
TF1 parameter-server training, replication and input pipelines, and the programs that
``simdist run NAME`` knows.

May import every package below it (``collectives``, ``graph``, ``distribute``, ``sim``,
``hardware``, ``trace``, ``base``); never the command line or the course.
"""

from simdist.training.exercises import Exercise, RunResult
from simdist.training.loop import simulate_exercise
from simdist.training.sync_loop import make_strategy

__all__ = ["Exercise", "RunResult", "make_strategy", "simulate_exercise"]
