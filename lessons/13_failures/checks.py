"""Lesson 13, Failures and recovery: the checks of ``simdist check 13``.

Which failures need a restore from a checkpoint (a multiple choice of six), why a restarted
chief restores although no ps failed (a checked "why"), where TF1 training resumes after the
chief fails (``train_on_ps``, a between-graph job) and where a ParameterServerStrategy job
starts again after a ps failure that lands during a checkpoint's save (the epoch inferred
from the optimizer's ``iterations``, and the step functions scheduled in all). The simulator
is deterministic, so each run is made once per process.
"""

import tempfile
from functools import lru_cache

from simdist.training import simulate_exercise
from simdist.training.exercises import Exercise
from simdist.training.ps_training import train_on_ps
from course.answers import as_set, as_tuple, is_int
from course.choices import check_choice
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"which_failures_restore": 1, "why_the_chief_restores": 1,
              "predict_chief_restart": 2, "predict_restart_epoch": 3}

# -- exercise 1 ------------------------------------------------------------------------------

FAILURES = {
    "a": tr("worker:1 of a TF1 between-graph job", "TF1 图间复制作业中的 worker:1"),
    "b": tr("ps:0 of a TF1 between-graph job", "TF1 图间复制作业中的 ps:0"),
    "c": tr("the chief (worker:0) of a TF1 between-graph job",
            "TF1 图间复制作业中的主工作器（worker:0）"),
    "d": tr("worker:1 of a ParameterServerStrategy job", "ParameterServerStrategy 作业中的 worker:1"),
    "e": tr("ps:0 of a ParameterServerStrategy job", "ParameterServerStrategy 作业中的 ps:0"),
    "f": tr("the coordinator (chief) of a ParameterServerStrategy job",
            "ParameterServerStrategy 作业中的协调器（主工作器）"),
}
RESTORE = frozenset("bcef")
#: why each option is, or is not, in the answer
_WHY = {
    "a": tr("a TF1 worker holds no variables: it comes back, makes a new session and goes on "
            "(section 1); nobody restores", "TF1 的工作器不持有变量：它回来后新建会话接着训练"
            "（第 1 节）；谁也不恢复"),
    "b": tr("a ps holds the variables in memory: a restarted ps has none, and the chief "
            "restores the last checkpoint (section 2)", "ps 把变量放在内存里：重启的 ps 一个变量"
            "也没有，主工作器恢复最近的检查点（第 2 节）"),
    "c": tr("a restarted chief's MonitoredTrainingSession restores the latest checkpoint of "
            "checkpoint_dir although the ps kept its variables (section 3)",
            "重启的主工作器的 MonitoredTrainingSession 会恢复 checkpoint_dir 里最新的检查点，"
            "尽管 ps 保住了变量（第 3 节）"),
    "d": tr("under ParameterServerStrategy a failed worker's function is put back in the queue "
            "and runs again (lesson 10, section 3): nothing is restored",
            "在 ParameterServerStrategy 下，出故障的工作器上的函数被放回队列重新运行（第 10 课"
            "第 3 节）：不恢复任何东西"),
    "e": tr("a ps failure cancels the pending functions (CancelledError) and the coordinator "
            "restores the last checkpoint (section 5)", "ps 故障会取消待运行的函数"
            "（CancelledError），协调器恢复最近的检查点（第 5 节）"),
    "f": tr("the coordinator holds the training loop itself: the program starts again and "
            "restores the last checkpoint (BackupAndRestore with Model.fit, section 6)",
            "协调器持有训练循环本身：程序从头启动，恢复最近的检查点（Model.fit 用 "
            "BackupAndRestore，第 6 节）"),
}


