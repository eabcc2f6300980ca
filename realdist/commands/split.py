"""``realdist split STRATEGY``: which examples each replica receives, TF's own split of a
global batch, beside simdist's rule (``simdist.distribute.input_lib.split_global_batch``).
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.hardware.units import check_seconds


def add_arguments(split) -> None:
    """``realdist split``'s options: the strategy and the cluster, batch and dataset sizes."""
    split.add_argument("strategy", metavar="STRATEGY", choices=["mirrored",
                                                                "multi_worker_mirrored"])
    split.add_argument("--replicas", type=int, default=4, help="replicas per worker")
    split.add_argument("--workers", type=int, default=2, help="workers (multi_worker_mirrored)")
    split.add_argument("--global-batch", type=int, default=7)
    split.add_argument("--examples", type=int, default=16, help="examples in the dataset")
    split.add_argument("--timeout", type=float, default=120, metavar="S")


def cmd_split(args) -> int:
    from simdist.distribute.input_lib import split_global_batch

    check_seconds(args.timeout, "--timeout")
    for name in ("replicas", "workers", "global_batch", "examples"):
        if getattr(args, name) < 1:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} must be >= 1, got "
                                       f"{getattr(args, name)}")
    if args.strategy == "mirrored":
        from realdist.runtime.devices import replica_devices
        from realdist.distribute.split import received_ids
        from realdist.runtime.tfenv import tf

        devices, _ = replica_devices(args.replicas)
        workers = [received_ids(tf.distribute.MirroredStrategy(devices), args.examples,
                                args.global_batch)]
        replicas = args.replicas
    else:
        from realdist.distribute.multiworker import multi_worker_split

        workers = multi_worker_split(args.workers, args.examples, args.global_batch,
                                     timeout=args.timeout)
        replicas = args.workers
    from realdist.distribute.split import format_split

    rule = split_global_batch(args.global_batch, replicas)
    print(f"TF's split of global batches of {args.global_batch} over {replicas} replicas "
          f"(simdist.distribute.input_lib.split_global_batch: {rule})")
    for line in format_split(workers):
        print(line)
    return 0
