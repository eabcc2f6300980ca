# long file: three exercises' checks, each message and hint in English and Chinese
"""Lesson 02, One machine, many devices: the checks that ``simdist check 02`` runs.

The learner's ``split_batch`` is compared with TF's rule (``simdist.distribute.input_lib.split_global_batch``);
``replica_step`` runs inside simdist's OneDeviceStrategy, MirroredStrategy (1 to 4 replicas)
and CentralStorageStrategy on batches that do not split evenly, and every run must end with
the weights of the default strategy (one device, the whole batch); ``predict_step_bytes`` is
compared with the bytes the simulator moves in one step of each strategy;
``predict_reported_loss`` with the loss a simulated MirroredStrategy reports when its replicas
add an L2 penalty, scaled four ways.
"""

import functools
import warnings
from collections import Counter

import numpy as np

from simdist import Hardware, HardwareCatalog, Layout, simulate
from simdist.collectives import ReduceOp
from simdist.distribute.input_lib import split_global_batch
from simdist.training.data import classification
from simdist.distribute import (CentralStorageStrategy, HierarchicalCopyAllReduce,
                                MirroredStrategy, NcclAllReduce, OneDeviceStrategy, PerReplica,
                                ReductionToOneDevice, Strategy, compute_average_loss,
                                scale_regularization_loss)
from course.lang import join
from course.lessons import Check, CheckFailed, tr

from simdist.training.models import make_model
from simdist.hardware.units import format_bytes

DIFFICULTY = {"split_batch": 1, "replica_step": 2, "predict_step_bytes": 2,
              "predict_reported_loss": 2}

# -- exercise 1: split_batch ------------------------------------------------------------------

#: (global batch, replicas): even, uneven, empty replicas, one replica, more replicas than
#: examples
SPLITS = ((8, 4), (7, 4), (6, 4), (10, 4), (1, 4), (5, 5), (3, 1), (13, 3), (64, 8), (2, 3))


def _batch(b: int):
    x = np.arange(b * 3, dtype=np.float32).reshape(b, 3)
    y = np.arange(b, dtype=np.int32)
    return x, y


def verify_split(split_batch) -> str:
    """The learner's split gives TF's sizes, consecutive slices, every example once."""
    for b, n in SPLITS:
        x, y = _batch(b)
        parts = split_batch(x, y, n)
        where = tr(f"split_batch(x, y, {n}) with a global batch of {b}",
                   f"全局批次为 {b} 时的 split_batch(x, y, {n})")
        if not isinstance(parts, (list, tuple)) or len(parts) != n:
            got = len(parts) if isinstance(parts, (list, tuple)) else type(parts).__name__
            raise CheckFailed(tr(f"{where} returned {got} parts, expected a list of {n} "
                                 "(x_r, y_r) pairs",
                                 f"{where.zh} 返回了 {got} 部分，应为 {n} 对 (x_r, y_r) 组成的列表"),
                              tr("return one (x_r, y_r) pair per replica, even when a replica "
                                 "gets no examples",
                                 "每个副本返回一对 (x_r, y_r)，即使某个副本没有分到样本"))
        want = split_global_batch(b, n)
        sizes = []
        for r, part in enumerate(parts):
            if not (isinstance(part, (list, tuple)) and len(part) == 2):
                raise CheckFailed(tr(f"{where}: part {r} is {part!r:.60}, not an (x_r, y_r) pair",
                                     f"{where.zh}：第 {r} 部分是 {part!r:.60}，不是一对 (x_r, y_r)"),
                                  tr("each part is a pair of numpy arrays: (x[a:b], y[a:b])",
                                     "每一部分是一对 numpy 数组：(x[a:b], y[a:b])"))
            xr, yr = (np.asarray(v) for v in part)
            if len(xr) != len(yr):
                raise CheckFailed(tr(f"{where}: replica {r} got {len(xr)} inputs and {len(yr)} "
                                     "targets", f"{where.zh}：副本 {r} 拿到 {len(xr)} 个输入和 "
                                     f"{len(yr)} 个目标"),
                                  tr("cut x and y at the same places", "在相同的位置切分 x 和 y"))
            if xr.shape[1:] != x.shape[1:]:
                raise CheckFailed(tr(f"{where}: replica {r}'s x has shape {xr.shape}, expected "
                                     f"(k, {x.shape[1]})",
                                     f"{where.zh}：副本 {r} 的 x 形状是 {xr.shape}，应为 "
                                     f"(k, {x.shape[1]})"),
                                  tr("slice the examples (the first axis) only", "只沿样本维（第一个轴）切分"),
                                  tr("an empty replica batch is x[b:b], of shape (0, features)",
                                     "空的副本批次是 x[b:b]，形状为 (0, features)"))
            sizes.append(len(xr))
        if sizes != want:
            raise CheckFailed(tr(f"{where}: replica batch sizes {sizes}, but TensorFlow gives "
                                 f"{want}", f"{where.zh}：各副本批次大小是 {sizes}，但 "
                                 f"TensorFlow 给出 {want}"), *_split_hint(sizes, want, b, n))
        got_x = np.concatenate([np.asarray(p[0]) for p in parts])
        got_y = np.concatenate([np.asarray(p[1]) for p in parts])
        if not (np.array_equal(got_x, x) and np.array_equal(got_y, y)):
            raise CheckFailed(tr(f"{where}: the sizes are right, but the replicas' examples, "
                                 "joined in replica order, are not the global batch in its order",
                                 f"{where.zh}：大小正确，但把各副本的样本按副本顺序拼起来，"
                                 "不是按原顺序的全局批次"),
                              tr("each replica gets consecutive examples, in order",
                                 "每个副本按顺序拿到连续的样本"),
                              tr("replica r gets x[r*k:(r+1)*k] with k = ceil(B / N), and y cut "
                                 "the same way",
                                 "副本 r 拿到 x[r*k:(r+1)*k]，其中 k = ceil(B / N)，y 同样切分"))
    return tr("TF's sizes for " + ", ".join(f"{b} over {n}" for b, n in SPLITS[:5]) + ", ...",
              "与 TF 的大小一致：" + "，".join(f"{b} 分给 {n}" for b, n in SPLITS[:5])
              + "，……")


