"""The ``simdist`` command: run, list, summary, plot, bench; the commands with options of
their own (plot-collectives, check, compare, lesson, course) are in ``simdist/commands/``.

Under ``mpiexec -n N python -m mpi4py -m simdist run ...`` the MPI transport is chosen by
itself and only rank 0 prints and writes files.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from simdist.commands import option_type
from simdist.base.errors import InvalidArgumentError, SimdistError
from simdist.base.files import check_outputs
from simdist.sim.launcher import mpiexec_world, under_mpiexec
from simdist.sim.flows import FIDELITIES
from simdist.trace.schema import TRACE_MAX_MB


def build_parser(program=None) -> argparse.ArgumentParser:
    """The parser of every command; with ``program`` (a ``Program``), its own options too."""
    from simdist.commands import run_limits

    parser = argparse.ArgumentParser(
        prog="simdist",
        description="Simulate a distributed TensorFlow cluster, deterministically, in one "
                    "process or over MPI ranks, and draw what happened.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="simulate a program and write its trace",
                         description="Simulate PROGRAM (a name from 'simdist list' or a .py "
                                     "file defining PROGRAM) on every task of its cluster. "
                                     "A .py file is Python code that this command runs (it "
                                     "imports the file): run only files you trust. Its own "
                                     "options are not listed here (that would run it).")
    run.add_argument("program", help="program name or path to a .py file")
    run.add_argument("--backend", choices=["auto", "inprocess", "mpi"], default="auto",
                     help="transport: auto = mpi under mpiexec, else inprocess (default auto)")
    run.add_argument("--trace", metavar="FILE", help="write the Chrome/Perfetto trace JSON here")
    run.add_argument("--timeline", metavar="PNG", help="draw the timeline PNG here")
    add_steps_shown(run)
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--profile", metavar="NAME", default=None,
                     help="hardware system profile (default: the program's, usually 'cpu'; "
                          "see 'simdist list')")
    run.add_argument("--profiles-file", metavar="FILE",
                     help="JSON or YAML file adding or overriding hardware profiles")
    run.add_argument("--trace-max-records", type=int, default=TRACE_MAX_RECORDS, metavar="N",
                     help="write and draw at most the first N records of the trace (default "
                          f"{TRACE_MAX_RECORDS:,}, about {TRACE_MAX_RECORDS * 150 >> 20} MiB "
                          "of JSON)")
    run.add_argument("--trace-max-mb", type=option_type(_trace_mb), default=TRACE_MAX_MB,
                     metavar="MB", help="cap the trace's memory during the run: past MB "
                     "megabytes (about 2,000 records each) it keeps the run's start only and "
                     f"says so in one line (default {TRACE_MAX_MB}; 0: no cap)")
    run.add_argument("--fidelity", choices=FIDELITIES, default="message",
                     help="message (default): every message of a collective; flow: a "
                          "collective over size-only values is one flow per phase, its time "
                          "from the closed form with NIC sharing (thousands of tasks)")
    run.add_argument("--quiet", action="store_true", help="do not print the summary table")
    run_limits.add_arguments(run)
    if program:
        program.add_arguments(run.add_argument_group(f"options of program '{program.name}'"))

    lst = sub.add_parser("list", help="list programs and hardware profiles")
    lst.add_argument("--profiles-file", metavar="FILE", help="also load this profiles file")

    summary = sub.add_parser("summary", help="a table per task: busy, idle, bytes sent")
    summary.add_argument("trace", help="trace JSON written by 'simdist run --trace'")

    plot = sub.add_parser("plot", help="draw a trace as a timeline PNG")
    plot.add_argument("trace", help="trace JSON")
    plot.add_argument("-o", "--output", required=True, metavar="PNG", help="PNG file to write")
    add_steps_shown(plot)

    bench = sub.add_parser(
        "bench", help="benchmarks (simulator speed against references)",
        description="engine: events/s against SimPy, and MPI scaling; allreduce (under "
                    "mpiexec): the ring's data path against MPI_Allreduce; "
                    "allreduce-formulas: simulated times against the closed forms; "
                    "scale: wall time, events/s and memory from 64 to 4,096 simulated "
                    "devices, message vs flow fidelity; predict: the calibrated "
                    "simulator's step times against real TF runs (simdist calibrate first). "
                    "'simdist bench NAME --help' for each one's options.")
    bench.add_argument("which", choices=sorted(BENCHES), help="which benchmark")
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="the benchmark's own options")

    sweep = sub.add_parser("plot-collectives", add_help=False,
                           help="time and bus bandwidth vs message size, every algorithm")
    sweep.add_argument("rest", nargs=argparse.REMAINDER)

    calibrate = sub.add_parser("calibrate", add_help=False,
                               help="fit a hardware profile to step times measured on real "
                                    "TF here (or to your own CSV table)")
    calibrate.add_argument("rest", nargs=argparse.REMAINDER)

    check = sub.add_parser("check", add_help=False,
                           help="check a lesson's exercises: simdist check 01 / --all")
    check.add_argument("rest", nargs=argparse.REMAINDER)

    compare = sub.add_parser("compare", add_help=False,
                             help="a simulated and a real run side by side: simdist compare "
                                  "SIM.json REAL.json [-o PNG]")
    compare.add_argument("rest", nargs=argparse.REMAINDER)

    ps = sub.add_parser("ps", add_help=False,
                        help="between-graph training on parameter servers, sync "
                             "(SyncReplicasOptimizer) or async: simdist ps --help")
    ps.add_argument("rest", nargs=argparse.REMAINDER)

    tf1 = sub.add_parser("tf1", add_help=False,
                         help="run a TF1 script once per task of a simulated cluster: "
                              "simdist tf1 SCRIPT --cluster ps=1,worker=3")
    tf1.add_argument("rest", nargs=argparse.REMAINDER)

    lesson = sub.add_parser("lesson", add_help=False,
                            help="lesson tools: simdist lesson start NN / build [NN|--all]")
    lesson.add_argument("rest", nargs=argparse.REMAINDER)

    course = sub.add_parser("course", add_help=False,
                            help="the course site: simdist course build | serve")
    course.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def add_steps_shown(parser):
    """``--steps-shown N``: how many training steps the timeline draws large."""
    def steps(text):
        try:
            n = int(text)
        except ValueError:
            n = -1
        if n < 0:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number of steps >= 0 "
                                             "(0: every step in one strip)")
        return n

    parser.add_argument("--steps-shown", type=steps, default=1, metavar="N",
                        help="a timeline of a training run draws its first N steps large "
                             "enough to read, and the whole run under them (default 1; 0: "
                             "the whole run only)")


#: the records of the longest trace 'simdist run' writes unless told otherwise
TRACE_MAX_RECORDS = 1_000_000


def _trace_mb(text):
    """--trace-max-mb: a number of MB > 0, or 0 for no cap (None)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise InvalidArgumentError(f"--trace-max-mb {text!r}: expected a number of MB >= 0 "
                                   "(0: no cap)")
    return value or None


