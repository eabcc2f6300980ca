"""Lesson 15, Choosing a strategy: your exercises.

Copy this file to your workspace once (``simdist lesson start 15``), replace each ``raise
NotImplementedError(...)`` in the copy with your code, then run ``simdist check 15`` (or the
check cells of the notebook).
"""


def place_jobs():
    """Exercise 1 (★): place each job on the axes, choosing its strategy among
    a: MirroredStrategy, b: MultiWorkerMirroredStrategy, c: ParameterServerStrategy,
    d: TPUStrategy, e: CentralStorageStrategy.

    1. ResNet-50, one machine with 8 GPUs on NVLink;
    2. a recommender with a 60 GB embedding table, 30 CPU machines, some preemptible,
       stale gradients accepted;
    3. BERT-large on 8 machines of 8 GPUs, every step synchronous.

    Return the three letters in order, e.g. ``("a", "b", "c")``.
    """
    raise NotImplementedError("exercise place_jobs: return three letters")


def why_parameter_servers():
    """Exercise 2 (★): why does job 2 of exercise 1 run on ParameterServerStrategy rather
    than MultiWorkerMirroredStrategy? Return the letter of the reason:

    a: ParameterServerStrategy's all-reduce is faster than a ring;
    b: the ps tasks shard the table, each worker reads only the rows it looks up, and no
       worker waits for another, so a preempted one stalls nobody;
    c: MultiWorkerMirroredStrategy cannot run on CPUs;
    d: asynchronous training ends with the same weights as synchronous training.
    """
    raise NotImplementedError("exercise why_parameter_servers: return a letter")


def choose_and_predict():
    """Exercise 3 (★★★): BERT-base (``bert_base``), 32 sequences per GPU a step, on up to 4
    machines of 4 V100s (profile ``v100-nvlink2-25gbe``: NVLink inside a machine, 25 GbE
    between machines). Choose the strategy and settings that train the most sequences a
    second:

    - ``strategy``: "mirrored" (one machine), "multi_worker_mirrored" or "sync_replicas"
      (TF1's SyncReplicasOptimizer on parameter servers);
    - ``machines``: how many machines it uses (1 to 4; each with its 4 GPUs);
    - ``algorithm``: "ring" (mirrored), "ring" or "hierarchical" (multi_worker_mirrored),
      "ps" (sync_replicas);
    - ``num_ps``: parameter-server shards, 1 to ``machines`` (sync_replicas), else 1.

    Then predict its step time with simdist (``simdist run data_parallel ...``, as in
    section 2), within 5%. Return ``{"strategy": ..., "machines": ..., "algorithm": ...,
    "num_ps": ..., "step_ms": ...}``.
    """
    raise NotImplementedError("exercise choose_and_predict: return a dict")
