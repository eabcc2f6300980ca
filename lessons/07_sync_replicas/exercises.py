"""Lesson 07, Parameter servers: SyncReplicasOptimizer, stale gradients and failures: your
exercises.

Copy this file to your workspace once (``simdist lesson start 07``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 07`` (or the
check cells of the notebook).
"""


def tokens_per_step(total_num_replicas, replicas_to_aggregate):
    """Exercise 1 (★): how many tokens does the chief put into the sync token queue after
    each step of ``SyncReplicasOptimizer(opt, replicas_to_aggregate, total_num_replicas)``?
    Return an int.
    """
    raise NotImplementedError("exercise tokens_per_step: return the number of tokens")


def choose_replicas_to_aggregate():
    """Exercise 2 (★★): predict, then run: six workers of 1 ms per step; each step of each
    worker straggles (takes 6 ms) with probability 0.15 (``train_on_ps(workers=6,
    mode="sync", steps=20, stall_us=6000, stall_probability=0.15,
    replicas_to_aggregate=R)``). Return the largest ``replicas_to_aggregate`` R (so the most
    gradients averaged per step) with which a global step takes at most 1.9 ms on average.
    Section 3 drew five workers and 2.5 ms: reason from it before you run anything.
    """
    raise NotImplementedError("exercise choose_replicas_to_aggregate: return an int 1..6")


def why_backups_help():
    """Exercise 2b (★): with backup workers (R below the number of workers) the average
    global step is shorter even though every worker's steps take just as long. Why? Return
    one letter:

    - ``"a"``: a step is taken at its R-th gradient: a straggler holds it up only when more
      workers than there are backups straggle at once, and its late gradient is dropped;
    - ``"b"``: the backup workers are faster machines;
    - ``"c"``: fewer gradients a step means fewer bytes to send to the ps;
    - ``"d"``: with backups the chief no longer waits for tokens.
    """
    raise NotImplementedError("exercise why_backups_help: return 'a', 'b', 'c' or 'd'")


def resume_step(save_every, step_at_failure):
    """Exercise 3 (★★): the chief saves a checkpoint every ``save_every`` global steps
    (``save_checkpoint_steps``; the first at step 0). The ps fails when the global step is
    ``step_at_failure`` and loses its variables. From which global step does training go
    on? Return an int.
    """
    raise NotImplementedError("exercise resume_step: return a global step")


def predict_applied():
    """Exercise 4 (★★): four workers train to global step 12 with
    ``SyncReplicasOptimizer(opt, replicas_to_aggregate=3, total_num_replicas=4)``, and the
    chief, worker 0, is the straggler: its steps take 2.5 ms, the others' 1 ms
    (``train_on_ps(workers=4, mode="sync", replicas_to_aggregate=3, step_us=[2500, 1000,
    1000, 1000], steps=12)``). How many gradients of each worker do the accumulators apply?
    Return a dict {worker: gradients applied} for the workers 0 to 3. Exercise 5 checks it
    with the ps and the workers on MPI ranks (``straggler_mpi.py``).
    """
    raise NotImplementedError("exercise predict_applied: return {worker: gradients applied}")


def predict_staleness():
    """Exercise 6 (★★): asynchronous training on three workers whose steps take 1, 1 and
    3 ms (``train_on_ps(workers=3, mode="async", steps=24, step_us=[1000, 1000, 3000],
    learning_rate=0.05)``), a configuration section 1 has not drawn. A gradient's staleness
    is the number of updates the others applied between its read and its own update. What
    staleness do the slow worker 2's gradients have most often, and what staleness do the
    fast worker 0's? Return the pair ``(slow, fast)`` of ints.
    """
    raise NotImplementedError("exercise predict_staleness: return (slow, fast)")


def why_larger_batches_help():
    """Exercise 6b (★): section 1 trains 128 examples a round in two ways, 8 workers of 16
    examples each and 2 workers of 64 (each step's compute grows with its batch), both with
    learning rate 0.3. The first diverges, the second converges. Why? Return one letter:

    - ``"a"``: larger batches give less noisy gradients;
    - ``"b"``: with fewer workers in flight, fewer updates land between a gradient's read
      of the variables and its own update: its staleness falls;
    - ``"c"``: the ps NIC carries fewer bytes;
    - ``"d"``: the learning rate grows with the batch.
    """
    raise NotImplementedError("exercise why_larger_batches_help: return 'a', 'b', 'c' or 'd'")
