"""Lesson 14, Measured speed-ups: the checks of ``simdist check 14``.

The global batch that keeps eight GPUs busy (simulated data-parallel epochs of ResNet-50 on
one PCIe machine), why logical CPU devices do not cut an epoch (a checked "why"), the
learning rate for a larger global batch (simdist's MirroredStrategy training, loss per
example seen against the small batch's), and the NIC bytes and step time of VGG-16 on GPUs
grouped on machines (``data_parallel``'s hierarchical all-reduce). The simulator is
deterministic, so each run is made once per process.
"""

from functools import lru_cache

import numpy as np

from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.models.catalog import zoo_model
from simdist.sim.scheduler import simulate
from simdist.training import simulate_exercise
from simdist.training.exercises import Exercise
from simdist.training.programs.data_parallel import train
from course.answers import as_tuple, is_int, is_number
from course.choices import check_choice
from course.lessons import Check, CheckFailed, tr

DIFFICULTY = {"choose_global_batch": 2, "why_logical_devices": 1, "scale_learning_rate": 1,
              "predict_grouped": 3}


# -- simulated data-parallel runs ------------------------------------------------------------

def data_parallel(model: str, machines: int, per_machine: int, batch: int, system: str,
                  algorithm: str = "ring", steps: int = 2, trace: bool = False,
                  transport=None):
    """``simdist run data_parallel``: ``machines`` x ``per_machine`` GPUs (a worker task
    each), ``batch`` examples per GPU, the gradients all-reduced by ``algorithm`` after the
    backward pass (MultiWorkerMirroredStrategy's step, sizes only)."""
    net = zoo_model(model)
    hardware = Hardware.from_catalog(HardwareCatalog.default(), system,
                                     Layout(tasks_per_machine=per_machine))
    return simulate({"worker": machines * per_machine},
                    lambda ctx: train(ctx, net.params, steps, batch, algorithm,
                                      flops_per_example=net.training_flops),
                    hardware=hardware, trace=trace, transport=transport)


def step_of(result) -> int:
    """The last step's time (ns) of a data_parallel run: every worker ends it together."""
    ends = next(iter(result.returns.values()))
    return ends[-1] - ends[-2]


def nic_bytes(result, steps: int = 2) -> float:
    """Bytes machine 0's NIC sends per step (its egress spans)."""
    return sum(s.args.get("bytes", 0) for s in result.trace.spans
               if s.pid == "machine:0 NIC" and s.lane == "egress") / steps


#: section 1 and exercise 1: ResNet-50 on one machine of 8 GTX 1080 Ti on PCIe, an epoch of
#: 50,000 images, the global batch cut evenly over the GPUs
EPOCH = {"model": "resnet50", "system": "gtx1080ti-pcie-10gbe", "examples": 50_000}
GPUS = 8
TARGET = 7.0  # the speed-up exercise 1 asks for
DRAWN = (32, 128, 512)  # the global batches section 1 draws
CANDIDATES = (32, 64, 128, 256, 512, 1024, 2048)


