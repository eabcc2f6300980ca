"""``simdist bench engine``: how fast the event kernel runs, against SimPy and over MPI ranks.

Workload: T tasks in a ring; each, R times, waits a pseudo-random compute time, sends a
1 KiB message to its successor and waits for its predecessor's. The same workload is written
for SimPy (a Store per task, a Timeout per message for its link time). Reported: kernel
events per second of each, and the ratio of their speeds on the same workload (SimPy's wall
time / simdist's). Then the same ring with 256 tasks and real numpy payloads under
``mpiexec -n 1`` and ``-n 2``, and the speed-up. This module reads the wall clock: it measures
the simulator from outside; the simulator itself never does.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from simdist.sim.payloads import Phantom
from simdist.sim.scheduler import simulate

LINK_NS = 10_000 + 820  # the cpu system's 10gbe latency and 1 KiB serialization, roughly


def delay(task: int, step: int) -> int:
    return 1000 + (task * 37 + step * 101) % 500


def simdist_ring(ctx, rounds: int, payload):
    n = ctx.num_tasks
    nxt, prev = (ctx.order + 1) % n, (ctx.order - 1) % n
    for step in range(rounds):
        yield ctx.timeout(delay(ctx.order, step))
        ctx.send(nxt, 0, payload)
        msg = yield ctx.recv(prev, 0)
        if isinstance(payload, np.ndarray):
            payload = payload + msg.payload  # real data: a reduction step
    return None


def simpy_ring(tasks: int, rounds: int):
    """The same ring in SimPy; returns (events, seconds)."""
    import simpy

    env = simpy.Environment()
    stores = [simpy.Store(env) for _ in range(tasks)]

    def task(i):
        nxt = (i + 1) % tasks
        for step in range(rounds):
            yield env.timeout(delay(i, step))
            arrive = env.timeout(LINK_NS, value=b"x" * 0)
            arrive.callbacks.append(lambda ev, store=stores[nxt]: store.put(ev.value))
            yield stores[i].get()

    for i in range(tasks):
        env.process(task(i))
    start = time.perf_counter()
    env.run()
    seconds = time.perf_counter() - start
    return next(env._eid), seconds


def simdist_run(tasks: int, rounds: int, trace: bool, transport=None, payload=None):
    """The ring in simdist; returns (events, seconds)."""
    payload = Phantom(1024) if payload is None else payload
    start = time.perf_counter()
    result = simulate({"worker": tasks}, lambda ctx: simdist_ring(ctx, rounds, payload),
                      trace=trace, transport=transport)
    seconds = time.perf_counter() - start
    return result.events, seconds


def best_of(repeats, fn, *args):
    runs = [fn(*args) for _ in range(repeats)]
    return min(runs, key=lambda r: r[1])


def mpi_worker(tasks: int, rounds: int):
    """Run under mpiexec: the 256-task ring with real payloads; rank 0 prints JSON."""
    from simdist.sim.transports import MPITransport

    transport = MPITransport()
    transport.barrier()
    payload = np.ones(256, dtype=np.float32)
    events, seconds = simdist_run(tasks, rounds, trace=False, transport=transport,
                                  payload=payload)
    if transport.rank == 0:
        print(json.dumps({"ranks": transport.size, "seconds": seconds, "events": events}))


def main(argv=None) -> int:
    from simdist.sim.launcher import run_mpi

    parser = argparse.ArgumentParser(prog="simdist bench engine", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller workload")
    quick = parser.parse_args(argv).quick

    tasks, rounds = (64, 200) if quick else (100, 1000)
    repeats = 1 if quick else 3
    print(f"simdist bench engine: {tasks} tasks x {rounds} rounds of timeout + 1 KiB message "
          f"(best of {repeats})\n")
    print(f"{'engine':<24}{'events':>10}{'seconds':>10}{'events/s':>12}"
          f"{'speed vs SimPy':>16}{'target':>8}", flush=True)
    targets = {"simdist, tracing off": 1.0, "simdist, tracing on": 0.5}
    runs = [("SimPy 4 (reference)", simpy_ring, (tasks, rounds)),
            ("simdist, tracing off", simdist_run, (tasks, rounds, False)),
            ("simdist, tracing on", simdist_run, (tasks, rounds, True))]
    simpy_seconds = None
    for label, fn, fn_args in runs:  # each row printed as soon as it is measured
        events, seconds = best_of(repeats, fn, *fn_args)
        simpy_seconds = simpy_seconds or seconds
        ratio = simpy_seconds / seconds
        target = targets.get(label)
        mark = "" if target is None else f">={target}x " + ("ok" if ratio >= target else "MISS")
        print(f"{label:<24}{events:>10}{seconds:>10.3f}{events / seconds:>12,.0f}"
              f"{ratio:>15.2f}x{mark:>14}", flush=True)
    print("\n'speed vs SimPy' = SimPy's wall time / simdist's on the same workload "
          "(kernel events per round and task: SimPy 4, simdist 3).")

    mpi_tasks, mpi_rounds = 256, (50 if quick else 200)
    print(f"\nMPI: {mpi_tasks} tasks x {mpi_rounds} rounds, 1 KiB numpy payloads "
          "(python -m mpi4py, wall time inside the run)")
    times = {}
    for n in (1, 2):
        proc = run_mpi(n, ["-m", "simdist.commands.bench.engine", "--mpi-worker", "--tasks",
                           str(mpi_tasks), "--rounds", str(mpi_rounds)], timeout=600)
        if proc.returncode != 0:
            print(f"mpiexec -n {n} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
            return 1
        times[n] = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
        print(f"  mpiexec -n {n}: {times[n]:8.3f} s")
    print(f"  speed-up 2 ranks vs 1: {times[1] / times[2]:.2f}x")
    return 0


if __name__ == "__main__":
    if "--mpi-worker" in sys.argv:
        worker = argparse.ArgumentParser()
        worker.add_argument("--mpi-worker", action="store_true")
        worker.add_argument("--tasks", type=int, default=256)
        worker.add_argument("--rounds", type=int, default=200)
        options = worker.parse_args()
        mpi_worker(options.tasks, options.rounds)
    else:
        sys.exit(main())