def _split_hint(sizes, want, b, n) -> tuple:
    if sum(sizes) != b:
        return (tr(f"the sizes add up to {sum(sizes)}, not {b}: every example goes to exactly "
                   "one replica",
                   f"各副本大小之和是 {sum(sizes)} 而不是 {b}：每个样本恰好分给一个副本"), "")
    if sorted(sizes, reverse=True) == sizes and max(sizes) - min(sizes) <= 1:
        return (tr("that is np.array_split's rule (spread the remainder), not TensorFlow's",
                   "这是 np.array_split 的规则（把余数摊开），不是 TensorFlow 的规则"),
                tr("TensorFlow gives every replica ceil(B / N) examples in turn until the "
                   "batch runs out, so the last replicas get fewer or none: 6 over 4 is "
                   "[2, 2, 2, 0]",
                   "TensorFlow 依次给每个副本 ceil(B / N) 个样本，直到批次用完，所以最后几个副本"
                   "拿得更少甚至为 0：6 个样本分给 4 个副本是 [2, 2, 2, 0]"))
    return (tr("every replica gets the same number of examples until the batch runs out",
               "每个副本拿到同样多的样本，直到批次用完"),
            tr("k = ceil(B / N) each, replica 0 first: the last replicas get what is left, "
               "possibly 0", "每个 k = ceil(B / N)，从副本 0 开始：最后几个副本拿剩下的，可能为 0"))


def check_split(ex) -> str:
    return verify_split(ex.split_batch)


# -- exercise 2: replica_step inside the strategies --------------------------------------------

SEED = 3
LEARNING_RATE = 0.5
#: the global batch of every step: even, uneven (10 over 4 is 3, 3, 3, 1), and partial last
#: batches with empty replicas (1 over 4 is 1, 0, 0, 0)
BATCH_SIZES = (8, 10, 7, 12, 3, 1, 16)
TOLERANCE = 1e-5


@functools.cache
def problem():
    """(model, batches): a small MLP on Gaussian blobs, and the global batch of each step."""
    data = classification(n=256, features=8, classes=4, seed=SEED)
    model = make_model("mlp", data.n_features, data.n_outputs, hidden=16)
    order = np.random.default_rng(SEED).permutation(len(data))
    batches, start = [], 0
    for b in BATCH_SIZES:
        idx = order[start:start + b]
        batches.append((data.x[idx], data.y[idx]))
        start += b
    return model, batches


def reference_split(x, y, n):
    bounds = np.cumsum([0] + split_global_batch(len(x), n))
    return [(x[bounds[r]:bounds[r + 1]], y[bounds[r]:bounds[r + 1]]) for r in range(n)]


def reference_step(model, w, x, y, b):
    loss = np.float32(np.sum(model.per_example_loss(w, x, y), dtype=np.float32) / np.float32(b))
    return loss, model.gradients(w, x, y, np.float32(1.0) / np.float32(b))


#: name -> (strategy on a task, devices per task)
STRATEGIES = {
    "default strategy": (lambda ctx: Strategy(ctx), 1),
    "OneDeviceStrategy": (lambda ctx: OneDeviceStrategy(ctx, 0), 1),
    "MirroredStrategy, 1 replica": (lambda ctx: MirroredStrategy(ctx), 1),
    "MirroredStrategy, 2 replicas": (lambda ctx: MirroredStrategy(ctx), 2),
    "MirroredStrategy, 3 replicas": (lambda ctx: MirroredStrategy(ctx), 3),
    "MirroredStrategy, 4 replicas": (lambda ctx: MirroredStrategy(ctx), 4),
    "CentralStorageStrategy, 4 replicas": (lambda ctx: CentralStorageStrategy(ctx, range(4)), 4),
}


