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
    """Looks at 0, 0.7, 1.4, ... 4.9 ms: ckpt-0 (0.49) is new at 0.7, ckpt-1 (0.98) at 1.4,
    ckpt-2 and ckpt-3 (1.47, 1.95) at 2.1, where the older is skipped, and so on: ckpt-2,
    ckpt-5 and ckpt-8 are skipped; ckpt-9 is new at 4.9 ms."""
    return ["ckpt-0", "ckpt-1", "ckpt-3", "ckpt-4", "ckpt-6", "ckpt-7", "ckpt-9"]
