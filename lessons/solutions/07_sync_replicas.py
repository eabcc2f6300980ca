"""Lesson 07, Parameter servers: reference solutions."""


def tokens_per_step(total_num_replicas, replicas_to_aggregate):
    """One token for every replica that may ask for one, and at least one per gradient
    the chief waits for: TF's ``max(total_num_replicas, replicas_to_aggregate)``."""
    return max(total_num_replicas, replicas_to_aggregate)


def choose_replicas_to_aggregate():
    """Six workers, 1.9 ms: with no backup every step waits for the slowest of six (4.2 ms
    a step); each backup lets a step go on without one more straggler (5: 2.9 ms, 4: 2.2
    ms, 3: 1.94 ms), and only R = 2 (1.85 ms) is within 1.9 ms: four backup workers. Section
    3's answer for five workers and 2.5 ms, 4, takes 2.2 ms here."""
    return 2


def why_backups_help():
    """The step goes on at its R-th gradient; the stragglers' gradients arrive stale and
    are dropped."""
    return "a"


def resume_step(save_every, step_at_failure):
    """The chief restores the newest checkpoint, the last multiple of ``save_every`` not
    after the failure: the steps since are lost."""
    return step_at_failure // save_every * save_every


def predict_applied():
    """Each global step applies 3 gradients, 36 in 12 steps. The three fast workers' come
    first, one each a step; the chief's arrives 2.5 ms into its step, after the step it was
    computed for is taken, and is dropped every time. The chief still hands out the tokens:
    the sync_op runs in its queue runner, not in its slow training loop."""
    return {0: 0, 1: 12, 2: 12, 3: 12}


def predict_staleness():
    # during one 3 ms step of worker 2 each fast worker makes about three updates: 6; during
    # a 1 ms step of worker 0 the other fast worker makes one (the slow one rarely lands)
    return 6, 1


def why_larger_batches_help():
    return "b"