class StepError(Exception):
    """The learner's replica_step raised on one replica's batch."""

    def __init__(self, size: int, global_batch: int, error: Exception):
        super().__init__(f"{type(error).__name__}: {error}")
        self.size, self.global_batch, self.error = size, global_batch, error


def guarded(step):
    """``step``, with its errors tagged with the replica batch that raised them."""
    def call(model, w, x, y, b):
        try:
            return step(model, w, x, y, b)
        except (NotImplementedError, CheckFailed):
            raise
        except Exception as error:
            raise StepError(len(x), b, error) from error
    return call


def train(name, split, step):
    """Train the check's problem with a strategy, ``split`` and ``step``: (losses, weights,
    every copy of every variable). The loop is TF's custom training loop."""
    make, devices = STRATEGIES[name]
    model, batches = problem()
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu",
                               Layout(tasks_per_machine=1, devices_per_task=devices))
    lr = np.float32(LEARNING_RATE)

    def main(ctx):
        strategy = make(ctx)
        n = strategy.num_replicas_in_sync
        with strategy.scope():
            variables = strategy.variables(model.init(SEED))
        losses = []
        for x, y in batches:
            b = len(x)
            parts = split(x, y, n)
            xs, ys = PerReplica(p[0] for p in parts), PerReplica(p[1] for p in parts)
            loss, grads = yield from strategy.run(
                lambda xr, yr, w, b=b: step(model, w, xr, yr, b), args=(xs, ys, variables))
            if not isinstance(grads, dict) or set(grads) != set(variables):
                raise CheckFailed(
                    tr(f"replica_step returned gradients {_short(grads)}; expected a dict with "
                       f"the weights' names {sorted(variables)}",
                       f"replica_step 返回的梯度是 {_short(grads)}；应为以权重名 "
                       f"{sorted(variables)} 为键的 dict"),
                    tr("return (loss, grads) where grads = model.gradients(weights, x, y, scale)",
                       "返回 (loss, grads)，其中 grads = model.gradients(weights, x, y, scale)"))
            grads = yield from strategy.extended.batch_reduce_to(ReduceOp.SUM, grads)
            yield from strategy.extended.update(variables, grads, lambda v, g: v - lr * g)
            total = yield from strategy.reduce(ReduceOp.SUM, loss)
            losses.append(float(np.asarray(total)))
        return losses, {k: v.numpy() for k, v in variables.items()}, \
            {k: list(v.values) for k, v in variables.items()}

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # NaNs are reported by the check
        result = simulate({"worker": 1}, main, hardware=hw, trace=False)
    return result.returns["worker:0"]


@functools.cache
def reference_run():
    """The default strategy (one device, the whole batch) with TF's split and scaling."""
    return train("default strategy", reference_split, reference_step)


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _close(a, b) -> bool:
    return np.allclose(a, b, rtol=1e-4, atol=1e-6)


