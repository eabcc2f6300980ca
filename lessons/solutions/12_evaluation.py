"""Lesson 12, Evaluation while training: reference solutions."""


def predict_eval_visits():
    """worker:0's iterator hands out batches 0, 2, 4, 6 and, for the one function more it
    runs, 0 again; worker:1's update of batch 1 reached the ps before it failed, and its
    rebuilt iterator starts again at batch 1, so the re-run adds batch 1 once more and
    batch 7 is never reached: batches 0 and 1 twice (64 examples), batch 7 never (32)."""
    return 64, 32


def choose_exactly_once():
    """Exactly-once evaluation with 4 shards (2 batches each): the shard worker:1 was
    running at 2430 us is re-run and the trace shows 5 runs, but only the result of the run
    that ended is added."""
    return "exactly_once", 4, 5


def predict_sidecar():
    """Visible at 0.52, 1.01, 1.50, 1.99, 2.48, 2.96, 3.45, 3.94, 4.43, 4.92 ms; looks at 0,
    0.7, 1.4, ... ms: ckpt-0 is new at 0.7, ckpt-1 at 1.4, ckpt-2 and ckpt-3 at 2.1 (the
    older skipped), ckpt-4 at 2.8, ckpt-5 and ckpt-6 at 3.5, ckpt-7 at 4.2, ckpt-8 at 4.9
    (ckpt-9's save began at 4.886 ms but is complete only at 4.918), ckpt-9 at 5.6."""
    return ["ckpt-0", "ckpt-1", "ckpt-3", "ckpt-4", "ckpt-6", "ckpt-7", "ckpt-8", "ckpt-9"]
