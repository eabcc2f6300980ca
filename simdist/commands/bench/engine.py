"""``simdist bench engine``: how fast the event kernel runs, against SimPy and over MPI ranks.

Workload: T tasks in a ring; each, R times, waits a pseudo-random compute time, sends a
1 KiB message to its successor and waits for its predecessor's. The same workload is written
twice for SimPy: with a Store per task and a Timeout per message for its link time (4 kernel
events per round), and lean, as SimPy's documentation has processes wait for each other
(the receiver yields the message's own arrival Timeout, or an ``env.event()`` that the
sender succeeds when the receiver was there first: 2 to 3 events per round, as simdist's 2).
The lean program runs a second time, unchanged, on simdist's own kernel
(``simdist.sim.core.Environment``, SimPy's API): the two kernels alone, the same source and
the same events. Then the ring through simdist's tasks (``ctx.send``, ``ctx.recv``), tracing
off and on: each message there also takes its sender's and receiver's NIC queues, a time
window (what lets a run spread over MPI ranks), a Message record and a receive matched by
source and tag, which the SimPy programs leave out; and once more with that message path
written out inline (``floor.py``: the same model and end time, every call and check it can
spare gone), the most the ring could gain in Python. The engines run interleaved (one run
of each in turn, --repeat times). Reported: kernel events per round and per second of each,
and each one's speed against each SimPy program on the same workload (SimPy's best wall time
/ its own). Then the same ring with 256 tasks and real numpy payloads under ``mpiexec -n 1``
and ``-n 2``, interleaved as many times, and the speed-up. This module reads the wall clock:
it measures the simulator from outside; the simulator itself never does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import deque

import numpy as np

from simdist.commands.bench.floor import floor_ring
from simdist.sim.core import Environment
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

    return _run_simpy(env, tasks, task)


def _run_simpy(env, tasks: int, task):
    """Start ``task(i)`` for every task and run ``env`` (SimPy's or simdist's kernel) to the
    end: (events, seconds)."""
    for i in range(tasks):
        env.process(task(i))
    start = time.perf_counter()
    env.run()
    seconds = time.perf_counter() - start
    events = getattr(env, "events_scheduled", None)
    return (next(env._eid) if events is None else events), seconds


def lean_ring(env, tasks: int, rounds: int):
    """The ring written for SimPy's API without a Store, on ``env``: (events, seconds)."""
    inbox = [deque() for _ in range(tasks)]  # arrival Timeouts not yet waited for
    doorbell = [None] * tasks  # the event a receiver waits on when its inbox was empty

    def task(i):
        nxt, box = (i + 1) % tasks, inbox[i]
        for step in range(rounds):
            yield env.timeout(delay(i, step))
            arrival = env.timeout(LINK_NS)
            if doorbell[nxt] is not None:
                bell, doorbell[nxt] = doorbell[nxt], None
                bell.succeed(arrival)
            else:
                inbox[nxt].append(arrival)
            if box:
                yield box.popleft()
            else:
                doorbell[i] = env.event()
                yield (yield doorbell[i])

    return _run_simpy(env, tasks, task)


def simpy_lean_ring(tasks: int, rounds: int):
    """The lean ring on SimPy's kernel."""
    import simpy

    return lean_ring(simpy.Environment(), tasks, rounds)


def kernel_lean_ring(tasks: int, rounds: int):
    """The same lean ring, unchanged, on simdist's kernel."""
    return lean_ring(Environment(), tasks, rounds)


def simdist_run(tasks: int, rounds: int, trace: bool, transport=None, payload=None):
    """The ring in simdist; returns (events, seconds)."""
    payload = Phantom(1024) if payload is None else payload
    start = time.perf_counter()
    result = simulate({"worker": tasks}, lambda ctx: simdist_ring(ctx, rounds, payload),
                      trace=trace, transport=transport)
    seconds = time.perf_counter() - start
    return result.events, seconds


