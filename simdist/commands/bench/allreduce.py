"""``simdist bench allreduce``: the simulator's data path against ``MPI_Allreduce``.

Run under ``mpiexec --mca btl ^tcp -n N python -m mpi4py -m simdist bench allreduce``
(started without mpiexec, it launches ``mpiexec -n 2`` itself, with the same flags;
``--ranks`` changes N). Each of the N ranks
runs one simulated task (``simulate({"worker": N}, ..., transport=MPITransport(),
trace=False)``), and the N tasks all-reduce real float32 buffers with the ring algorithm
(``--algorithm`` picks another), so the chunks travel between ranks as real MPI messages.
For every size the benchmark takes the real wall-clock time of the whole ``simulate`` call
(barrier first, then the maximum over ranks): what it costs the simulator to move and add
the data, not the simulated time. Then ``comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)`` on
the same buffers, the same number of times, as the reference, and a check that both give
the same values (``np.allclose``).

The table follows nccl-tests (NVIDIA/nccl-tests, doc/PERFORMANCE.md): algbw = size / time;
busbw = algbw x 2(N-1)/N, the bandwidth each rank's link carries in a ring all-reduce, which
is comparable between rank counts. GB/s = 10**9 bytes/s.

Columns: size (bytes per rank) and count (float32 elements); time (us), algbw and busbw of
each side, the time being the best (or, with --stat mean, the mean) of --iters iterations
after --warmup untimed ones, each the slowest rank's; ratio = simdist busbw / MPI busbw (on
one rank, where busbw is 0, the ratio of the algbw); values = "match" when the simulated
result equals MPI's on every rank; target = ok or MISS against ratio >= 0.8, checked at
16 MiB and more on 2 ranks ("-" elsewhere). A MISS is reported, not hidden, and is not an
error: the exit status is 0, 1 when the values differ, 2 for bad options.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from simdist.hardware import units
from simdist.collectives import ALGORITHMS
from simdist.commands import option_type
from simdist.base.checks import check_footprint
from simdist.base.errors import InvalidArgumentError, ResourceExhaustedError
from simdist.sim.launcher import under_mpiexec

DEFAULT_SIZES = (1 << 10, 16 << 10, 256 << 10, 4 << 20, 16 << 20, 64 << 20)
TARGET_RATIO = 0.8
TARGET_MIN_BYTES = 16 << 20
TARGET_RANKS = 2
ITEMSIZE = 4  # float32
COPIES = 6  # buffers of the largest size one rank holds at once (check_memory)


def parse_sizes(text: str) -> list[int]:
    """Buffer sizes in bytes, as ``units.parse_sizes`` reads them ("1KiB,64KiB,4MiB"), each a
    whole number of float32 elements."""
    sizes = units.parse_sizes(text)
    for size in sizes:
        if size % ITEMSIZE:
            raise InvalidArgumentError(
                f"size {size} bytes in {text!r}: it must be a whole multiple of {ITEMSIZE} "
                "bytes (float32 elements)")
    return sizes


def check_memory(sizes: list[int], ranks: int) -> None:
    """Refuse sizes whose buffers would not fit: each rank holds about ``COPIES`` copies of
    the largest (measured: 256 MiB took 1.55 GiB of resident memory per rank), and all
    ranks run on this machine."""
    largest = max(sizes, default=0)
    check_footprint(ranks * COPIES * largest, f"--sizes {units.format_bytes(largest)} on "
                    f"{ranks} rank(s)", f"{COPIES} copies of the buffer per rank: its send and "
                    "receive buffers, the simulated all-reduce's chunks and result",
                    "give smaller sizes or fewer ranks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simdist bench allreduce", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: mpiexec --oversubscribe --mca btl ^tcp -n 2 python -m mpi4py -m simdist "
               "bench allreduce --sizes 16MiB,64MiB --iters 10\n(--mca btl ^tcp: the ranks "
               "talk through shared memory and open no TCP port; Open MPI only)\n")
    parser.add_argument("--sizes", type=option_type(parse_sizes), default=list(DEFAULT_SIZES),
                        metavar="LIST",
                        help="comma-separated buffer sizes in bytes per rank: k/K, M, G = 1000, "
                             "1000**2, 1000**3; Ki, Mi, Gi (or KiB, MiB, GiB) = 1024, 1024**2, "
                             "1024**3 (default 1KiB,16KiB,256KiB,4MiB,16MiB,64MiB)")
    parser.add_argument("--iters", type=int, default=5,
                        help="timed iterations of each side per size (default 5)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed iterations before them (default 1)")
    parser.add_argument("--stat", choices=("best", "mean"), default="best",
                        help="which time per size: the best (smallest) or the mean of the "
                             "timed iterations, each the maximum over ranks (default best; "
                             "the same statistic for both sides)")
    parser.add_argument("--algorithm", default="ring", choices=list(ALGORITHMS),
                        help="simulated all-reduce algorithm (default ring)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the buffers (default 0)")
    parser.add_argument("--ranks", type=int, default=2,
                        help="only when started without mpiexec: launch "
                             "'mpiexec -n RANKS' (default 2; at most 8 per CPU core and 256 "
                             "in all: each rank is a Python process, and more than 8 per core "
                             "measure the OS scheduler)")
    parser.add_argument("--timeout", type=float, default=600,
                        help="only when started without mpiexec: seconds before the launched "
                             "job is killed (default 600)")
    return parser


# -- under mpiexec ----------------------------------------------------------------------------


def _timed(transport, fn) -> float:
    """Seconds ``fn()`` takes, from a common start (barrier), the slowest rank's."""
    transport.barrier()
    start = time.perf_counter()
    fn()
    return transport.allreduce(time.perf_counter() - start, op="max")