def diagnose_step(step) -> tuple:
    """Why a replica_step goes wrong, from calls on crafted inputs: (hint, detail)."""
    model, batches = problem()
    w = model.init(SEED)
    x, y = batches[3]  # 12 examples; this replica has 3 of them
    loss, grads = step(model, w, x[:3], y[:3], 12)
    per_example = model.per_example_loss(w, x[:3], y[:3])
    if isinstance(grads, dict) and set(grads) == set(w):
        for scale, what, zh in ((1 / 3, "the replica's own batch (3 examples)",
                                 "副本自己的批次（3 个样本）"),
                                (1.0, "nothing (a plain sum)", "什么都不除（直接求和）")):
            if all(_close(grads[k], v) for k, v in model.gradients(w, x[:3], y[:3],
                                                                    scale).items()):
                return (tr(f"your gradient is scaled by 1 / {what} instead of 1 / the global "
                           "batch (12)",
                           f"你的梯度除以的是{zh}，而不是全局批次大小（12）"),
                        tr("the strategy SUMs the replicas' gradients, so each replica must "
                           "contribute sum(its losses) / global_batch_size: pass scale = 1 / "
                           "global_batch_size to model.gradients",
                           "策略会对各副本的梯度求和（SUM），所以每个副本要贡献 sum(自己的损失) / "
                           "global_batch_size：给 model.gradients 传 scale = 1 / global_batch_size"))
    if not np.isclose(float(np.asarray(loss)), per_example.sum() / 12, rtol=1e-4):
        if np.isclose(float(np.asarray(loss)), per_example.mean(), rtol=1e-4):
            return (tr("your loss is the mean over the replica's own examples",
                       "你的损失是副本自己样本上的平均值"),
                    tr("summed over the replicas that gives N times the mean (and wrong "
                       "weights for uneven batches). Use compute_average_loss(per_example, "
                       "global_batch_size)",
                       "对各副本求和后得到的是 N 倍的平均值（批次不均匀时权重也会错）。请用 "
                       "compute_average_loss(per_example, global_batch_size)"))
        return (tr("the loss must be this replica's share of the global mean",
                   "损失必须是这个副本在全局平均值中所占的份额"),
                tr("sum(this replica's per-example losses) / global_batch_size "
                   "(compute_average_loss)",
                   "sum(本副本的逐样本损失) / global_batch_size（compute_average_loss）"))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            empty_loss, empty_grads = step(model, w, x[:0], y[:0], 12)
    except ZeroDivisionError:
        empty_loss = float("nan")
    if not np.isfinite(float(np.asarray(empty_loss))) or not all(
            np.isfinite(v).all() for v in empty_grads.values()):
        return (tr("a replica with no examples returns NaN", "没有样本的副本返回了 NaN"),
                tr("1 example over 4 replicas gives 1, 0, 0, 0, and np.mean of nothing is NaN. "
                   "Divide the sum by the global batch size: a replica without examples "
                   "contributes 0",
                   "1 个样本分给 4 个副本是 1, 0, 0, 0，而空数组的 np.mean 是 NaN。"
                   "用全局批次大小去除总和：没有样本的副本贡献 0"))
    return (tr("compare your step with one device on the whole batch",
               "把你的一步与单个设备在整个批次上的计算相比较"),
            tr("the replicas' losses and gradients must add up to the global batch's mean "
               "loss and its gradient",
               "各副本的损失和梯度加起来必须等于全局批次的平均损失及其梯度"))


def verify_float32(loss, grads, where: str) -> None:
    """The loss and the gradients are float32, as the exercise (and TF's variables) ask."""
    dtype = np.asarray(loss).dtype
    if dtype != np.float32:
        raise CheckFailed(
            tr(f"{where}: replica_step returned a loss of dtype {dtype}; the exercise asks for "
               "a float32 scalar",
               f"{where.zh}：replica_step 返回的损失的 dtype 是 {dtype}；练习要求 float32 标量"),
            tr("the model's weights, gradients and losses are float32, as TF's are",
               "模型的权重、梯度和损失都是 float32，与 TF 一样"),
            tr("a Python float or a float64 division (e.g. np.sum(...) / b with b an int, "
               "or np.mean of float64) promotes it: use compute_average_loss, or "
               "np.float32(...)",
               "Python float 或 float64 的除法（例如 b 为 int 时的 np.sum(...) / b，或 float64 的 "
               "np.mean）会把它提升为 float64：用 compute_average_loss，或 np.float32(...)"))
    wide = sorted(k for k, g in grads.items() if np.asarray(g).dtype != np.float32)
    if wide:
        raise CheckFailed(
            tr(f"{where}: the gradients {wide} are {np.asarray(grads[wide[0]]).dtype}, not "
               "float32",
               f"{where.zh}：梯度 {wide} 是 {np.asarray(grads[wide[0]]).dtype}，不是 float32"),
            tr("keep the gradients float32, like the weights they update",
               "梯度要和它们所更新的权重一样保持 float32"),
            tr("pass scale as a float32 (np.float32(1) / np.float32(global_batch_size)) to "
               "model.gradients, and do not multiply its result by a Python or float64 number",
               "把 scale 以 float32 传给 model.gradients（np.float32(1) / "
               "np.float32(global_batch_size)），不要再用 Python 或 float64 的数去乘它的结果"))