def floor_run(tasks: int, rounds: int):
    """The ring with simdist's message path inlined (``floor.py``): (events, seconds)."""
    events, seconds, _ = floor_ring(tasks, rounds, delay)
    return events, seconds


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
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs of each engine, interleaved (default 5; --quick: 1)")
    options = parser.parse_args(argv)
    quick = options.quick
    repeats = options.repeat or (1 if quick else 5)
    if repeats < 1:
        parser.error(f"--repeat {repeats}: expected 1 or more")

    tasks, rounds = (64, 200) if quick else (100, 1000)
    print(f"simdist bench engine: {tasks} tasks x {rounds} rounds of timeout + 1 KiB message "
          f"({repeats} run(s) of each engine, interleaved; best and median)\n")
    engines = [("SimPy 4, Store (reference)", simpy_ring, (tasks, rounds)),
               ("SimPy 4, lean (reference)", simpy_lean_ring, (tasks, rounds)),
               ("lean, on simdist's kernel", kernel_lean_ring, (tasks, rounds)),
               ("simdist, tracing off", simdist_run, (tasks, rounds, False)),
               ("its message path inlined", floor_run, (tasks, rounds)),
               ("simdist, tracing on", simdist_run, (tasks, rounds, True))]
    runs = {label: [] for label, _, _ in engines}
    for _ in range(repeats):
        for label, fn, fn_args in engines:
            runs[label].append(fn(*fn_args))
    best = {label: min(s for _, s in r) for label, r in runs.items()}
    median = {label: statistics.median(s for _, s in r) for label, r in runs.items()}
    store, lean = best[engines[0][0]], best[engines[1][0]]
    targets = {"simdist, tracing off": 1.0, "simdist, tracing on": 0.5}
    print(f"{'engine':<28}{'events/round':>13}{'best s':>9}{'median s':>10}{'events/s':>12}"
          f"{'vs Store':>10}{'vs lean':>9}{'target (vs lean)':>18}")
    for label, _, _ in engines:
        events = runs[label][0][0]
        target = targets.get(label)
        ratio_lean = lean / best[label]
        mark = "" if target is None else \
            f">={target}x " + ("ok" if ratio_lean >= target else "MISS")
        print(f"{label:<28}{events / (tasks * rounds):>13.2f}{best[label]:>9.3f}"
              f"{median[label]:>10.3f}{events / best[label]:>12,.0f}"
              f"{store / best[label]:>9.2f}x{ratio_lean:>8.2f}x{mark:>18}")
    print("\n'vs Store', 'vs lean' = that SimPy program's best wall time / this engine's, on "
          "the same workload (kernel events per round and task in the first column).\n"
          "'lean, on simdist's kernel': the lean SimPy program, unchanged, on simdist's "
          "kernel (simdist.sim.core.Environment): the kernels alone.\n'simdist, tracing "
          "off/on': the ring through ctx.send and ctx.recv; each message also takes both "
          "ends' NIC queues (10 GbE),\na time window of the conservative scheme that lets a "
          "run spread over MPI ranks, a Message record and a receive matched by source and "
          "tag,\nnone of which the SimPy programs model; tracing on also records 4 spans and "
          "a flow arrow per message.\n'its message path inlined': simdist's ring with its "
          "message path written out in one function (floor.py: the same model and end time),"
          "\nthe most that trimming the message path could gain.")

    mpi_tasks, mpi_rounds = 256, (50 if quick else 200)
    print(f"\nMPI: {mpi_tasks} tasks x {mpi_rounds} rounds, 1 KiB numpy payloads "
          f"(python -m mpi4py, wall time inside the run; {repeats} run(s) each, interleaved)")
    times = {1: [], 2: []}
    for _ in range(repeats):
        for n in times:
            proc = run_mpi(n, ["-m", "simdist.commands.bench.engine", "--mpi-worker",
                               "--tasks", str(mpi_tasks), "--rounds", str(mpi_rounds)],
                           timeout=600)
            if proc.returncode != 0:
                print(f"mpiexec -n {n} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
                return 1
            times[n].append(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])
    for n, runs_n in times.items():
        print(f"  mpiexec -n {n}: {min(runs_n):8.3f} s best, "
              f"{statistics.median(runs_n):8.3f} s median")
    print(f"  speed-up 2 ranks vs 1: {min(times[1]) / min(times[2]):.2f}x best against best, "
          f"{statistics.median(times[1]) / statistics.median(times[2]):.2f}x median")
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
