"""Lesson 01, Collectives from scratch: your exercises.

Replace each ``raise NotImplementedError(...)`` with your code, then check it:

    simdist lesson start 01               # once: copies this file to my_exercises/
    simdist check 01                      # all checks of this lesson, with hints
    mpiexec -n 4 --mca btl ^tcp python -m mpi4py lessons/01_collectives/ring_mpi.py  # the ring over MPI

(as root, or with more ranks than cores, Open MPI wants ``--allow-run-as-root`` and
``--oversubscribe`` after ``mpiexec``). The notebook notebooks/01_collectives.ipynb explains
everything these exercises need.
"""

import numpy as np  # noqa: F401  (you will need it)

from simdist import Hardware, HardwareCatalog, Layout  # noqa: F401
from simdist.collectives import all_reduce_time, formulas  # noqa: F401


def ring_all_reduce(ctx, members, value):
    """Exercise 1 (★★): sum ``value`` over ``members`` with a ring; return the sum on every
    member.

    A generator, used inside a task's program as::

        total = yield from ring_all_reduce(ctx, ["worker:0", "worker:1", "worker:2"], grad)

    ``members`` lists task names (the same list, in the same order, on every member);
    ``value`` is a numpy array of any shape and dtype (the same on every member). Return a new
    array of the same shape and dtype holding the element-wise sum of every member's value.

    The idea (section 2 of the lesson): cut the value into p chunks and arrange the members
    in a ring. First a reduce-scatter: in each of p - 1 steps every member passes one
    partial-sum chunk to its right neighbour and adds the chunk arriving from its left
    neighbour into its own copy, so that after p - 1 steps each member holds one chunk summed
    over everybody. Then an all-gather: the finished chunks travel around the ring once more
    (p - 1 steps), each member keeping what it receives. Which chunk goes out in which step
    is for you to work out: draw the ring of 3 on paper first.

    What the checks hold you to (``simdist check 01 ring_all_reduce``):

    - sizes that are not multiples of p (``np.array_split``), p from 1 to 5, int64 values
      summed exactly;
    - exactly 2(p-1) messages per member, each a chunk (none when p == 1);
    - ``formulas.ring(p, n, a, B)``'s time within 1%: every member sends in every step, and
      sends before it waits (``ctx.send`` does not block, ``yield ctx.recv`` does); no
      ``ctx.compute``;
    - ``value`` is the caller's own gradient: leave it unchanged and return a new array;
    - members share nothing but messages: under mpiexec each task lives in its own process,
      so the check also gives every simulated task its own copy of your module. Module-level
      variables cannot carry data between tasks.

    ``msg = yield ctx.recv(src, tag)`` waits for a message; its array is ``msg.payload``. Use a
    different tag per phase and step.
    """
    raise NotImplementedError("exercise ring_all_reduce: write the ring all-reduce "
                              "(reduce-scatter, then all-gather)")
    yield  # keeps this function a generator, as your solution will be


def predict_fastest(p, nbytes, system="cpu", tasks_per_machine=1):
    """Exercise 2 (★★): which all-reduce algorithm is fastest for this case? Return its name.

    One of "reduce-to-one", "ring", "recursive-doubling", "halving-doubling", for an
    all-reduce of ``nbytes`` bytes over ``p`` tasks of the hardware ``system`` (a name from
    ``simdist list``), ``tasks_per_machine`` tasks on each machine.

    Reason with the alpha-beta model rather than running the simulator: the link's latency a
    (ns) and bandwidth B (bytes/s) come from::

        hw = Hardware.from_catalog(HardwareCatalog.default(), system, Layout(tasks_per_machine))
        hw.network.latency_ns, hw.network.bandwidth        # between machines
        hw.intra_link.latency_ns, hw.intra_link.bandwidth  # inside one machine
        hw.network.message_ns                              # a card's time per message, o

    and ``all_reduce_time(name, p, nbytes, a, B, o)`` (``simdist.collectives``) gives each
    algorithm's time when every task has a machine (and a network card) of its own. When
    tasks share a machine,
    think about what those formulas leave out. The check accepts any algorithm whose
    simulated time is within 2% of the fastest one.
    """
    raise NotImplementedError("exercise predict_fastest: return the name of the algorithm "
                              "you expect to be fastest")