def check_which(module):
    answer = module.which_failures_restore()
    letters = ", ".join(repr(letter) for letter in FAILURES)
    mine = as_set(answer, lambda v: isinstance(v, str))
    mine = None if mine is None else frozenset(v.strip().lower() for v in mine)
    if mine is None or not mine <= set(FAILURES):
        raise CheckFailed(tr(f"which_failures_restore returned {answer!r}, expected a set of "
                             f"letters among {letters}",
                             f"which_failures_restore 返回了 {answer!r}，应为 {letters} 中若干"
                             "字母组成的集合"),
                          tr("return a set such as {'a', 'd'}", "返回一个集合，例如 {'a', 'd'}"))
    if mine == RESTORE:
        return tr("a ps, the TF1 chief and the TF2 coordinator: a task whose failure loses "
                  "state that only a checkpoint holds",
                  "ps、TF1 的主工作器和 TF2 的协调器：它们出故障会丢掉只有检查点里才有的状态")
    extra, missing = sorted(mine - RESTORE), sorted(RESTORE - mine)
    first = (extra or missing)[0]
    wrong = ([tr(f"it includes {', '.join(extra)}, which need no restore",
                 f"它包含了不需要恢复的 {'、'.join(extra)}")] if extra else []) + \
        ([tr(f"it leaves out {', '.join(missing)}, which need one",
             f"它漏掉了需要恢复的 {'、'.join(missing)}")] if missing else [])
    message = tr(f"which_failures_restore returned {sorted(mine)}: "
                 + "; ".join(str(w) for w in wrong),
                 f"which_failures_restore 返回了 {sorted(mine)}："
                 + "；".join(w.zh for w in wrong))
    raise CheckFailed(message, tr(f"{first} ({FAILURES[first]}): {_WHY[first]}",
                                  f"{first}（{FAILURES[first].zh}）：{_WHY[first].zh}"))


# -- exercise 2 ------------------------------------------------------------------------------

WHY_OPTIONS = {
    "a": tr("a chief's session always restores the latest checkpoint when there is one",
            "主工作器的会话只要有检查点，总是恢复最新的那个"),
    "b": tr("the chief's failure wiped the ps's variables", "主工作器的故障抹掉了 ps 上的变量"),
    "c": tr("the global step lived on the chief and died with it",
            "全局步数存在主工作器上，随它一起丢了"),
    "d": tr("the other workers ask the restarted chief to restore",
            "其他工作器要求重启的主工作器去恢复")}
WHY_HINTS = {
    "b": tr("the ps never failed: its variables are still there, at the step the chief "
            "failed; the restore overwrites them", "ps 没有出故障：它的变量都还在，停在主工作器出故障"
            "时的那一步；是恢复把它们覆盖了"),
    "c": tr("global_step is a variable like the weights, placed on the ps by "
            "replica_device_setter", "global_step 和权重一样是变量，被 replica_device_setter "
            "放在 ps 上"),
    "d": tr("the others ask nothing: they only wait until the model is ready "
            "(recovery_wait_secs), and with a ps that kept its variables it already is",
            "其他工作器什么也不要求：它们只是等模型就绪（recovery_wait_secs），而 ps 保住了变量时"
            "模型本来就是就绪的")}


def check_why(module):
    return check_choice("why_the_chief_restores", module.why_the_chief_restores(), WHY_OPTIONS,
                        "a", WHY_HINTS,
                        tr("the chief's MonitoredTrainingSession (SessionManager."
                           "prepare_session) restores the latest checkpoint of checkpoint_dir "
                           "before it looks at the ps: it cannot tell a restart from a fresh "
                           "start, so the steps since that checkpoint are redone",
                           "主工作器的 MonitoredTrainingSession（SessionManager.prepare_session）"
                           "先恢复 checkpoint_dir 里最新的检查点，再看 ps：它分不清重启和全新"
                           "开始，所以那个检查点之后的步要重做"))


def pair_of_ints(function: str, answer, names: str, hint) -> tuple[int, int]:
    """``answer`` (what ``function`` returned) as a pair of ints, else a CheckFailed that
    names the pair's ``names`` with ``hint``."""
    mine = as_tuple(answer, 2, is_int)
    if mine is None:
        raise CheckFailed(tr(f"{function} returned {answer!r}, expected a pair of ints {names}",
                             f"{function} 返回了 {answer!r}，应为一对整数 {names}"), hint)
    return mine


# -- exercise 3 ------------------------------------------------------------------------------

#: exercise 3's job: 3 synchronous workers to step 12, a checkpoint every 4 steps
CHIEF_JOB = {"workers": 3, "mode": "sync", "steps": 12, "save_checkpoint_steps": 4}
CHIEF_FAILURE = "worker:0@9ms+2ms"


def failure_steps(run) -> list[tuple[str, int]]:
    """[(task, the global step when it failed: the highest any run had reached)]."""
    rows = []
    for event in (e for e in run.trace.instants if e.name == "task failed"):
        reached = [s for runs in run.worker_runs.values() for t, s, _ in runs if t <= event.t]
        rows.append((event.pid, max(reached, default=0)))
    return rows