def check_replica_step_alone(ex) -> str:
    """One replica holding the whole batch returns the mean loss and its gradient."""
    model, batches = problem()
    w = model.init(SEED)
    x, y = batches[1]
    loss, grads = ex.replica_step(model, w, x, y, len(x))
    want_loss, want_grads = reference_step(model, w, x, y, len(x))
    if not isinstance(grads, dict) or set(grads) != set(want_grads):
        raise CheckFailed(tr(f"replica_step returned gradients {_short(grads)}; expected a "
                             f"dict with the weights' names {sorted(want_grads)}",
                             f"replica_step 返回的梯度是 {_short(grads)}；应为以权重名 "
                             f"{sorted(want_grads)} 为键的 dict"),
                          tr("return (loss, grads) with grads = model.gradients(weights, x, y, "
                             "scale)", "返回 (loss, grads)，其中 grads = model.gradients(weights, x, y, scale)"))
    if not np.isclose(float(np.asarray(loss)), float(want_loss), rtol=1e-5):
        raise CheckFailed(tr(f"one replica with the whole batch of {len(x)}: loss "
                             f"{float(np.asarray(loss)):.6f}, but the mean loss is "
                             f"{float(want_loss):.6f}",
                             f"一个副本处理整个批次（{len(x)} 个样本）：损失为 "
                             f"{float(np.asarray(loss)):.6f}，但平均损失是 {float(want_loss):.6f}"),
                          *diagnose_step(ex.replica_step))
    for k, g in want_grads.items():
        if np.shape(grads[k]) != g.shape or not _close(grads[k], g):
            raise CheckFailed(tr(f"one replica with the whole batch of {len(x)}: gradient "
                                 f"{k!r} differs from the gradient of the mean loss",
                                 f"一个副本处理整个批次（{len(x)} 个样本）：梯度 {k!r} 与平均损失"
                                 "的梯度不同"),
                              *diagnose_step(ex.replica_step))
    verify_float32(loss, grads, tr(f"one replica with the whole batch of {len(x)}",
                                   f"一个副本处理整个批次（{len(x)} 个样本）"))
    return tr(f"loss {float(loss):.6f} and gradients of the mean (float32), on one replica",
              f"一个副本上：损失 {float(loss):.6f}，梯度是平均损失的梯度（float32）")


def check_training(ex) -> str:
    """Every strategy with the learner's split and step ends with the default strategy's
    weights (and reports the same losses)."""
    try:
        verify_split(ex.split_batch)
    except CheckFailed as failed:
        raise CheckFailed(join(tr("this check feeds the replicas with your split_batch, which "
                                  "is not right yet: ",
                                  "这项检查用你的 split_batch 给各副本分数据，而它还不正确："),
                               failed.message), failed.hint, failed.detail) from None
    want_losses, want_weights, _ = reference_run()
    for name in STRATEGIES:
        if name == "default strategy":
            continue
        try:
            losses, weights, copies = train(name, ex.split_batch, guarded(ex.replica_step))
        except StepError as failed:
            raise CheckFailed(
                tr(f"{name}: your replica_step raised {failed} on a replica batch of "
                   f"{failed.size} example(s) (global batch {failed.global_batch})",
                   f"{name}：你的 replica_step 在 {failed.size} 个样本的副本批次上（全局批次 "
                   f"{failed.global_batch}）抛出了 {failed}"),
                *(diagnose_step(ex.replica_step) if failed.size == 0 else
                  (tr("fix the error, then run the check again", "修正这个错误，然后再运行检查"), ""))
                ) from None
        for k, copy_list in copies.items():
            if any(not np.array_equal(c, copy_list[0]) for c in copy_list):
                raise CheckFailed(tr(f"{name}: the copies of variable {k!r} differ between "
                                     "replicas", f"{name}：变量 {k!r} 的各副本之间不一致"),
                                  tr("every replica must get the same all-reduced gradient",
                                     "每个副本必须得到同一个 all-reduce 之后的梯度"),
                                  tr("return the gradients from replica_step unchanged: do not "
                                     "apply them yourself",
                                     "replica_step 原样返回梯度，不要自己去应用它们"))

        diff = max(float(np.max(np.abs(weights[k] - want_weights[k]))) for k in want_weights)
        bad_loss = next((i for i, (a, b) in enumerate(zip(losses, want_losses))
                         if not np.isclose(a, b, rtol=1e-4, atol=1e-6)), None)
        if not diff <= TOLERANCE or bad_loss is not None:  # NaN weights fail too
            detail = (tr(f"step {bad_loss} (global batch {BATCH_SIZES[bad_loss]}) reports loss "
                         f"{losses[bad_loss]:.6f}, one device {want_losses[bad_loss]:.6f}; ",
                         f"第 {bad_loss} 步（全局批次 {BATCH_SIZES[bad_loss]}）报告的损失是 "
                         f"{losses[bad_loss]:.6f}，单设备是 {want_losses[bad_loss]:.6f}；")
                      if bad_loss is not None else "")
            raise CheckFailed(join(f"{name}: ", detail, tr(
                f"after {len(BATCH_SIZES)} steps the weights differ from the default "
                f"strategy's by up to {diff:.3g} (tolerance {TOLERANCE:g})",
                f"{len(BATCH_SIZES)} 步之后，权重与默认策略的相差最多 {diff:.3g}（容差 "
                f"{TOLERANCE:g}）")), *diagnose_step(ex.replica_step))
    batches = ", ".join(map(str, BATCH_SIZES))
    return tr(f"OneDevice, Mirrored with 1-4 replicas and CentralStorage end within "
              f"{TOLERANCE:g} of one device, global batches {batches}",
              f"OneDevice、1-4 个副本的 Mirrored 和 CentralStorage 的结果与单设备相差不超过 "
              f"{TOLERANCE:g}，全局批次 {batches}")


