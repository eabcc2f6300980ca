"""The other ways to use several devices that TF1's guide names, beside between-graph
training (``ps_training``), one program per module:

- ``in_graph_training`` (``in_graph``): **in-graph replication**, one client, one graph with
  a tower per worker task, synchronous or asynchronous;
- ``one_model_per_device`` (``independent``): **independent replicas**, a model of its own
  per device, no communication;
- ``model_parallel`` (``model_parallel``): **model parallelism**, one network split across
  two GPUs, a chain of layers or two branches.

May import what ``simdist.training`` may (the TF1 API, ``simdist.graph``, above all) and
``simdist.training.ps_spec`` (the regression problem the towers train on).
"""

from simdist.training.replication.in_graph import InGraphRun, in_graph_training
from simdist.training.replication.independent import IndependentRun, one_model_per_device
from simdist.training.replication.model_parallel import ModelParallelRun, model_parallel

__all__ = ["InGraphRun", "IndependentRun", "ModelParallelRun", "in_graph_training",
           "model_parallel", "one_model_per_device"]
