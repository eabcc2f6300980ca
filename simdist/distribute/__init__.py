"""simdist.distribute: tf.distribute's synchronous strategies in the simulator.

The names and semantics mirror ``tf.distribute``: ``Strategy`` (the default strategy),
``OneDeviceStrategy``, ``MirroredStrategy`` with ``NcclAllReduce``,
``HierarchicalCopyAllReduce`` and ``ReductionToOneDevice``, ``CentralStorageStrategy``,
``MultiWorkerMirroredStrategy`` with ``CommunicationImplementation``; ``PerReplica`` and
``Mirrored`` values, ``MirroredVariable``; ``compute_average_loss``,
``scale_regularization_loss``. TF2's asynchronous
``ParameterServerStrategy`` with its ``ClusterCoordinator`` and ``RemoteValue``, the
partitioners and ``ShardedVariable``, on an ``InProcessCluster`` of servers. ``TPUStrategy`` on
a simulated TPU slice (host loop, ICI torus, static shapes). ``STRATEGIES`` holds one
record per strategy an exercise can name (``simdist.training.simulate_exercise`` runs a
whole training exercise with one). A concept package: may import ``simdist.collectives`` and
``simdist.sim``, ``simdist.hardware``, ``simdist.trace``, ``simdist.base``; never the training
layer above it.
"""

from types import SimpleNamespace

from simdist.collectives import ReduceOp
from simdist.distribute.cross_device_ops import (CollectiveAllReduce, CommunicationImplementation,
                                                 CommunicationOptions, CrossDeviceOps,
                                                 HierarchicalCopyAllReduce, NcclAllReduce,
                                                 ReductionToOneDevice)
from simdist.distribute.cluster_coordinator import ClusterCoordinator, RemoteValue
from simdist.distribute.parameter_server_strategy import ParameterServerStrategy
from simdist.distribute.registry import STRATEGIES, StrategyRecord, strategy_named
from simdist.distribute.central_storage_strategy import CentralStorageStrategy
from simdist.distribute.strategy import (DistributedBatch, InputContext, MirroredStrategy,
                                         MultiWorkerMirroredStrategy, OneDeviceStrategy, Strategy,
                                         compute_average_loss, scale_regularization_loss)
from simdist.distribute.server import InProcessCluster, SimpleClusterResolver
from simdist.distribute.tpu_strategy import TPUStrategy
from simdist.distribute.sharded_variable import (FixedShardsPartitioner, IndexedSlices,
                                                 MaxSizePartitioner, MinSizePartitioner,
                                                 Partitioner, ShardedVariable)
from simdist.distribute.values import Mirrored, MirroredVariable, PerReplica

#: ``tf.distribute.experimental``: ParameterServerStrategy and its ``partitioners``
experimental = SimpleNamespace(
    ParameterServerStrategy=ParameterServerStrategy,
    partitioners=SimpleNamespace(Partitioner=Partitioner,
                                 FixedShardsPartitioner=FixedShardsPartitioner,
                                 MinSizePartitioner=MinSizePartitioner,
                                 MaxSizePartitioner=MaxSizePartitioner))

__all__ = ["CentralStorageStrategy", "ClusterCoordinator", "CollectiveAllReduce",
           "CommunicationImplementation", "CommunicationOptions", "CrossDeviceOps",
           "DistributedBatch", "FixedShardsPartitioner", "HierarchicalCopyAllReduce",
           "InProcessCluster", "IndexedSlices", "InputContext", "MaxSizePartitioner",
           "MinSizePartitioner", "Mirrored", "MirroredStrategy", "MirroredVariable",
           "MultiWorkerMirroredStrategy", "NcclAllReduce", "OneDeviceStrategy",
           "ParameterServerStrategy", "PerReplica", "ReduceOp", "ReductionToOneDevice",
           "RemoteValue", "STRATEGIES", "ShardedVariable", "SimpleClusterResolver", "Strategy",
           "StrategyRecord", "TPUStrategy", "compute_average_loss", "experimental",
           "scale_regularization_loss", "strategy_named"]
