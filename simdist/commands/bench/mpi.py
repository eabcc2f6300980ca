"""``simdist bench mpi``: does a simulation run faster over more MPI ranks? Per workload.

Each workload runs in one process and under ``mpiexec -n N`` for each N of --ranks (default
1,2: one process, then two ranks), --repeat times, the runs interleaved (one process, two
ranks, one process, ...) so that a change in the machine's load hits both alike. Reported:
the best and the median run time, the speed-up over one process (a ratio of best times, and
of medians) and where each rank's time went (``transports.RankStats``: simulating, waiting at
window ends for the slowest rank, exchanging reports and payloads, serializing reports).

The run time is measured inside the processes, from the first time window to the process's
end (the slowest rank's); the launch (Python's start, ``mpiexec``'s) is the
'job' column. Each run is a process of its own, with one BLAS thread. This module reads the
wall clock: it measures the simulator from outside; the simulator itself never does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[3]
#: the BLAS threads of every run: one, so that N ranks use N cores
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS")}
#: the side of the square matrix each ring message multiplies by itself (about 50 us on a
#: 2020s core; the table's heading says what it measured here)
RING_MATRIX = 86
PHASES = ("simulate_s", "wait_s", "exchange_s", "serialize_s")


class Workload(NamedTuple):
    """One row group of the table: what runs (the arguments after ``python``)."""

    name: str
    what: str
    args: list
    quick: list  # the same workload made small (--quick)


def _simdist(*args) -> list:
    return ["-m", "simdist", *args]


def _worker(*args) -> list:
    return ["-m", "simdist.commands.bench.mpi", "--worker", *args]


WORKLOADS = [
    Workload("ring-numpy", f"engine ring, 256 tasks x 200 rounds, {RING_MATRIX}x{RING_MATRIX} "
             "matmul per message", _worker("ring", "256", "200"), _worker("ring", "16", "20")),
    Workload("mwms-128", "MultiWorkerMirroredStrategy, 128 workers x 5 steps (message)",
             _simdist("run", "multi_worker_mirrored", "--workers", "128", "--replicas", "1",
                      "--global-batch", "1024", "--steps", "5", "--quiet"),
             _simdist("run", "multi_worker_mirrored", "--workers", "8", "--replicas", "1",
                      "--global-batch", "64", "--steps", "2", "--quiet")),
    Workload("data-parallel-256", "data_parallel, 256 workers x 1 step, message fidelity",
             _simdist("run", "data_parallel", "--workers", "256", "--steps", "1", "--params",
                      "1e6", "--fidelity", "message", "--quiet"),
             _simdist("run", "data_parallel", "--workers", "8", "--steps", "1", "--quiet")),
    Workload("ring-allreduce-512", "ring all-reduce of 64 KiB on 512 tasks",
             _simdist("run", "allreduce", "-p", "512", "--algorithm", "ring", "--size",
                      "65536", "--quiet"),
             _simdist("run", "allreduce", "-p", "8", "--algorithm", "ring", "--quiet")),
    Workload("ps-sync-64", "simdist ps, 64 workers, sync, 20 steps",
             _simdist("ps", "--workers", "64", "--steps", "20"),
             _simdist("ps", "--workers", "4", "--steps", "4")),
    Workload("ps-async-64", "simdist ps, 64 workers, async, 20 steps",
             _simdist("ps", "--mode", "async", "--workers", "64", "--steps", "20"),
             _simdist("ps", "--mode", "async", "--workers", "4", "--steps", "4")),
    Workload("loader-trainer", "TF1 loader_trainer (queue runners), 50 steps",
             _worker("loader_trainer", "50"), _worker("loader_trainer", "6")),
    Workload("ensemble", "TF1 ensemble, 8 predictors x 8 inputs",
             _worker("ensemble", "8", "8"), _worker("ensemble", "3", "4")),
    Workload("in-graph", "TF1 in-graph training, 8 workers x 10 steps",
             _worker("in_graph", "8", "10"), _worker("in_graph", "3", "3")),
    Workload("tf1-between-graph", "simdist tf1 between_graph_trainer.py, ps=1,worker=3",
             _simdist("tf1", str(ROOT / "lessons" / "scripts" / "between_graph_trainer.py"),
                      "--cluster", "ps=1,worker=3"),
             _simdist("tf1", str(ROOT / "lessons" / "scripts" / "between_graph_trainer.py"),
                      "--cluster", "ps=1,worker=3")),
    Workload("parameter-server", "simdist run parameter_server, 16 workers x 40 steps",
             _simdist("run", "parameter_server", "--workers", "16", "--steps", "40",
                      "--quiet"),
             _simdist("run", "parameter_server", "--workers", "2", "--steps", "4", "--quiet")),
    Workload("evaluation-sidecar", "parameter_server, 8 workers x 40 steps, side-car evaluator",
             _simdist("run", "parameter_server", "--workers", "8", "--steps", "40",
                      "--evaluation", "sidecar", "--quiet"),
             _simdist("run", "parameter_server", "--workers", "2", "--steps", "8",
                      "--evaluation", "sidecar", "--quiet")),
    Workload("tpu-v3-128", "TPUStrategy on a v3-128 (16 host tasks), mlp, 10 steps",
             _simdist("run", "tpu", "--replicas", "128", "--model", "mlp", "--dataset",
                      "digits", "--global-batch", "128", "--steps", "10", "--quiet"),
             _simdist("run", "tpu", "--replicas", "32", "--global-batch", "64", "--steps",
                      "2", "--quiet")),
]


# -- the workloads this module runs itself (--worker), on every rank ------------------------

def _transport():
    from simdist.sim.launcher import under_mpiexec

    if not under_mpiexec():
        return None
    from simdist.sim.transports import MPITransport

    return MPITransport()


def ring_main(ctx, rounds: int, matrix):
    """The engine's ring (``bench engine``) with real numpy work per message."""
    import numpy as np

    from simdist.commands.bench.engine import delay

    n = ctx.num_tasks
    nxt, prev = (ctx.order + 1) % n, (ctx.order - 1) % n
    payload = np.ones(256, dtype=np.float32)
    for step in range(rounds):
        yield ctx.timeout(delay(ctx.order, step))
        ctx.send(nxt, 0, payload)
        msg = yield ctx.recv(prev, 0)
        payload = payload + msg.payload
        matrix @ matrix  # the compute a real program does per message