def _stat(times: list[float], which: str) -> float:
    return min(times) if which == "best" else sum(times) / len(times)


def measure(transport, size: int, iters: int, warmup: int, stat: str,
            algorithm: str = "ring", seed: int = 0) -> dict:
    """Time the simulated all-reduce and MPI_Allreduce of ``size`` bytes on every rank of
    ``transport`` (an ``MPITransport``); every rank returns the same dict (times in seconds,
    ``match`` for the values)."""
    from simdist.collectives import all_reduce
    from simdist.sim.scheduler import simulate

    n = transport.size
    count = size // ITEMSIZE
    sendbuf = np.random.default_rng([seed, transport.rank]).standard_normal(
        count, dtype=np.float32)
    recvbuf = np.empty_like(sendbuf)
    members = list(range(n))
    got = {}

    def program(ctx):
        # the result stays on this rank (returning it would also time a gather to rank 0)
        got["value"] = yield from all_reduce(ctx, members, sendbuf, algorithm=algorithm)

    def simulated():
        simulate({"worker": n}, program, transport=transport, trace=False)

    def reference():
        transport.allreduce_buffer(sendbuf, recvbuf)

    sim_times, mpi_times = [], []
    for i in range(warmup + iters):  # interleaved, so that both see the same machine state
        t_sim = _timed(transport, simulated)
        t_mpi = _timed(transport, reference)
        if i >= warmup:
            sim_times.append(t_sim)
            mpi_times.append(t_mpi)
    value = got.get("value")
    ok = (value is not None and value.shape == recvbuf.shape
          and bool(np.allclose(value, recvbuf, rtol=1e-5, atol=1e-5)))
    match = bool(transport.allreduce(ok, op="land"))
    return {"bytes": size, "count": count, "sim_s": _stat(sim_times, stat),
            "mpi_s": _stat(mpi_times, stat), "match": match}


