"""The run report's placement lines under mpiexec (issue 26): how the tasks were spread over
the MPI ranks, the time window (the lookahead) that followed from the links, the windows and
events the run took, and a warning when the run is latency-bound, so that ranks cannot make
it faster (with the reason and the figure).

Printed by ``simdist run``, ``simdist ps`` and ``simdist tf1`` on rank 0, to stderr: stdout
keeps the run's report, the same as one process prints (``simdist ps``'s is checked at 1, 2
and 4 ranks), and nothing goes into the trace, which is the same at every rank count. The
figures come from the hardware (``task_to_rank``, the layout, ``Hardware.min_latency_ns``:
what the scheduler uses) and from the MPI transport's ``WindowTally`` (the windows it
carried, each rank's events).
"""

from __future__ import annotations

from typing import NamedTuple

from simdist.hardware.cluster import task_to_rank
from simdist.hardware.units import format_ns

#: fewer kernel events than this per window and rank: the run is latency-bound. Every window
#: ends with an all-gather of all ranks' reports; of ``simdist bench mpi``'s workloads, each
#: under 50 at two ranks ran slower than in one process, 0.14x to 0.55x, and its busiest rank
#: used at least 88% of one process's processor time (docs/results/mpi.md, 'Placement
#: advice')
LATENCY_BOUND_EVENTS = 50
#: a rank that ran more than this many times its even share of the events holds up the rest
BUSIEST_SHARE = 1.5


class Placement(NamedTuple):
    """How a run's tasks sat on the ranks, and the window that followed."""

    tasks: int
    ranks: int
    tasks_per_rank: list  # by rank
    machines_per_rank: list  # by rank: the machines with a task there
    machines: int
    tasks_per_machine: int
    split: list  # the machines whose tasks are on more than one rank
    window_ns: int  # the time window (lookahead): the smallest link latency
    window_link: str  # the link that sets it, and where it is
    crossing: list  # the links whose messages cross ranks, and where they are


def placement(num_tasks: int, ranks: int, hardware) -> Placement:
    """``num_tasks`` tasks on ``ranks`` ranks (``task_to_rank``) and ``hardware``'s layout
    and links, as the scheduler places them."""
    rank_of = task_to_rank(num_tasks, ranks)
    layout, per = hardware.layout, hardware.layout.tasks_per_machine
    on: dict[int, set] = {}  # machine -> its ranks
    for order, rank in enumerate(rank_of):
        on.setdefault(layout.machine_of(order), set()).add(rank)
    inside = f"{hardware.intra_link.name} inside a machine"
    between = f"{hardware.network.name} between machines"
    links = []  # (latency, where) of the links some message may take
    if per >= 2:
        links.append((hardware.intra_link.latency_ns, inside))
    if len(on) >= 2 or num_tasks <= 1:
        links.append((hardware.network.latency_ns, between))
    split = sorted(m for m, where in on.items() if len(where) > 1)
    tasks, machines = [0] * ranks, [0] * ranks
    for rank in rank_of:
        tasks[rank] += 1
    for where in on.values():
        for rank in where:
            machines[rank] += 1
    crossing = []
    if ranks > 1 and len(on) >= 2:
        crossing.append(between)
    if split and per >= 2:
        crossing.append(inside)
    return Placement(num_tasks, ranks, tasks, machines, len(on), per, split,
                     hardware.min_latency_ns(num_tasks), min(links)[1], crossing)


def _spread(counts: list) -> str:
    low, high = min(counts), max(counts)
    return f"{low}" if low == high else f"{low} to {high}"


def report_lines(p: Placement, windows: int, events: list) -> list[str]:
    """The report's lines: the placement, the window, the windows and events
    (``events``: each rank's, from the transport's ``WindowTally``)."""
    split = "none split" if not p.split else (
        f"{len(p.split)} split over ranks (machine{'s' if len(p.split) > 1 else ''} "
        f"{', '.join(map(str, p.split[:8]))}{', ...' if len(p.split) > 8 else ''})")
    lines = [f"placement: {p.tasks} tasks on {p.ranks} rank(s), "
             f"{_spread(p.tasks_per_rank)} a rank; {p.machines} machine(s) of "
             f"{p.tasks_per_machine} task(s), {_spread(p.machines_per_rank)} a rank, {split}",
             f"window (lookahead): {format_ns(p.window_ns)}, the smallest link latency "
             f"({p.window_link}); crossing ranks: {', '.join(p.crossing) or 'nothing'}"]
    total = sum(events)
    if windows and total:
        busiest = max(range(len(events)), key=events.__getitem__)
        share = "" if p.ranks == 1 else (f"; the busiest rank, {busiest}, ran "
                                         f"{events[busiest] / total:.0%} of them")
        lines.append(f"windows: {windows}, {total} events: {total / windows:.1f} a window, "
                     f"{total / windows / p.ranks:.1f} a window and rank{share}")
    return lines


def warnings(p: Placement, windows: int, events: list) -> list[str]:
    """One line for each reason the run is latency-bound, so that ranks cannot help (the
    reason and its figure); none when nothing stands in the way."""
    total = sum(events)
    if not windows or not total:
        return []
    found = []
    per_rank = total / windows / p.ranks
    if per_rank < LATENCY_BOUND_EVENTS:
        found.append(
            f"latency-bound: {per_rank:.1f} events per window per rank ({total} events in "
            f"{windows} windows of {format_ns(p.window_ns)} on {p.ranks} rank(s); under "
            f"{LATENCY_BOUND_EVENTS}): every window ends with an all-gather of all ranks, "
            "so more ranks cannot make this run faster")
    busiest = max(events)
    if p.ranks > 1 and busiest > BUSIEST_SHARE * total / p.ranks:
        rank = events.index(busiest)
        found.append(
            f"imbalanced: rank {rank} ran {busiest / total:.0%} of the events ({busiest} of "
            f"{total}, holding {p.tasks_per_rank[rank]} of {p.tasks} tasks): {p.ranks} ranks "
            f"can be at most {total / busiest:.2f}x faster than one process")
    return found


def print_report(p: Placement, tally, err) -> None:
    """Write the report's lines, "simdist: ...", and its warnings, "simdist: warning: ...",
    to ``err`` (stderr)."""
    for line in report_lines(p, tally.windows, tally.events):
        print(f"simdist: {line}", file=err)
    for line in warnings(p, tally.windows, tally.events):
        print(f"simdist: warning: {line}", file=err)
