"""Lesson 09, When the network saturates: reference solutions."""

BYTES = {"float32": 4, "float16": 2}


def ps_nic_bytes(parameters, workers, ps, gradient_dtype):
    """Each worker pushes its gradient (cast to ``gradient_dtype``) and pulls the float32
    weights; each ps holds and carries 1/ps of them."""
    return (workers * parameters * BYTES[gradient_dtype] // ps,
            workers * parameters * 4 // ps)


def choose_ps_shards():
    """One worker alone makes an update every 8.7 ms and keeps a ps NIC busy 3.2 ms of them
    (4 MB at 1.25 GB/s) in each direction: four offer 4 x 3.2 / 8.7 = 1.47 NICs' worth. Two
    ps tasks would be 73% busy (the simulator measures 57%, as queueing slows the workers
    down), three 49% (measured 44%)."""
    return 3


def backup_workers_for_throughput():
    """A step waits for the fastest 6 - b gradients: b = 0 waits for the 6 ms worker (6
    gradients in a 5.6 ms step: 1,063/s), b = 1 for the 3 ms one (5 in 3.1 ms: 1,609/s),
    b = 2 only for 1 ms workers (4 in 2.1 ms: 1,874/s, the most), b = 3 is no faster with
    one gradient fewer (1,433/s)."""
    return 2


def choose_ps_for_float16():
    """Float16 halves the pushes only: every pull still carries the float32 weights, so the
    egress is the busier direction, 2 MB (1.6 ms on the wire) per update whatever the
    gradients. And a worker whose push is shorter comes back for the weights sooner: one
    alone makes an update every 3.75 ms. Four offer 4 x 1.6 / 3.75 = 1.71 NICs' worth of
    egress: three ps tasks would be 57% busy (measured 50%), four 43% (measured 41%)."""
    return 4


def sparse_update():
    # the update changes each row looked up once (row 3 by the sum of its three gradients);
    # the IndexedSlices keeps all 8 lookups: 8 rows of 4 float32 and 8 int32 indices
    rows = sorted({3, 8, 3, 1, 8, 3, 6, 0})
    return rows, 8 * 4 * 4 + 8 * 4
