"""One all-reduce over p tasks with a chosen algorithm: its steps in the trace, its time
next to the closed form. ``simdist run allreduce --algorithm ring -p 4 --timeline ring.png``
draws the 2(p-1) steps of a ring."""

import numpy as np

from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.devices import Layout
from simdist.base.checks import check_footprint
from simdist.base.errors import InvalidArgumentError
from simdist.sim.payloads import Phantom
from simdist.collectives.ps import PLACEMENTS
from simdist.hardware.units import format_bytes, size_option
from simdist.training.programs.program import Program

#: the algorithms' options that have a command-line flag, by option name
FLAGS = {"pieces": "--pieces", "num_ps": "--num-ps", "placement": "--ps-placement"}
#: a run's peak memory per byte of real values (every task's, together), with Python's own
#: 100 MB aside; measured with /usr/bin/time -v, 8 tasks x 64 MiB: recursive doubling 1.61 GB
#: (the most of the algorithms), ps 1.15 GB, ring 1.09 GB, reduce-to-one 0.76 GB
MEMORY_PER_DATA_BYTE = 3.0
#: the memory of one piece of a pipelined all-reduce in flight, with its message and events
#: (measured, data_parallel: 8 tasks x 20,000 pieces took 0.45 GB, 2 x 200,000 0.45 GB)
PIECE_BYTES = 3 << 10


def add_arguments(parser):
    from simdist.collectives import ALGORITHMS

    parser.add_argument("--algorithm", default="ring", choices=list(ALGORITHMS),
                        help="all-reduce algorithm (default ring): " + "; ".join(
                            f"{name}: {record.summary}" for name, record in ALGORITHMS.items()))
    parser.add_argument("-p", "--participants", type=int, default=4, dest="p",
                        help="number of tasks taking part (default 4)")
    parser.add_argument("--size", type=size_option, default=4 << 20,
                        help="bytes of each task's value, e.g. 4MiB or 65536 (default 4 MiB)")
    add_layout_and_options(parser)
    parser.add_argument("--phantom", action="store_true",
                        help="size-only values (no data): for big simulated sizes")


def add_layout_and_options(parser):
    """--tasks-per-machine and the algorithms' own options (``FLAGS``), for every program
    that runs a chosen all-reduce; ``options(args)`` reads the options back."""
    from simdist.collectives import ALGORITHMS

    def taking(option):
        return ", ".join(name for name, record in ALGORITHMS.items() if option in record.options)

    parser.add_argument("--tasks-per-machine", type=int, default=1,
                        help="tasks on one machine (default 1; hierarchical wants more)")
    parser.add_argument("--pieces", type=int, default=None,
                        help=f"pipelining: pieces per chunk (default 1; {taking('pieces')})")
    parser.add_argument("--num-ps", type=int, default=None,
                        help=f"parameter-server shards (default 1; {taking('num_ps')})")
    parser.add_argument("--ps-placement", dest="placement", choices=PLACEMENTS, default=None,
                        help="where the shards' servers sit: spread (default: one per machine "
                             "before a second on any, as replica_device_setter over a ps task "
                             "a machine) or first (the first --num-ps tasks; "
                             f"{taking('placement')})")


def setup(args):
    if args.p < 1:
        raise InvalidArgumentError(f"-p {args.p}: an all-reduce needs at least 1 task")
    if args.size < 4:
        raise InvalidArgumentError(f"--size {args.size}: give at least 4 bytes (one float32)")
    if not args.phantom:
        check_footprint(int(MEMORY_PER_DATA_BYTE * args.size * args.p),
                        f"--size {format_bytes(args.size)} on {args.p} tasks",
                        f"{format_bytes(args.size * args.p)} of real values, held about "
                        f"{MEMORY_PER_DATA_BYTE:g} times over in flight",
                        "add --phantom (size-only values) to simulate big sizes")
    options(args)  # an option the algorithm does not take: an error before anything runs
    return ClusterSpec({"worker": args.p}), Layout(tasks_per_machine=args.tasks_per_machine)


def options(args) -> dict:
    """The algorithm's options given on the command line, checked against its record (and
    ``--pieces`` against the memory its messages in flight take)."""
    from simdist.collectives import algorithm_named

    given = {name: getattr(args, name) for name in FLAGS if getattr(args, name) is not None}
    algorithm_named(args.algorithm).check_options(given, FLAGS)
    if given.get("pieces", 1) > 1:
        tasks = getattr(args, "workers", None) or args.p
        check_footprint(tasks * given["pieces"] * PIECE_BYTES, f"--pieces {given['pieces']:,} "
                        f"on {tasks:,} tasks", "about 3 KiB per piece, every task's pieces "
                        "in flight at once", "give fewer --pieces")
    return given


def main(ctx, args):
    from simdist.collectives import all_reduce

    if args.phantom:
        value = Phantom(args.size)
    else:
        value = ctx.rng.standard_normal(args.size // 4).astype(np.float32)
    total = yield from all_reduce(ctx, range(ctx.num_tasks), value, algorithm=args.algorithm,
                                  **options(args))
    if args.phantom:
        return ctx.now, None, None
    return ctx.now, float(value.sum(dtype=np.float64)), float(total.sum(dtype=np.float64))


def report(result, hardware, args) -> str:
    from simdist.collectives import algorithm_named
    from simdist.hardware.units import format_ns

    times = [r[0] for r in result.returns.values()]
    took = max(times)
    lines = ["", f"{args.algorithm} all-reduce of {args.size} bytes on {args.p} tasks: "
                 f"{format_ns(took)} simulated"]
    if not args.phantom:
        expected = sum(r[1] for r in result.returns.values())
        got = [r[2] for r in result.returns.values()]
        ok = all(abs(g - expected) <= 1e-3 * max(1.0, abs(expected)) for g in got)
        lines.append(f"values: every task holds the sum ({'ok' if ok else 'WRONG'})")
    given = options(args)
    f = algorithm_named(args.algorithm).closed_form(args.p, args.size, hardware, **given)
    if f is None:
        with_options = "".join(f" {FLAGS[k]} {v}" for k, v in given.items())
        lines.append(f"closed form: none for {args.algorithm}{with_options} with "
                     f"{args.tasks_per_machine} task(s) per machine")
        return "\n".join(lines)
    links = [hardware.network] + ([hardware.intra_link] if args.tasks_per_machine > 1 else [])
    where = "; ".join(f"{link.name}: a={format_ns(link.latency_ns)}, "
                      f"B={link.bandwidth / 1e9:.2f} GB/s" for link in links)
    lines.append(f"closed form ({where}): {format_ns(round(f))} "
                 f"({(took - f) / f * 100 if f else 0.0:+.2f}%)")
    return "\n".join(lines)


def cost(args) -> int:
    """About the events of the run: a ring's 2(p-1) steps on each of p tasks, per piece; a
    few per task at flow fidelity (--phantom)."""
    if args.phantom and getattr(args, "fidelity", "message") == "flow":
        return 4 * max(args.p, 0)
    return 2 * max(args.p, 0) ** 2 * (args.pieces or 1)


PROGRAM = Program(
    name="allreduce",
    summary="one all-reduce with a chosen algorithm: its steps and its closed-form time",
    setup=setup,
    main=main,
    add_arguments=add_arguments,
    report=report,
    cost=cost,
)
