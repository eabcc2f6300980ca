"""Lesson 07, Parameter servers: the checks of ``simdist check 07``.

They run the learner's answers against the simulator (``simdist.graph``): the graph
``SyncReplicasOptimizer`` builds (its token ``Fill``), between-graph synchronous training with
random stragglers (``simdist.training.ps_training.train_on_ps``), and a ps that fails while the
chief saves checkpoints.
"""

import tempfile

import numpy as np

import simdist.graph as sim
from simdist.training.ps_training import train_on_ps
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"tokens_per_step": 1, "choose_replicas_to_aggregate": 2, "resume_step": 2}

# -- exercise 1 ------------------------------------------------------------------------------

TOKEN_CASES = ((3, 3), (4, 3), (2, 3), (5, 1))


def simulated_tokens(total, aggregate) -> int:
    """The number of tokens the simulated SyncReplicasOptimizer's sync_op enqueues."""
    graph = sim.Graph()
    with graph.as_default():
        step = sim.train.get_or_create_global_step()
        w = sim.Variable(np.zeros(2, np.float32), name="w")
        opt = sim.train.SyncReplicasOptimizer(sim.train.GradientDescentOptimizer(0.1),
                                              replicas_to_aggregate=aggregate,
                                              total_num_replicas=total)
        opt.minimize(sim.reduce_sum(sim.square(w)), global_step=step)
    fills = [op for op in graph.get_operations() if op.type == "Fill"]
    return int(fills[0].outputs[0].shape[0])


def check_tokens(module):
    for total, aggregate in TOKEN_CASES:
        mine, real = module.tokens_per_step(total, aggregate), simulated_tokens(total, aggregate)
        if mine != real:
            hint = (tr("every replica takes one token per step, backup workers too",
                       "每个副本每步都取一个令牌，备份工作器也一样")
                    if real == total else
                    tr("the chief waits for replicas_to_aggregate gradients: there must be a "
                       "token for each of them", "主节点要等 replicas_to_aggregate 个梯度："
                       "每个梯度都得有一个令牌"))
            raise CheckFailed(f"tokens_per_step({total}, {aggregate}) returned {mine!r}, "
                              f"the simulated optimizer enqueues {real}", hint,
                              tr("look at SyncReplicasOptimizer's _tokens_per_step",
                                 "看 SyncReplicasOptimizer 的 _tokens_per_step"))
    return f"right for {len(TOKEN_CASES)} configurations"


# -- exercise 2 ------------------------------------------------------------------------------

STRAGGLERS = {"workers": 5, "steps": 20, "stall_us": 6000, "stall_probability": 0.15}
STEP_MS_AT_MOST = 2.5


def ms_per_step(aggregate) -> float:
    """The average time of a global step with ``STRAGGLERS`` and this replicas_to_aggregate."""
    run = train_on_ps(mode="sync", replicas_to_aggregate=aggregate, **STRAGGLERS)
    return run.trained_ns / 1e6 / run.global_step


def check_aggregate(module):
    mine = module.choose_replicas_to_aggregate()
    workers = STRAGGLERS["workers"]
    if isinstance(mine, bool) or not isinstance(mine, int) or not 1 <= mine <= workers:
        raise CheckFailed(f"choose_replicas_to_aggregate returned {mine!r}, expected an int "
                          f"1..{workers}", tr("return R, the gradients each step averages",
                                              "返回 R：每一步平均的梯度个数"))
    took = ms_per_step(mine)
    if took > STEP_MS_AT_MOST:
        raise CheckFailed(f"with replicas_to_aggregate={mine} a step takes {took:.2f} ms "
                          f"(at most {STEP_MS_AT_MOST} wanted)",
                          tr("a step waits for its R-th gradient: the more of the five it "
                             "waits for, the likelier one of them straggles",
                             "一步要等到第 R 个梯度：等的越多，越可能碰上掉队者"),
                          tr("run backup_worker_sweep(workers=5, backups=(0, 1, 2), steps=20, "
                             "stall_us=6000, stall_probability=0.15)",
                             "运行 backup_worker_sweep(workers=5, backups=(0, 1, 2), steps=20, "
                             "stall_us=6000, stall_probability=0.15)"))
    if mine < workers and ms_per_step(mine + 1) <= STEP_MS_AT_MOST:
        raise CheckFailed(f"replicas_to_aggregate={mine + 1} also keeps a step within "
                          f"{STEP_MS_AT_MOST} ms and averages more gradients",
                          tr("as few backup workers as the time allows: each one is a "
                             "gradient thrown away every step",
                             "在时间允许的前提下尽量少用备份工作器：每个备份每步都丢掉一个梯度"))
    return f"{mine} gradients per step: {took:.2f} ms a step"


# -- exercise 3 ------------------------------------------------------------------------------

#: (save_checkpoint_steps, the simulated time of the ps failure in us)
FAILURES = ((3, 8000), (2, 8000), (5, 8000), (4, 12000))


def restored_step(save_every, at_us):
    """Run 3 synchronous workers to step 12 with a ps failure at ``at_us``: (the global
    step when it failed, the step of the checkpoint the chief restored)."""
    with tempfile.TemporaryDirectory() as folder:
        run = train_on_ps(workers=3, mode="sync", steps=12, checkpoint_dir=folder,
                          save_checkpoint_steps=save_every,
                          failures=[f"ps:0@{at_us}us+1ms"])
    at_failure = max(step for runs in run.worker_runs.values() for t, step, _ in runs
                     if t <= at_us * 1000)
    return at_failure, int(run.restored_from.rsplit("-", 1)[1])


def check_resume(module):
    for save_every, at_us in FAILURES:
        at_failure, restored = restored_step(save_every, at_us)
        mine = module.resume_step(save_every, at_failure)
        if mine != restored:
            hint = (tr("the variables died with the ps: only a checkpoint brings them back",
                       "变量随参数服务器一起丢失了：只有检查点能把它们找回来")
                    if mine == at_failure else
                    tr("the chief restores the newest checkpoint written before the failure",
                       "主节点恢复的是故障之前写下的最新检查点"))
            raise CheckFailed(f"resume_step({save_every}, {at_failure}) returned {mine!r}; "
                              f"the simulated chief restored the checkpoint of step "
                              f"{restored}", hint,
                              tr("checkpoints are written at steps 0, save_every, "
                                 "2 * save_every, ...", "检查点写在第 0、save_every、"
                                 "2 * save_every ... 步"))
    return f"right for {len(FAILURES)} failures"


CHECKS = [
    Check("tokens", "tokens_per_step",
          tr("tokens after each step", "每步之后的令牌数"), check_tokens),
    Check("backups", "choose_replicas_to_aggregate",
          tr("backup workers against stragglers", "用备份工作器对付掉队者"), check_aggregate),
    Check("resume", "resume_step",
          tr("where training resumes after a ps failure", "参数服务器故障后训练从哪一步继续"),
          check_resume),
]