# -- exercise 3: predict_step_bytes -------------------------------------------------------------

SYSTEM = "v100-nvlink2-25gbe"  # GPUs (NCCL needs them), NVLink 2 between them
NBYTES = 1 << 20  # 1 MiB: 262,144 float32 parameters
TIE = 0.01

MAKERS = {
    "one_device": lambda ctx, p: OneDeviceStrategy(ctx, 0),
    "reduction_to_one": lambda ctx, p: MirroredStrategy(ctx, range(p), ReductionToOneDevice()),
    "nccl": lambda ctx, p: MirroredStrategy(ctx, range(p), NcclAllReduce()),
    "hierarchical_copy": lambda ctx, p: MirroredStrategy(ctx, range(p),
                                                         HierarchicalCopyAllReduce()),
    "central_storage": lambda ctx, p: CentralStorageStrategy(ctx, range(p)),
}

#: (strategy, replicas, hint, detail); hierarchical copy on an even and an odd count
SCENARIOS = (
    ("one_device", 1, tr("one device has nobody to exchange gradients with",
                         "只有一个设备，没有人可以交换梯度"), ""),
    ("reduction_to_one", 4,
     tr("count the messages: to device 0, then back from it",
        "数一数消息：先发往设备 0，再从它发回"),
     tr("p - 1 gradients go to device 0, then p - 1 copies of the sum come back from it; "
        "each message is the whole gradient",
        "p - 1 份梯度发往设备 0，然后 p - 1 份和从它发回；每条消息都是完整的梯度")),
    ("nccl", 4, tr("a ring all-reduce (lesson 01)", "环形 all-reduce（第 01 课）"),
     tr("each device sends 2(p - 1) chunks of n / p", "每个设备发送 2(p - 1) 个大小为 n / p 的块")),
    ("nccl", 8, tr("a ring all-reduce (lesson 01)", "环形 all-reduce（第 01 课）"),
     tr("each device sends 2(p - 1) chunks of n / p; the total is p times that",
        "每个设备发送 2(p - 1) 个大小为 n / p 的块；总量是它的 p 倍")),
    ("hierarchical_copy", 8,
     tr("two halves, a leader each: reduce in the half, all-reduce the leaders, copy back",
        "分成两半，各有一个组长：半组内归约，组长之间 all-reduce，再复制回去"),
     tr("two halves of 4 devices: 3 gradients to each leader, a ring of the 2 leaders (each "
        "sends 2 chunks of n / 2), then each leader sends the sum to its 3 other devices",
        "两个半组各 4 个设备：每个组长收到 3 份梯度，两个组长组成的环（各发送 2 个 n / 2 的块），"
        "然后每个组长把和发给本组另外 3 个设备")),
    ("hierarchical_copy", 5,
     tr("with an odd count the halves differ: the first half is the larger one",
        "设备数为奇数时两个半组不一样大：第一个半组更大"),
     tr("the first ceil(p / 2) = 3 devices and the other 2: the busiest leader is the one "
        "of the larger half (floor(p / 2) gives the smaller half's)",
        "前 ceil(p / 2) = 3 个设备和剩下的 2 个：最忙的是较大半组的组长（floor(p / 2) 算出的是"
        "较小半组的）")),
    ("central_storage", 4,
     tr("the variables live on the host: count what goes out to the GPUs and what comes back",
        "变量放在主机上：数一数发往各 GPU 的和发回来的"),
     tr("the host sends the variables (n bytes) to every device, and every device sends its "
        "gradient (n bytes) to the host; nothing is sent back after the update",
        "主机把变量（n 字节）发给每个设备，每个设备把梯度（n 字节）发回主机；更新之后不再发回任何东西")),
)