def bandwidths(size: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (10**9 bytes/s), as nccl-tests computes them."""
    algbw = size / seconds / 1e9 if seconds > 0 else float("inf")
    return algbw, algbw * 2 * (ranks - 1) / ranks


def target_mark(size: int, ranks: int, ratio: float) -> str:
    if ranks != TARGET_RANKS or size < TARGET_MIN_BYTES:
        return "-"
    return ("ok" if ratio >= TARGET_RATIO else "MISS") + f" (>={TARGET_RATIO})"


HEADER = (f"{'size':>12}{'count':>12}{'type':>8}{'redop':>6}  |"
          f"{'time':>10}{'algbw':>8}{'busbw':>8}  |{'time':>10}{'algbw':>8}{'busbw':>8}  |"
          f"{'ratio':>7}{'values':>8}  target")


def units_line(ranks: int) -> str:
    ratio_of = "busbw" if ranks > 1 else "algbw"  # busbw is 0 on one rank
    return (f"{'(B)':>12}{'(elements)':>12}{'':>8}{'':>6}  |"
            f"{'(us)':>10}{'(GB/s)':>8}{'(GB/s)':>8}  |{'(us)':>10}{'(GB/s)':>8}{'(GB/s)':>8}"
            f"  |{ratio_of:>7}")


def format_row(row: dict, ranks: int) -> tuple[str, float]:
    sim_alg, sim_bus = bandwidths(row["bytes"], row["sim_s"], ranks)
    mpi_alg, mpi_bus = bandwidths(row["bytes"], row["mpi_s"], ranks)
    ratio = sim_bus / mpi_bus if ranks > 1 else sim_alg / mpi_alg
    line = (f"{row['bytes']:>12}{row['count']:>12}{'float':>8}{'sum':>6}  |"
            f"{row['sim_s'] * 1e6:>10.1f}{sim_alg:>8.3f}{sim_bus:>8.3f}  |"
            f"{row['mpi_s'] * 1e6:>10.1f}{mpi_alg:>8.3f}{mpi_bus:>8.3f}  |"
            f"{ratio:>7.2f}{'match' if row['match'] else 'DIFFER':>8}  "
            f"{target_mark(row['bytes'], ranks, ratio)}")
    return line, ratio


def run(options) -> int:
    """The benchmark itself, on every rank of COMM_WORLD; rank 0 prints."""
    from simdist.sim.transports import MPITransport

    transport = MPITransport()
    rank, ranks = transport.rank, transport.size
    try:  # every rank: all stop at once, rank 0 says why
        check_memory(options.sizes, ranks)
    except ResourceExhaustedError as error:
        if rank == 0:
            print(f"simdist bench allreduce: error: {error}", file=sys.stderr)
        return 2

    def say(text=""):
        if rank == 0:
            print(text, flush=True)

    say(f"simdist bench allreduce: {options.algorithm} all-reduce of float32 buffers on "
        f"{ranks} rank(s), one simulated task per rank")
    say("left: wall time of the whole simulate() call (simdist's data path over MPI, "
        "trace off); right: comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)")
    say(f"time = {options.stat} of {options.iters} iteration(s) after {options.warmup} "
        f"warm-up, each the slowest rank's; algbw = size/time, "
        f"busbw = algbw x 2(N-1)/N = algbw x {2 * (ranks - 1) / ranks:.2f}")
    if ranks == 1:
        say("note: with 1 rank nothing crosses a link, so busbw = algbw x 2(N-1)/N = 0; "
            "'ratio' is then simdist algbw / MPI algbw and the target (2 ranks) does not "
            "apply. Run under mpiexec -n 2 for the real comparison.")
    elif ranks != TARGET_RANKS:
        say(f"note: the target (ratio >= {TARGET_RATIO} at >= "
            f"{units.format_bytes(TARGET_MIN_BYTES)}) is defined for {TARGET_RANKS} ranks; "
            f"with {ranks} it is not checked.")
    say()
    say(f"{'':>38}  |{'simdist ' + options.algorithm + ' (simulate)':^26}  |"
        f"{'MPI_Allreduce':^26}  |")
    say(HEADER)
    say(units_line(ranks))
    rows, misses, differ = [], 0, []
    for size in options.sizes:
        try:
            row = measure(transport, size, options.iters, options.warmup, options.stat,
                          options.algorithm, options.seed)
        except NotImplementedError as error:
            say(f"note: {options.algorithm} is not implemented yet ({error}); nothing to "
                "measure")
            return 2
        line, ratio = format_row(row, ranks)
        say(line)
        rows.append(row)
        misses += target_mark(size, ranks, ratio).startswith("MISS")
        if not row["match"]:
            differ.append(size)
    say()
    if differ:
        say("VALUES DIFFER from MPI_Allreduce at: "
            + ", ".join(units.format_bytes(s) for s in differ))
    else:
        say(f"values match: the simulated {options.algorithm} all-reduce equals "
            f"MPI_Allreduce (np.allclose) at every size, on every rank")
    if ranks == TARGET_RANKS:
        checked = sum(1 for r in rows if r["bytes"] >= TARGET_MIN_BYTES)
        if checked:
            say(f"target ratio >= {TARGET_RATIO} at >= {units.format_bytes(TARGET_MIN_BYTES)}: "
                f"{checked - misses} of {checked} size(s) ok"
                + (f", {misses} MISS" if misses else ""))
    return 1 if differ else 0


# -- entry points -----------------------------------------------------------------------------


def _launch(options_argv) -> int:
    """Not under mpiexec: run this module under ``mpiexec -n RANKS`` (at most ``max_ranks``)
    and relay its output."""
    from simdist.sim.launcher import SAFE_FLAGS, check_ranks, mpiexec_flags, run_mpi

    options, argv = options_argv
    check_ranks(options.ranks)
    check_memory(options.sizes, options.ranks)
    argv = list(_strip_launch_options(argv))
    root = str(Path(__file__).resolve().parents[3])
    path = os.environ.get("PYTHONPATH")
    env = {"PYTHONPATH": root + (os.pathsep + path if path else "")}
    safe = " ".join(SAFE_FLAGS) + " " if SAFE_FLAGS[0] in mpiexec_flags() else ""
    print(f"(not under mpiexec: launching mpiexec {safe}-n {options.ranks} python -m mpi4py "
          f"-m simdist.commands.bench.allreduce {' '.join(argv)})", flush=True)
    proc = run_mpi(options.ranks, ["-m", "simdist.commands.bench.allreduce", *argv],
                   timeout=options.timeout, env=env)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
    return proc.returncode


def main(argv=None) -> int:
    """``simdist bench allreduce [options]``; returns the exit status (0 ok, 1 values differ,
    2 bad options)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    options = parser.parse_args(argv)
    if options.iters < 1 or options.warmup < 0:
        parser.error("--iters must be >= 1 and --warmup >= 0")
    if not under_mpiexec():
        from simdist.commands import reporting_errors

        return reporting_errors("simdist bench allreduce", _launch, (options, argv))
    return run(options)


def _strip_launch_options(argv: list[str]):
    """argv without --ranks/--timeout (they only matter to the launching process)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--ranks", "--timeout"):
            skip = True
            continue
        if arg.startswith(("--ranks=", "--timeout=")):
            continue
        yield arg


if __name__ == "__main__":
    sys.exit(main())