@lru_cache(maxsize=None)
def chief_restart(failure: str = CHIEF_FAILURE) -> dict:
    """Exercise 3's job failing as ``failure``: the global step at the failure, the step of
    the checkpoint restored (None: none), the sessions each worker made again."""
    with tempfile.TemporaryDirectory() as folder:
        run = train_on_ps(**CHIEF_JOB, checkpoint_dir=folder, failures=[failure])
    [(_, at)] = failure_steps(run)
    restored = None if run.restored_from is None else int(run.restored_from.rsplit("-", 1)[1])
    return {"at": at, "restored": restored, "recoveries": dict(run.recoveries),
            "steps": {k: [s for _, s, _ in runs] for k, runs in run.worker_runs.items()}}


def check_chief(module):
    mine = pair_of_ints("predict_chief_restart", module.predict_chief_restart(),
                        "(restored_step, steps_redone)",
                        tr("return two numbers of steps, e.g. (0, 0)", "返回两个步数，例如 (0, 0)"))
    real = chief_restart()
    at, restored = real["at"], real["restored"]
    redone = at - restored
    if tuple(mine) == (restored, redone):
        return tr(f"the chief failed at global step {at}; restarted, it restored "
                  f"model.ckpt-{restored} and the job redid {redone} steps (sessions made "
                  f"again: {real['recoveries']})",
                  f"主工作器在全局步数 {at} 时出故障；重启后恢复了 model.ckpt-{restored}，作业重做了 "
                  f"{redone} 步（重新建会话的次数：{real['recoveries']}）")
    step, steps = mine
    every = CHIEF_JOB["save_checkpoint_steps"]
    if (step, steps) == (at, 0):
        hint = tr("a restarted chief is not a plain worker: its MonitoredTrainingSession "
                  "restores the latest checkpoint, and the global step goes back",
                  "重启的主工作器不是普通工作器：它的 MonitoredTrainingSession 会恢复最新的检查点，"
                  "全局步数随之回退")
    elif step == restored and steps != redone:
        hint = tr(f"the steps redone are those applied after the checkpoint and lost with "
                  f"the restore: from step {restored} to step {at}",
                  f"要重做的是检查点之后应用、又被恢复抹掉的步：从第 {restored} 步到第 {at} 步")
    elif step == 0:
        hint = tr(f"the chief saved a checkpoint every {every} steps: the latest one before "
                  f"step {at} is not the first", f"主工作器每 {every} 步保存一次检查点：第 {at} "
                  "步之前最新的那个不是第一个")
    elif step % every == 0 and step > at:
        hint = tr("a checkpoint after the failure was never written: the chief restores one "
                  "it saved before it failed", "故障之后的检查点根本没写出来：主工作器恢复的是它出故障"
                  "之前保存的那个")
    else:
        hint = tr(f"checkpoints are written at steps 0, {every}, {2 * every}, ...: the chief "
                  "restores the latest one before the failure",
                  f"检查点写在第 0、{every}、{2 * every}……步：主工作器恢复故障之前最新的那个")
    raise CheckFailed(
        tr(f"you predicted a restore of step {step} and {steps} steps redone; the simulated "
           f"chief restored step {restored} and {redone} steps were redone",
           f"你预测恢复第 {step} 步、重做 {steps} 步；模拟中主工作器恢复了第 {restored} 步，"
           f"重做了 {redone} 步"), hint,
        tr(f"global steps each worker's runs reached: {real['steps']}",
           f"每个工作器各次运行达到的全局步数：{real['steps']}"))


# -- exercise 4 ------------------------------------------------------------------------------

#: exercise 4's job: epochs of 4 steps (1024 examples, a global batch of 256), 6 epochs
EPOCH_JOB = {"strategy": "parameter_server", "workers": 2, "steps": 24, "global_batch": 256}
PS_FAILURE = "ps:0@1960us+200us"
STEPS_PER_EPOCH = 4


def restart_of(run) -> dict:
    """What a ParameterServerStrategy run with a ps failure shows: the epoch it started again
    at (None: no restore), the step functions scheduled, the checkpoints completed before the
    failure and the coordinator's events."""
    train = [i for i in run.trace.instants if i.pid == "chief:0" and i.lane == "train"]
    failed = next((i.t for i in run.trace.instants if i.name == "task failed"), None)
    again = next((i for i in train if i.name.startswith("restored: start again")), None)
    return {"epoch": None if again is None else int(again.name.rsplit(" ", 1)[1]),
            "iterations": None if again is None else again.args["iterations"],
            "functions": run.metadata["functions"],
            "saved": [i.name.removeprefix("checkpoint after ") for i in train
                      if i.name.startswith("checkpoint after") and failed is not None
                      and i.t <= failed],
            "events": [(round(i.t / 1000, 1), i.name) for i in train]}