@functools.cache
def measure_step_bytes(strategy: str, replicas: int, nbytes: int = NBYTES) -> tuple:
    """(total, busiest sender) bytes of one simulated step: read the variables, compute the
    gradients, reduce them, update. Senders are the devices and the host CPU."""
    hw = Hardware.from_catalog(HardwareCatalog.default(), SYSTEM,
                               Layout(tasks_per_machine=1, devices_per_task=replicas))

    def main(ctx):
        strategy_ = MAKERS[strategy](ctx, replicas)
        with strategy_.scope():
            variables = strategy_.variables({"w": np.zeros(nbytes // 4, np.float32)})
        grads = yield from strategy_.run(lambda w: {"w": np.ones_like(w["w"])}, args=(variables,))
        grads = yield from strategy_.extended.batch_reduce_to(ReduceOp.SUM, grads)
        yield from strategy_.extended.update(variables, grads, lambda v, g: v - g)

    trace = simulate({"worker": 1}, main, hardware=hw).trace
    sent = Counter()
    for flow in trace.flows:
        sent[(flow.src_pid, flow.src_lane.split()[0])] += flow.args["bytes"]
    return sum(sent.values()), max(sent.values(), default=0)


def scenario_title(strategy, replicas) -> str:
    return tr(f"predict_step_bytes: {strategy} on {replicas} GPU{'s' * (replicas > 1)}",
              f"predict_step_bytes：{replicas} 块 GPU 上的 {strategy}")


def _near(got, want) -> bool:
    return abs(got - want) <= TIE * want if want else got == 0


def check_bytes(scenario, ex) -> str:
    strategy, replicas, hint, detail = scenario
    answer = ex.predict_step_bytes(strategy, replicas, NBYTES)
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        raise CheckFailed(tr(f"predict_step_bytes returned {_short(answer)}; expected a pair "
                             "(total bytes, bytes sent by the busiest device)",
                             f"predict_step_bytes 返回了 {_short(answer)}；应为一对数（总字节数，"
                             "发送最多的设备发送的字节数）"),
                          tr("return two numbers: return total, busiest",
                             "返回两个数：return total, busiest"))
    total, busiest = (float(v) for v in answer)
    want_total, want_busiest = measure_step_bytes(strategy, replicas)
    case = tr(f"{strategy}, {replicas} replica(s), gradient of {format_bytes(NBYTES)}",
              f"{strategy}，{replicas} 个副本，梯度 {format_bytes(NBYTES)}")
    measured = tr(f"the simulator measures {format_bytes(want_total)} in total and "
                  f"{format_bytes(want_busiest)} from the busiest sender",
                  f"模拟器测得总共 {format_bytes(want_total)}，发送最多者发送 "
                  f"{format_bytes(want_busiest)}")
    if not _near(total, want_total) or not _near(busiest, want_busiest):
        wrong = [w for w, ok in (("total", _near(total, want_total)),
                                 ("busiest", _near(busiest, want_busiest))) if not ok]
        wrong_zh = "和".join({"total": "总数", "busiest": "最多者"}[w] for w in wrong)
        raise CheckFailed(tr(f"{case}: you predicted {total:,.0f} B in total and "
                             f"{busiest:,.0f} B from the busiest sender "
                             f"({' and '.join(wrong)} off); {measured}",
                             f"{case.zh}：你预测总共 {total:,.0f} B、发送最多者 {busiest:,.0f} B"
                             f"（{wrong_zh}不对）；{measured.zh}"), hint, detail)
    return tr(f"{format_bytes(want_total)} in total, {format_bytes(want_busiest)} busiest",
              f"总共 {format_bytes(want_total)}，最多者 {format_bytes(want_busiest)}")


# -- exercise 4: predict_reported_loss --------------------------------------------------------

L2 = np.float32(0.01)
#: (replicas, global batch, scaling): section 3 draws 4 replicas on 10 examples, scaled by
#: scale_regularization_loss and not at all; these are other counts, and the other two ways
REG_CASES = ((3, 7, "scale_regularization_loss"), (3, 7, "none"), (4, 6, "per_example"),
             (2, 5, "global_batch"), (5, 12, "none"), (5, 12, "per_example"))
REG_HINTS = {
    "scale_regularization_loss": (
        tr("scale_regularization_loss divides the penalty by num_replicas_in_sync: the N "
           "replicas' shares add up to it once",
           "scale_regularization_loss 把惩罚项除以 num_replicas_in_sync：N 个副本的份额加起来"
           "正好是它一次"), tr("data_loss + R", "data_loss + R")),
    "none": (tr("every replica adds the whole penalty and the strategy SUMs the replicas' "
                "losses: it counts once per replica",
                "每个副本都加上整个惩罚项，而策略对各副本的损失求和：它被计了副本数那么多次"),
             tr("data_loss + num_replicas x R", "data_loss + num_replicas x R")),
    "per_example": (tr("R added to each example is divided by the global batch with it: a "
                       "replica of n_r examples adds n_r x R / B, and the n_r add up to B",
                       "加到每个样本上的 R 和样本一起除以全局批次：有 n_r 个样本的副本加上 "
                       "n_r x R / B，而各 n_r 加起来是 B"),
                    tr("data_loss + R, however the batch was split (empty replicas add "
                       "nothing)", "data_loss + R，无论批次怎样切分（空副本什么也不加）")),
    "global_batch": (tr("each replica adds R / B, and there are N of them",
                        "每个副本加上 R / B，一共有 N 个副本"),
                     tr("data_loss + num_replicas x R / global_batch_size",
                        "data_loss + num_replicas x R / global_batch_size")),
}


def replica_loss(model, w, x, y, b, n, scaling):
    """One replica's loss with an L2 penalty added the way ``scaling`` says (TF's calls)."""
    per_example = model.per_example_loss(w, x, y)
    penalty = L2 * np.float32(sum(np.sum(np.square(v), dtype=np.float32) for v in w.values()))
    data = compute_average_loss(per_example, b)
    if scaling == "scale_regularization_loss":
        return data + scale_regularization_loss(penalty, n)
    if scaling == "none":
        return data + penalty
    if scaling == "per_example":
        return compute_average_loss(per_example + penalty, b)
    return data + penalty / np.float32(b)


@functools.cache
def reported_loss(replicas: int, batch: int, scaling: str) -> tuple:
    """(data loss, penalty, reported loss): one step's losses of ``replicas`` simulated
    MirroredStrategy replicas on the first ``batch`` examples of the check's problem."""
    model, _ = problem()
    data = classification(n=batch, features=8, classes=4, seed=SEED)
    w0 = model.init(SEED)
    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu",
                               Layout(tasks_per_machine=1, devices_per_task=replicas))

    def main(ctx):
        strategy = MirroredStrategy(ctx)
        with strategy.scope():
            variables = strategy.variables(w0)
        (x, y), = strategy.experimental_distribute_dataset([(data.x, data.y)])
        loss = yield from strategy.run(
            lambda xr, yr, w: replica_loss(model, w, xr, yr, batch, replicas, scaling),
            args=(x, y, variables))
        return float((yield from strategy.reduce(ReduceOp.SUM, loss)))

    reported = simulate({"worker": 1}, main, hardware=hw, trace=False).returns["worker:0"]
    mean = float(model.per_example_loss(w0, data.x, data.y).mean())
    penalty = float(L2 * sum(np.sum(np.square(v)) for v in w0.values()))
    return mean, penalty, reported


def check_reported_loss(ex) -> str:
    for replicas, batch, scaling in REG_CASES:
        mean, penalty, reported = reported_loss(replicas, batch, scaling)
        answer = ex.predict_reported_loss(mean, penalty, replicas, batch, scaling)
        case = tr(f"{replicas} replicas, global batch {batch}, scaling {scaling!r} (data loss "
                  f"{mean:.5f}, penalty R {penalty:.5f})",
                  f"{replicas} 个副本，全局批次 {batch}，缩放方式 {scaling!r}（数据损失 "
                  f"{mean:.5f}，惩罚项 R {penalty:.5f}）")
        try:
            value = float(answer)
        except (TypeError, ValueError):
            raise CheckFailed(tr(f"{case}: predict_reported_loss returned {_short(answer)}, "
                                 "not a number", f"{case.zh}：predict_reported_loss 返回了 "
                                 f"{_short(answer)}，不是一个数"),
                              tr("return the summed loss as a float", "以 float 返回求和后的损失"))
        if not np.isclose(value, reported, rtol=1e-4, atol=1e-7):
            raise CheckFailed(tr(f"{case}: you predicted {value:.5f}, the simulated "
                                 f"MirroredStrategy reports {reported:.5f}",
                                 f"{case.zh}：你预测 {value:.5f}，模拟的 MirroredStrategy "
                                 f"报告 {reported:.5f}"), *REG_HINTS[scaling])
    return tr(f"the reported loss of {len(REG_CASES)} runs: the penalty counted once with "
              "scale_regularization_loss or per example, once per replica without",
              f"{len(REG_CASES)} 次运行报告的损失：用 scale_regularization_loss 或按样本加时惩罚项"
              "计一次，不缩放时每个副本计一次")


# -- the list that simdist check runs -----------------------------------------------------------

CHECKS = [
    Check("split", "split_batch",
          tr("split_batch: TF's per-replica sizes (ceil(B/N) each until the batch runs out)",
             "split_batch：TF 的每副本大小（每个 ceil(B/N)，直到批次用完）"),
          check_split),
    Check("step_one_replica", "replica_step",
          tr("replica_step: one replica with the whole batch gets its mean loss and gradient "
             "(float32)", "replica_step：持有整个批次的单个副本得到平均损失及其梯度（float32）"),
          check_replica_step_alone),
    Check("step_parity", "replica_step",
          tr("replica_step: OneDevice, Mirrored (1-4 replicas), CentralStorage train like one "
             "device", "replica_step：OneDevice、Mirrored（1-4 个副本）、CentralStorage 的训练结果"
                       "与单设备相同"), check_training),
] + [
    Check(f"bytes_{i + 1}", "predict_step_bytes", scenario_title(*s[:2]),
          functools.partial(check_bytes, s))
    for i, s in enumerate(SCENARIOS)
] + [
    Check("reported_loss", "predict_reported_loss",
          tr("predict_reported_loss: an L2 penalty scaled four ways, summed over the replicas",
             "predict_reported_loss：以四种方式缩放的 L2 惩罚项，对各副本求和"),
          check_reported_loss),
]