def run_worker(which: str, *sizes: int) -> None:
    import numpy as np

    transport = _transport()
    if which == "ring":
        from simdist.sim.scheduler import simulate

        tasks, rounds = sizes
        matrix = np.random.default_rng(0).random((RING_MATRIX, RING_MATRIX))
        simulate({"worker": tasks}, lambda ctx: ring_main(ctx, rounds, matrix), trace=False,
                 transport=transport)
    elif which == "loader_trainer":
        from simdist.training.input_pipeline import loader_trainer

        loader_trainer(capacity=2, loader_threads=2, steps=sizes[0], transport=transport)
    elif which == "ensemble":
        from simdist.training.ensemble import ensemble

        ensemble(predictors=sizes[0], inputs=sizes[1], slow=1, transport=transport)
    elif which == "in_graph":
        from simdist.training.replication import in_graph_training

        in_graph_training(workers=sizes[0], mode="sync", steps=sizes[1], transport=transport)
    else:
        raise SystemExit(f"simdist bench mpi: unknown worker {which!r}")


# -- measuring --------------------------------------------------------------------------

class Run(NamedTuple):
    """One run of one workload at one rank count."""

    ranks: int
    job_s: float  # the launch included
    run_s: float | None  # the slowest rank's time inside its process
    per_rank: list  # RankStats.as_dict() of each rank
    error: str | None


def run_once(workload: Workload, ranks: int, quick: bool, timeout: float) -> Run:
    from simdist.base.processes import die_with_parent
    from simdist.sim.launcher import run_mpi
    from simdist.sim.transports import STATS_ENV

    args = workload.quick if quick else workload.args
    with tempfile.TemporaryDirectory(prefix="simdist-bench-mpi-") as folder:
        prefix = str(Path(folder) / "stats")
        env = {**os.environ, **ONE_THREAD, STATS_ENV: prefix}
        start = time.perf_counter()
        try:
            if ranks == 1:
                proc = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                                      timeout=timeout, env=env, cwd=ROOT,
                                      preexec_fn=die_with_parent)
            else:
                proc = run_mpi(ranks, args, timeout=timeout, env=env, cwd=ROOT)
        except (subprocess.TimeoutExpired, TimeoutError):
            return Run(ranks, timeout, None, [], f"over {timeout:g} s")
        job = time.perf_counter() - start
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            return Run(ranks, job, None, [], f"exit {proc.returncode}: {last[:200]}")
        stats = []
        for rank in range(ranks):
            path = Path(f"{prefix}.rank{rank}.json")
            if not path.is_file():
                return Run(ranks, job, None, [], f"rank {rank} wrote no stats")
            stats.append(json.loads(path.read_text()))
    return Run(ranks, job, max(s["total_s"] for s in stats), stats, None)


