"""The simulator's engine: the event kernel, resources, the scheduler and the network.

Kernel (``core``, ``resources``): events, processes and simulated time; knows no MPI and no
TF concept. Comm (``payloads``, ``transports``, ``watchdog``, ``launcher``, ``rank_report``):
what tasks send and how bytes move between ranks, and how the tasks were spread over them;
``transports`` is the only module of DistLab that imports mpi4py. Runtime (``context``,
``scheduler``, ``bulletin``, ``network``, ``flows``, ``limits``): one program run on every
task, in one process or over MPI ranks, with messages priced by the cost model and notices
every rank learns at a window's end.
May import ``simdist.base``, ``simdist.hardware`` and ``simdist.trace``; it serves every
concept and imports none.
"""