@lru_cache(maxsize=None)
def epoch_restart(failure: str = PS_FAILURE) -> dict:
    """``restart_of`` exercise 4's job failing as ``failure``."""
    return restart_of(simulate_exercise(Exercise(**EPOCH_JOB, failures=(failure,))))


def check_epoch(module):
    return verify_epoch(module.predict_restart_epoch(), epoch_restart())


def verify_epoch(answer, real: dict) -> str:
    """``predict_restart_epoch``'s answer against ``restart_of`` a run: the pass message, or a
    CheckFailed with a hint."""
    mine = pair_of_ints("predict_restart_epoch", answer,
                        "(starting_epoch, functions_scheduled)",
                        tr("return an epoch and a number of functions, e.g. (0, 24)",
                           "返回一个周期和一个函数个数，例如 (0, 24)"))
    epoch, functions = mine
    steps = EPOCH_JOB["steps"]
    if (epoch, functions) == (real["epoch"], real["functions"]):
        return tr(f"the coordinator starts again at epoch {epoch} (iterations "
                  f"{real['iterations']} // {STEPS_PER_EPOCH}) and schedules {functions} step "
                  "functions in all", f"协调器从第 {epoch} 个周期重新开始（iterations "
                  f"{real['iterations']} // {STEPS_PER_EPOCH}），一共调度 {functions} 个步函数")
    mid = real["epoch"] + 1  # the epoch whose checkpoint the failure cut short
    if epoch == mid:
        hint = tr(f"epoch {mid - 1}'s checkpoint was still being saved (its reads of the "
                  f"variables were on their way from ps:0) when the ps failed: it never "
                  f"completed, so the last checkpoint is epoch {mid - 2}'s",
                  f"ps 出故障时第 {mid - 1} 个周期的检查点还在保存（从 ps:0 读变量的请求还在路上）："
                  f"它没有完成，所以最近的检查点是第 {mid - 2} 个周期的")
    elif epoch != real["epoch"]:
        hint = tr(f"the starting epoch is the restored checkpoint's iterations // "
                  f"{STEPS_PER_EPOCH} (TF's tutorial): find the last checkpoint complete "
                  "before the failure", f"起始周期是恢复的检查点的 iterations // "
                  f"{STEPS_PER_EPOCH}（TF 教程的做法）：找出故障之前最后一个保存完成的检查点")
    elif functions == steps:
        hint = tr("the functions cancelled by the failure and the epochs redone are "
                  "scheduled again: count every schedule call",
                  "被故障取消的函数和重做的周期都要再调度一次：每次 schedule 调用都要算")
    elif functions == steps + (mid - real["epoch"]) * STEPS_PER_EPOCH:
        hint = tr(f"the coordinator had already scheduled epoch {mid}'s functions (it saves "
                  "a checkpoint while the next epoch runs): they were cancelled, and count too",
                  f"协调器已经调度了第 {mid} 个周期的函数（它一边保存检查点一边跑下一个周期）：它们被取消了，"
                  "也要算")
    else:
        hint = tr(f"one function per step: {steps}, plus the {STEPS_PER_EPOCH} of every epoch "
                  "scheduled before the failure and scheduled again after the restore",
                  f"每步一个函数：{steps} 个，再加上故障前已调度、恢复后又调度一遍的每个周期的 "
                  f"{STEPS_PER_EPOCH} 个")
    raise CheckFailed(
        tr(f"you predicted epoch {epoch} and {functions} functions; the coordinator started "
           f"again at epoch {real['epoch']} and scheduled {real['functions']}",
           f"你预测第 {epoch} 个周期、{functions} 个函数；协调器从第 {real['epoch']} 个周期重新开始，"
           f"调度了 {real['functions']} 个"), hint,
        tr(f"checkpoints completed before the failure: {', '.join(real['saved'])}; the "
           f"coordinator's events (us): {real['events']}",
           f"故障之前完成的检查点：{'、'.join(real['saved'])}；协调器的事件（微秒）："
           f"{real['events']}"))


CHECKS = [
    Check("which", "which_failures_restore",
          tr("the failures that need a restore from a checkpoint", "需要从检查点恢复的故障"),
          check_which),
    Check("why", "why_the_chief_restores",
          tr("why a restarted chief restores", "重启的主工作器为什么要恢复"), check_why),
    Check("chief", "predict_chief_restart",
          tr("where training resumes after the chief fails", "主工作器出故障后训练从哪里继续"),
          check_chief),
    Check("epoch", "predict_restart_epoch",
          tr("the epoch a ps failure restarts from, and the functions", "ps 故障后重新开始的周期和函数数"),
          check_epoch),
]