def _fmt(x, width=8, digits=2) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}.{digits}f}"


#: a rank with more than this times its even share of the events makes a run uneven
UNEVEN = 1.25


def slower_reason(run: Run, one_cpu: float | None, one_s: float) -> str:
    """Why ``run`` (N ranks) took longer than one process, from its breakdown."""
    from simdist.commands.placement import LATENCY_BOUND_EVENTS

    events = [s.get("events", 0) for s in run.per_rank]
    heavy = max(range(run.ranks), key=events.__getitem__)
    share = events[heavy] / sum(events) if sum(events) else 0.0
    if share > UNEVEN * (1 / run.ranks):
        return (f"uneven work: rank {heavy} ran {share:.0%} of the events where an even share "
                f"is {1 / run.ranks:.0%} (tasks go to ranks in contiguous blocks by task "
                "order: a heavy task, such as a parameter server, weighs on its block)")
    busiest = max(s["cpu_s"] for s in run.per_rank)
    if one_cpu and busiest > 0.8 * one_cpu:
        return (f"the work does not split: the busiest rank used {busiest / one_cpu:.0%} of "
                "one process's processor time (what every rank repeats: the window's "
                "all-gather and its reports, the program's own shared work, and the whole "
                "network model where a machine is split over ranks)")
    wait = max(s["wait_s"] for s in run.per_rank)
    windows = run.per_rank[0]["windows"]
    per_rank = sum(events) / max(windows, 1) / run.ranks
    bound = (f"; latency-bound: {per_rank:.1f} events per window and rank, under "
             f"{LATENCY_BOUND_EVENTS}") if per_rank < LATENCY_BOUND_EVENTS else ""
    return (f"waiting at window ends: {wait / run.run_s:.0%} of the run, over {windows} "
            f"windows of {one_s / max(windows, 1) * 1e6:.0f} us of one process's time each "
            "(a rank waits for the slowest; on a loaded machine, for one the OS descheduled)"
            f"{bound}")


def table(results: dict, rank_counts, repeat: int, header: str) -> str:
    """The whole table: a row per workload and rank count, then per-rank breakdowns."""
    lines = [header, "",
             f"{'workload':<20}{'ranks':>6}{'best s':>9}{'median s':>10}{'job s':>8}"
             f"{'speed-up':>10}{'(median)':>10}{'CPU':>7}  where the time went, per rank (s): "
             "simulate / wait / exchange / serialize [CPU: simulating, all]; windows, "
             "events per window and rank"]
    for name, runs in results.items():
        ok = {n: [r for r in runs if r.ranks == n and r.error is None] for n in rank_counts}
        best = {n: min((r.run_s for r in ok[n]), default=None) for n in rank_counts}
        median = {n: statistics.median([r.run_s for r in ok[n]]) if ok[n] else None
                  for n in rank_counts}
        for n in rank_counts:
            failed = [r.error for r in runs if r.ranks == n and r.error]
            if not ok[n]:
                lines.append(f"{name:<20}{n:>6}  failed: {failed[0] if failed else 'not run'}")
                continue
            job = min(r.job_s for r in ok[n])
            speed = best[1] / best[n] if best.get(1) and n != 1 else None
            speed_med = median[1] / median[n] if median.get(1) and n != 1 else None
            fastest = min(ok[n], key=lambda r: r.run_s)
            one_cpu = min(r.per_rank[0]["cpu_s"] for r in ok[1]) if ok.get(1) else None
            busiest = max(s["cpu_s"] for s in fastest.per_rank)
            cpu = f"{one_cpu / busiest:.2f}x" if one_cpu and busiest and n != 1 else ""
            parts = ", ".join(
                f"r{s['rank']} " + "/".join(f"{s[p]:.2f}" for p in PHASES)
                + f" [{s['simulate_cpu_s']:.2f}, {s['cpu_s']:.2f}]" for s in fastest.per_rank)
            windows = fastest.per_rank[0]["windows"]
            events = sum(s.get("events", 0) for s in fastest.per_rank)
            per_window = f", {events / windows / n:.1f} ev/win/rank" if windows else ""
            ratio = "1.00x" if n == 1 else ("-" if speed is None else f"{speed:.2f}x")
            ratio_med = "" if speed_med is None else f"{speed_med:.2f}x"
            lines.append(f"{name:<20}{n:>6}{_fmt(best[n], 9)}{_fmt(median[n], 10)}"
                         f"{_fmt(job, 8)}{ratio:>10}{ratio_med:>10}{cpu:>7}  {parts}; "
                         f"{windows} win{per_window}")
            if speed is not None and speed < 1.0:
                lines.append(f"{'':<26}slower than one process: "
                             f"{slower_reason(fastest, one_cpu, best[1])}")
            if failed:
                lines.append(f"{'':<26}({len(failed)} of {repeat} runs failed: {failed[0]})")
    lines += ["", "speed-up = one process's run time / N ranks' (best of each; then medians). "
              "CPU = one process's processor time / the busiest rank's: the speed-up if "
              "each rank had a core of its own and waited for nothing. "
              "run time: inside the processes (the slowest rank); job s: the launch "
              "included. wait: at window ends for the slowest rank (the window's all-gather); "
              "exchange: reports too large for their slot, payloads apart; serialize: "
              "pickling the window reports. CPU: the rank's processor time, simulating "
              "(outside the transport) and in all: on a loaded machine a rank gets less than "
              "a core, and wall times measure that too."]
    return "\n".join(lines) + "\n"