@lru_cache(maxsize=None)
def epoch_ns(global_batch: int, gpus: int) -> int:
    """Simulated time of an epoch of ``EPOCH`` on ``gpus`` GPUs of one machine."""
    step = step_of(data_parallel(EPOCH["model"], 1, gpus, global_batch // gpus,
                                 EPOCH["system"]))
    return step * -(-EPOCH["examples"] // global_batch)


def speedup(global_batch: int, gpus: int) -> float:
    """One GPU's epoch time over ``gpus`` GPUs' at the same global batch."""
    return epoch_ns(global_batch, 1) / epoch_ns(global_batch, gpus)


# -- exercise 1 ------------------------------------------------------------------------------

def check_global_batch(module):
    answer = module.choose_global_batch()
    if not is_int(answer) or answer not in CANDIDATES:
        raise CheckFailed(tr(f"choose_global_batch returned {answer!r}, expected one of "
                             f"{', '.join(map(str, CANDIDATES))}",
                             f"choose_global_batch 返回了 {answer!r}，应为 "
                             f"{', '.join(map(str, CANDIDATES))} 之一"),
                          tr("return a global batch, an int such as 64",
                             "返回一个全局批次，一个整数，例如 64"))
    reached = {g: speedup(g, GPUS) for g in CANDIDATES}
    right = min(g for g, s in reached.items() if s >= TARGET)
    table = ", ".join(f"{g}: {s:.2f}x" for g, s in reached.items())
    if answer == right:
        return tr(f"global batch {right}: 8 GPUs run an epoch {reached[right]:.2f}x faster "
                  f"than one (at {right // 2}: {reached[right // 2]:.2f}x)",
                  f"全局批次 {right}：8 个 GPU 跑一个 epoch 比一个 GPU 快 {reached[right]:.2f} 倍"
                  f"（{right // 2} 时：{reached[right // 2]:.2f} 倍）")
    if answer > right:
        hint = tr(f"a smaller global batch already reaches {TARGET:g}x: the all-reduce costs "
                  f"the same each step while each GPU's compute grows with its share of the "
                  f"batch, so the lost share falls as 1/batch; from 128's 6.77x the all-reduce "
                  f"costs about 0.18 of 8 GPUs' compute at 128, 0.09 at 256",
                  f"更小的全局批次已经能达到 {TARGET:g} 倍：每步的 all-reduce 开销不变，而每个 "
                  f"GPU 的计算随它分到的批次增长，所以损失的比例按 1/批次 下降；由 128 时的 "
                  f"6.77 倍可知，all-reduce 在 128 时约占 8 个 GPU 计算的 0.18，256 时约 0.09")
    else:
        hint = tr(f"at {answer} the 8 GPUs reach only {reached[answer]:.2f}x: each step's "
                  f"all-reduce is a larger share of a step the smaller each GPU's batch is",
                  f"{answer} 时 8 个 GPU 只有 {reached[answer]:.2f} 倍：每个 GPU 的批次越小，"
                  f"每步的 all-reduce 在一步里占的比例越大")
    raise CheckFailed(tr(f"global batch {answer}: the smallest that gives {TARGET:g}x on "
                         f"{GPUS} GPUs is {right}",
                         f"全局批次 {answer}：在 {GPUS} 个 GPU 上达到 {TARGET:g} 倍的最小批次是 "
                         f"{right}"), hint,
                      tr(f"speed-up on 8 GPUs by global batch: {table}",
                         f"8 个 GPU 的加速比（按全局批次）：{table}"))


# -- exercise 2 ------------------------------------------------------------------------------

WHY_OPTIONS = {
    "a": tr("the logical devices share the machine's two cores: their replicas' passes take "
            "turns, and the copies and the reduction come on top",
            "逻辑设备共用机器的两个核：各副本的计算轮流进行，复制和归约还要另算"),
    "b": tr("the all-reduce crosses the network between the devices",
            "all-reduce 要在设备之间走网络"),
    "c": tr("MirroredStrategy trains on the first device only when there is no GPU",
            "没有 GPU 时 MirroredStrategy 只在第一个设备上训练"),
    "d": tr("the global batch is not cut evenly: one replica gets most of it",
            "全局批次没有均分：一个副本分到了大部分"),
}
WHY_HINTS = {
    "b": tr("logical devices are one process's: their tensors never leave its memory, no "
            "network is involved (the multi-worker cluster's loopback is another matter)",
            "逻辑设备属于同一个进程：张量从不离开它的内存，不经过网络（多工作器集群的回环是另一"
            "回事）"),
    "c": tr("num_replicas_in_sync is 2 and 4 in section 2: every logical device runs a replica",
            "第 2 节里 num_replicas_in_sync 是 2 和 4：每个逻辑设备都运行一个副本"),
    "d": tr("MirroredStrategy cuts a global batch of 64 into two slices of 32 (lesson 02, "
            "split_batch): the replicas' shares are even",
            "MirroredStrategy 把 64 的全局批次切成两个 32（第 02 课 split_batch）：各副本份额均等"),
}


def check_why(module):
    return check_choice("why_logical_devices", module.why_logical_devices(), WHY_OPTIONS, "a",
                        WHY_HINTS,
                        tr("a logical CPU is a name for a share of the same cores, not a "
                           "device of its own: 2 of them on 2 cores do the same FLOPs in "
                           "the same time, plus the copies and the reduction, so the epoch "
                           "does not get shorter; separate devices (the simulated GPUs) run "
                           "their passes at the same time",
                           "逻辑 CPU 只是同一组核的一个名字，不是独立的设备：2 个核上的 2 个逻辑"
                           "设备用同样的时间做同样的浮点运算，还要加上复制和归约，所以 epoch "
                           "不会变短；独立的设备（模拟的 GPU）才会同时计算"))


# -- exercise 3 ------------------------------------------------------------------------------

#: the small batch: softmax regression on the digits, 2 replicas of 32, learning rate 0.1
BASE = {"strategy": "mirrored", "model": "softmax", "dataset": "digits",
        "devices_per_worker": 2, "global_batch": 64, "learning_rate": 0.1}
REPLICAS = 8  # the large batch: 8 replicas of the same 32 examples each
EXAMPLES_SEEN = 1792  # 28 steps of 64, 7 of 256


@lru_cache(maxsize=None)
def losses(global_batch: int, replicas: int, learning_rate: float) -> tuple:
    """The loss at every 256 examples seen, of softmax regression on ``replicas`` replicas
    trained with that global batch and learning rate."""
    exercise = Exercise(**{**BASE, "devices_per_worker": replicas,
                           "global_batch": global_batch, "learning_rate": learning_rate,
                           "steps": EXAMPLES_SEEN // global_batch})
    every = 256 // global_batch
    return tuple(float(v) for v in simulate_exercise(exercise, trace=False).losses[::every])


def check_learning_rate(module):
    answer = module.scale_learning_rate()
    if not is_number(answer) or not 0 < answer <= 100:
        raise CheckFailed(tr(f"scale_learning_rate returned {answer!r}, expected a learning "
                             "rate, a number > 0", f"scale_learning_rate 返回了 {answer!r}，"
                             "应为一个大于 0 的学习率"),
                          tr("return a float such as 0.1", "返回一个浮点数，例如 0.1"))
    lr = BASE["learning_rate"]
    big = BASE["global_batch"] // BASE["devices_per_worker"] * REPLICAS
    right = lr * big / BASE["global_batch"]
    small = np.array(losses(BASE["global_batch"], BASE["devices_per_worker"], lr))
    yours = np.array(losses(big, REPLICAS, float(answer)))
    gap = float(np.abs(yours - small).mean())
    detail = tr(f"loss every 256 examples: batch 64 at {lr:g} {np.round(small, 3).tolist()}; "
                f"batch {big} at {answer:g} {np.round(yours, 3).tolist()} (mean gap {gap:.3f})",
                f"每 256 个样本的损失：批次 64、学习率 {lr:g} {np.round(small, 3).tolist()}；批次 "
                f"{big}、学习率 {answer:g} {np.round(yours, 3).tolist()}（平均差 {gap:.3f}）")
    if abs(answer - right) <= 0.05 * right:
        return tr(f"learning rate {answer:g} for a global batch of {big}: its loss follows "
                  f"the batch of 64's example for example (mean gap {gap:.3f})",
                  f"全局批次 {big} 用学习率 {answer:g}：它的损失按样本数紧跟批次 64 的曲线"
                  f"（平均差 {gap:.3f}）")
    if abs(answer - lr) <= 0.05 * lr:
        hint = tr(f"the same rate: a batch {big // 64}x larger averages its gradient over "
                  f"{big // 64}x the examples and takes {big // 64}x fewer steps an epoch, each "
                  f"no longer: the loss falls behind per example seen",
                  f"学习率不变：批次大 {big // 64} 倍，梯度在 {big // 64} 倍的样本上平均，每个 "
                  f"epoch 的步数少 {big // 64} 倍，而每步走得并不更远：按样本数算损失落后了")
    elif abs(answer - lr * (big / 64) ** 0.5) <= 0.05 * right:
        hint = tr("that is the square-root rule (for Adam-like optimizers and noise "
                  "arguments); for SGD, Goyal et al. scale linearly: k times the batch, k "
                  "times the rate", "那是平方根规则（用于 Adam 之类的优化器和噪声论证）；对 SGD，"
                  "Goyal 等人按线性缩放：批次乘 k，学习率也乘 k")
    elif abs(answer - lr * REPLICAS) <= 0.05 * lr * REPLICAS:
        hint = tr(f"scale by how much the global batch grew (64 to {big}), not by the number "
                  f"of replicas: the batch of 64 already had {BASE['devices_per_worker']}",
                  f"按全局批次增大的倍数（64 到 {big}）缩放，而不是按副本数：64 的批次本来就有 "
                  f"{BASE['devices_per_worker']} 个副本")
    elif answer < lr:
        hint = tr("a larger batch gives a less noisy gradient: the rate goes up with it, not "
                  "down", "更大的批次给出噪声更小的梯度：学习率应随之调大，而不是调小")
    else:
        hint = tr(f"the linear scaling rule: the rate times the global batch's growth, "
                  f"{lr:g} x {big}/64", f"线性缩放规则：学习率乘以全局批次增大的倍数，"
                  f"{lr:g} x {big}/64")
    raise CheckFailed(tr(f"learning rate {answer:g} for a global batch of {big}: the linear "
                         f"scaling rule gives {right:g}",
                         f"全局批次 {big} 用学习率 {answer:g}：线性缩放规则给出 {right:g}"),
                      hint, detail)


# -- exercise 4 ------------------------------------------------------------------------------

#: section 4 and exercise 4: VGG-16, 32 images per GPU, V100s on NVLink, 25 GbE between
#: machines, the hierarchical all-reduce; the lesson draws 8 x 1, 2 x 4 and 1 x 8
GROUPED = {"model": "vgg16", "batch": 32, "system": "v100-nvlink2-25gbe",
           "algorithm": "hierarchical"}
ASKED = (4, 2)  # machines x GPUs per machine


def grouped_of(result) -> dict:
    """What exercise 4 reads from a run: machine 0's NIC megabytes and the step, in ms."""
    return {"nic_mb": nic_bytes(result) / 1e6, "step_ms": step_of(result) / 1e6}


@lru_cache(maxsize=None)
def grouped(machines: int = ASKED[0], per_machine: int = ASKED[1]) -> dict:
    """``grouped_of`` GROUPED on ``machines`` x ``per_machine`` GPUs."""
    return grouped_of(data_parallel(GROUPED["model"], machines, per_machine, GROUPED["batch"],
                                    GROUPED["system"], GROUPED["algorithm"], trace=True))


def check_grouped(module):
    return verify_grouped(module.predict_grouped(), grouped())


def verify_grouped(answer, real: dict) -> str:
    """The learner's ``predict_grouped()`` answer against a run's ``grouped_of``."""
    mine = as_tuple(answer, 2, is_number)
    if mine is None:
        raise CheckFailed(tr(f"predict_grouped returned {answer!r}, expected a pair of numbers "
                             "(nic_mb, step_ms)", f"predict_grouped 返回了 {answer!r}，应为一对"
                             "数 (nic_mb, step_ms)"),
                          tr("return two numbers, e.g. (500.0, 600.0)",
                             "返回两个数，例如 (500.0, 600.0)"))
    mb, ms = (float(v) for v in mine)
    gradients = zoo_model(GROUPED["model"]).params * 4 / 1e6
    machines = ASKED[0]
    ok_mb = abs(mb - real["nic_mb"]) <= 0.02 * real["nic_mb"]
    ok_ms = abs(ms - real["step_ms"]) <= 0.05 * real["step_ms"]
    shown = tr(f"machine 0's NIC sends {real['nic_mb']:.0f} MB a step, and a step takes "
               f"{real['step_ms']:.1f} ms",
               f"machine 0 的网卡每步发送 {real['nic_mb']:.0f} MB，每步 {real['step_ms']:.1f} ms")
    if ok_mb and ok_ms:
        return shown
    if not ok_mb:
        ratio = mb / gradients
        if abs(ratio - 2 * 7 / 8) < 0.03:
            hint = tr("that is 8 machines of one GPU: grouped, only the machines' leaders "
                      "join the ring between machines, a ring of 4",
                      "那是 8 台各一个 GPU 的机器：分组后只有各机器的首领加入机器之间的环，"
                      "环上是 4 个成员")
        elif abs(ratio - 1) < 0.03 or abs(ratio - 2) < 0.03:
            hint = tr(f"a ring of p members sends 2(p-1)/p times the gradients from each; "
                      f"here p = {machines} machines", f"p 个成员的环每个成员发送梯度的 "
                      f"2(p-1)/p 倍；这里 p = {machines} 台机器")
        elif abs(ratio - 2 * (machines - 1) / machines / 2) < 0.03:
            hint = tr("each machine's leader sends the whole machine's reduced gradients, "
                      "not a GPU's half", "每台机器的首领发送整台机器归约后的梯度，不是一个 GPU"
                      "的一半")
        else:
            hint = tr(f"the gradients are {gradients:.0f} MB (float32, 4 bytes a "
                      f"parameter); the ring between the {machines} leaders sends 2(p-1)/p "
                      "of them from each",
                      f"梯度有 {gradients:.0f} MB（float32，每个参数 4 字节）；{machines} 个首领"
                      "之间的环让每个成员发送其中的 2(p-1)/p")
    else:
        hint = tr("the step is the compute (the 1 x 8 run's step, nothing crosses a NIC), "
                  "plus the bytes a NIC sends at 25 GbE (3.125 GB/s): nothing hides the "
                  "network here", "一步是计算（1 x 8 那次的一步，不经过网卡），加上网卡以 25 GbE"
                  "（3.125 GB/s）发送那些字节的时间：这里没有什么能掩盖网络")
    raise CheckFailed(tr(f"you predicted {mb:.0f} MB and {ms:.1f} ms; {shown}",
                         f"你预测 {mb:.0f} MB 和 {ms:.1f} ms；{shown.zh}"), hint,
                      tr("within 2% for the bytes and 5% for the step",
                         "字节数误差在 2% 以内，步长在 5% 以内"))


CHECKS = [
    Check("global_batch", "choose_global_batch",
          tr("the global batch that keeps 8 GPUs busy", "让 8 个 GPU 保持忙碌的全局批次"),
          check_global_batch),
    Check("why", "why_logical_devices",
          tr("why logical devices do not shorten an epoch", "为什么逻辑设备不会缩短 epoch"),
          check_why),
    Check("learning_rate", "scale_learning_rate",
          tr("the learning rate for a larger global batch", "更大全局批次的学习率"),
          check_learning_rate),
    Check("grouped", "predict_grouped",
          tr("NIC bytes and step of GPUs grouped on machines",
             "GPU 分组到机器上时的网卡字节和步长"), check_grouped),
]
