"""Run one of simdist's TF1 programs through its Python API, in one process or (``--mpi``)
over the ranks of the mpiexec job that runs this file; rank 0 prints the trace's SHA-256
and the run's figures (tests/tf1/test_tf1_mpi.py compares them at 1, 2 and more ranks)."""

import hashlib
import sys
import tempfile
from pathlib import Path

from simdist.training.ensemble import ensemble
from simdist.training.input_pipeline import loader_trainer
from simdist.training.replication import in_graph_training

PROGRAMS = {
    "loader_trainer": (lambda t: loader_trainer(capacity=2, loader_threads=2, steps=6,
                                                transport=t),
                       lambda run: (run.step_ends, run.starved_ns)),
    "ensemble": (lambda t: ensemble(predictors=3, inputs=4, slow=1, transport=t),
                 lambda run: (run.means, run.timeouts)),
    "in_graph": (lambda t: in_graph_training(workers=3, mode="sync", steps=3, transport=t),
                 lambda run: (run.losses, run.global_step)),
}

if __name__ == "__main__":
    transport = None
    if "--mpi" in sys.argv:
        from simdist.sim.transports import MPITransport

        transport = MPITransport()
    program, figures = PROGRAMS[sys.argv[-1]]
    run = program(transport)
    if run is not None:
        path = Path(tempfile.mkdtemp()) / "trace.json"
        run.trace.save(path)
        print(hashlib.sha256(path.read_bytes()).hexdigest(), figures(run))