def measure_matmul_us() -> float:
    """The ring's matmul here, in microseconds (in a process with one BLAS thread)."""
    code = ("import time, numpy as np\n"
            f"m = np.random.default_rng(0).random(({RING_MATRIX}, {RING_MATRIX}))\n"
            "t = time.perf_counter()\n"
            "for _ in range(500): m @ m\n"
            "print((time.perf_counter() - t) / 500 * 1e6)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **ONE_THREAD}, timeout=120)
    return float(proc.stdout) if proc.returncode == 0 else float("nan")


def main(argv=None) -> int:
    from simdist.base.files import check_output, write_atomic
    from simdist.sim.launcher import check_ranks

    names = [w.name for w in WORKLOADS]
    parser = argparse.ArgumentParser(prog="simdist bench mpi", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small workloads, one run each")
    parser.add_argument("--ranks", default="1,2",
                        help="rank counts, comma-separated, 1 first (default 1,2; e.g. 1,2,4)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each workload at each rank count (default 3; --quick: 1)")
    parser.add_argument("--workloads", default=",".join(names),
                        help=f"which, comma-separated (default all: {', '.join(names)})")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one run may take (default 600)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the table here too")
    args = parser.parse_args(argv)
    try:
        rank_counts = [check_ranks(int(n)) for n in args.ranks.split(",")]
    except ValueError:
        parser.error(f"--ranks {args.ranks!r}: expected rank counts such as 1,2,4")
    if rank_counts[0] != 1 or len(set(rank_counts)) != len(rank_counts):
        parser.error(f"--ranks {args.ranks!r}: expected distinct counts starting with 1")
    chosen = args.workloads.split(",")
    unknown = [c for c in chosen if c not in names]
    if unknown:
        parser.error(f"--workloads: unknown {unknown[0]!r}; expected some of "
                     f"{', '.join(names)}")
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: expected 1 or more")
    if args.output:
        check_output(args.output, "--output")
    repeat = 1 if args.quick and "--repeat" not in (argv or sys.argv) else args.repeat

    workloads = [w for w in WORKLOADS if w.name in chosen]
    header = (f"simdist bench mpi{' --quick' if args.quick else ''}: ranks "
              f"{','.join(map(str, rank_counts))}, {repeat} run(s) each, interleaved; "
              f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the "
              f"start; ring matmul {measure_matmul_us():.0f} us here")
    print(header, flush=True)
    results: dict = {}
    total = len(workloads) * repeat * len(rank_counts)
    done = 0
    for workload in workloads:
        print(f"-- {workload.name}: "
              f"{'a small version of: ' if args.quick else ''}{workload.what}", flush=True)
        runs = results[workload.name] = []
        for attempt in range(repeat):
            for n in rank_counts:
                run = run_once(workload, n, args.quick, args.timeout)
                runs.append(run)
                done += 1
                said = run.error or f"{run.run_s:.2f} s (job {run.job_s:.2f} s)"
                print(f"[{done}/{total}] {workload.name}, {n} rank(s), run {attempt + 1}: "
                      f"{said}", flush=True)
    text = table(results, rank_counts, repeat, header)
    print("\n" + text, end="")
    if args.output:
        write_atomic(args.output, text)
        print(f"table written to {args.output}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        run_worker(sys.argv[2], *map(int, sys.argv[3:]))
    else:
        sys.exit(main())