def _program(argv):
    """The program named after 'run', loaded (once: a program file's code runs once per
    process), so that its own options can be added to the parser; None without one, and for
    'run FILE.py --help', which lists simdist's options without running the file."""
    from simdist.training.programs import is_program_file, load_program

    name = _program_name(argv)
    if name is None or (is_program_file(name) and ("-h" in argv or "--help" in argv)):
        return None
    return load_program(name)


def _program_name(argv):
    """The program named after 'run'."""
    if not argv or argv[0] != "run":
        return None
    takes_value = {"--backend", "--trace", "--timeline", "--steps-shown", "--seed", "--profile",
                   "--profiles-file", "--max-events", "--max-sim-time", "--timeout",
                   "--trace-max-records", "--trace-max-mb", "--fidelity"}
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in takes_value:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except SimdistError as error:
        if not getattr(error, "every_rank", False) or mpiexec_world()[0] == 0:
            print(f"simdist: error: {error}", file=sys.stderr)
        return 2
    except MemoryError as error:
        print(f"simdist: error: out of memory ({error or 'MemoryError'}): give smaller sizes",
              file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (simdist ... | head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv) -> int:
    if argv and argv[0] in PASSTHROUGH and not (argv[0] == "bench" and (
            len(argv) < 2 or argv[1] not in BENCHES)):
        return PASSTHROUGH[argv[0]](argv[1:])  # the command parses its own options
    program = _program(argv)
    args = build_parser(program).parse_args(argv)
    if args.command == "run":
        return cmd_run(args, program)
    return COMMANDS[args.command](args)


def cmd_run(args, program) -> int:
    from simdist.base.checks import check_seed, check_time
    from simdist.commands import run_limits
    from simdist.distribute.failures import Failure
    from simdist.sim.core import SimulationDeadlock
    from simdist.hardware.devices import Hardware, HardwareCatalog
    from simdist.sim.limits import RunLimitError
    from simdist.trace.plots import format_summary, plot_timeline, summarize
    from simdist.sim.scheduler import TraceCapWarning, simulate
    from simdist.training.programs import is_program_file

    check_seed(args.seed, "--seed")
    for failure in getattr(args, "fail", ()):  # parameter_server's: inside the run's time
        check_time(Failure.parse(failure).at_ns / 1e9, f"--fail {failure}: its time", "s",
                   10**9, args.max_sim_time)
    check_outputs({"--trace": args.trace, "--timeline": (args.timeline, ".png"),
                   "--result": getattr(args, "result", None)},
                  {"PROGRAM": args.program if is_program_file(args.program) else None,
                   "--profiles-file": args.profiles_file})
    if args.trace_max_records < 1:
        raise InvalidArgumentError(f"--trace-max-records {args.trace_max_records}: expected "
                                   "a number of records >= 1")
    catalog = HardwareCatalog.default()
    if args.profiles_file:
        catalog.load_file(args.profiles_file)
    run_limits.check_cost(program, args)  # before setup, which builds the cluster
    cluster, layout = program.setup(args)
    system = program.default_system if args.profile is None else args.profile
    hardware = Hardware.from_catalog(catalog, system, layout)
    backend = args.backend
    if backend == "auto":
        backend = "mpi" if under_mpiexec() else "inprocess"
    transport = None
    if backend == "mpi":
        from simdist.sim.transports import MPITransport

        transport = MPITransport(watchdog_s=args.timeout)
    rank = transport.rank if transport else 0
    try:
        with run_limits.run_limits(args) as limits:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", TraceCapWarning)
                result = simulate(cluster, lambda ctx: program.task_main(ctx, args),
                                  hardware=hardware, seed=args.seed, transport=transport,
                                  trace=bool(args.trace or args.timeline or not args.quiet
                                             or getattr(args, "result", None)),
                                  metadata={"program": program.name}, limits=limits,
                                  fidelity=args.fidelity, trace_max_mb=args.trace_max_mb)
    except (SimulationDeadlock, RunLimitError) as error:  # on every rank at once
        if rank == 0:
            print(f"simdist: {'' if isinstance(error, SimulationDeadlock) else 'error: '}"
                  f"{error}", file=sys.stderr, flush=True)
        if transport:
            transport.barrier()  # the others end once rank 0 has said why
        return 3 if isinstance(error, SimulationDeadlock) else 2
    if rank != 0:
        return 0
    where = f"{result.transport}, {result.ranks} rank(s)"
    flows = f", {result.flows} flow-level collectives" if result.fidelity == "flow" else ""
    print(f"simdist: {program.name} on {len(result.returns)} tasks ({where}), "
          f"system '{hardware.system.name}': {result.events} events, {result.messages} "
          f"messages{flows}, simulated time {result.end_time} ns")
    if transport:  # under mpiexec: how the tasks sat on the ranks, and whether ranks help
        from simdist.commands.placement import placement, print_report

        print_report(placement(len(result.returns), transport.size, hardware),
                     transport.tally, sys.stderr)
    for warning in caught:
        print(f"simdist: warning: {warning.message}", file=sys.stderr)
    trace = result.trace  # what --trace writes and --timeline draws: cut if too long
    if (args.trace or args.timeline) and trace.records() > args.trace_max_records:
        print(f"trace cut to its first {args.trace_max_records:,} of {trace.records():,} "
              "records (--trace-max-records)")
        trace = trace.first(args.trace_max_records)
    # the files first: a report that fails must not lose the run
    if args.trace:
        print(f"trace:    {trace.save(args.trace)}  (open in https://ui.perfetto.dev)")
    for line in program.save(result, hardware, args) if program.save else []:
        print(line)
    if not args.quiet:
        print(format_summary(summarize(result.trace), result.end_time))
        if program.report:
            print(program.report(result, hardware, args))
    if args.timeline:
        plot_timeline(trace, args.timeline, title=f"simdist: {program.name}",
                      steps_shown=args.steps_shown)
        print(f"timeline: {args.timeline}")
    return 0


def cmd_list(args) -> int:
    from simdist.hardware.devices import HardwareCatalog
    from simdist.training.programs import list_programs

    catalog = HardwareCatalog.default()
    if args.profiles_file:
        catalog.load_file(args.profiles_file)
    print("programs (simdist run NAME):")
    for program in list_programs():
        print(f"  {program.name:<22} {program.summary}")
    print("\nhardware systems (--profile NAME):")
    for name in sorted(catalog.systems):
        s = catalog.systems[name]
        print(f"  {name:<22} {s.device} devices, {s.intra_link} inside a machine, "
              f"{s.network} between machines")
    print("\ndevices: " + ", ".join(sorted(catalog.devices)))
    print("links:   " + ", ".join(sorted(catalog.links)))
    return 0


def cmd_summary(args) -> int:
    from simdist.trace.plots import format_summary, summarize
    from simdist.trace.schema import Trace

    trace = Trace.load(args.trace)
    print(format_summary(summarize(trace), trace.end_time()))
    return 0


def cmd_plot(args) -> int:
    from simdist.trace.plots import plot_timeline
    from simdist.trace.schema import Trace

    check_outputs({"-o": (args.output, ".png")}, {"TRACE": args.trace})
    trace = Trace.load(args.trace)
    plot_timeline(trace, args.output, steps_shown=args.steps_shown)
    print(f"timeline: {args.output}")
    return 0


def cmd_bench(argv) -> int:
    module = importlib.import_module(f"simdist.commands.bench.{BENCHES[argv[0]]}")
    return module.main(argv[1:])


def cmd_plot_collectives(argv) -> int:
    from simdist.commands import plot_collectives

    return plot_collectives.main(argv)


def cmd_calibrate(argv) -> int:
    from simdist.commands import calibrate

    return calibrate.main(argv)


def cmd_check(argv) -> int:
    from simdist.commands import check

    return check.main(argv)


def cmd_compare(argv) -> int:
    from simdist.commands import compare

    return compare.main(argv)


def cmd_ps(argv) -> int:
    from simdist.commands import ps

    return ps.main(argv)


def cmd_tf1(argv) -> int:
    from simdist.commands import tf1

    return tf1.main(argv)


def cmd_lesson(argv) -> int:
    from simdist.commands import lesson

    return lesson.main(argv)


def cmd_course(argv) -> int:
    from simdist.commands import course

    return course.main(argv)


#: benchmark name -> module under simdist.commands.bench with a main(argv) -> int
BENCHES = {"engine": "engine", "allreduce": "allreduce", "allreduce-formulas": "formulas",
           "scale": "scale", "predict": "predict", "mpi": "mpi"}

COMMANDS = {"list": cmd_list, "summary": cmd_summary, "plot": cmd_plot}
#: commands that take their own options (listed in --help by build_parser)
PASSTHROUGH = {"bench": cmd_bench, "calibrate": cmd_calibrate,
               "plot-collectives": cmd_plot_collectives,
               "check": cmd_check, "lesson": cmd_lesson, "compare": cmd_compare,
               "ps": cmd_ps, "tf1": cmd_tf1, "course": cmd_course}
