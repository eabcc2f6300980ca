"""A small TF1 core, simulated: ``import simdist.graph as tf`` where a snippet has
``import tensorflow.compat.v1 as tf``.

Graphs, ops and tensors (graph.py), the op types, each declared once with its builder, numpy
kernel, FLOPs, device kernels and gradient (array_ops.py, math_ops.py, nn_ops.py,
control_flow_ops.py; registry.py), variables (variables.py), gradients and optimizers, device
placement (placement.py), ConfigProto (config.py), RunOptions and RunMetadata
(run_metadata.py, timeline.py), sessions that simulate each run on a cluster's devices
(session.py; the master's partitions and the executor in _sim/), servers and their resource containers (server.py,
runtime.py) and replica_device_setter (device_setter.py). Names
follow tf.compat.v1; nothing here imports TensorFlow. The TF API package: its modules may import
each other (as TensorFlow's do), its binding ``_sim``, and ``simdist.sim``, ``simdist.hardware``,
``simdist.trace`` and ``simdist.base``.
"""
# ruff: noqa: F401  (this module re-exports tf.compat.v1's names)

from types import SimpleNamespace

from simdist.base import errors as _errors
from simdist.hardware.cluster import ClusterSpec
from simdist.hardware.device_spec import DeviceSpec
from simdist.graph.config import ConfigProto, GPUOptions, ThreadPoolOptionProto
from simdist.graph.device_setter import (GreedyLoadBalancingStrategy, byte_size_load_fn,
                                         replica_device_setter)
from simdist.graph.dtypes import (DType, as_dtype, bool_, float16, float32, float64, int32, int64,
                                  resource)
from simdist.graph.gradients import gradients
from simdist.graph.graph import (Graph, Operation, Tensor, add_to_collection, colocate_with,
                                 container, control_dependencies, device, get_collection,
                                 get_default_graph, name_scope, reset_default_graph)
from simdist.graph.indexed_slices import IndexedSlices, IndexedSlicesValue
from simdist.graph.array_ops import (constant, convert_to_tensor, embedding_lookup, fill, gather,
                                     identity, ones, ones_like, placeholder, zeros, zeros_like)
from simdist.graph.accumulator import ConditionalAccumulator, SparseConditionalAccumulator
from simdist.graph.control_flow_ops import group, no_op
from simdist.graph.coordinator import Coordinator
from simdist.graph.dataset_ops import Dataset, Iterator, make_one_shot_iterator
from simdist.graph.data_flow_ops import (FIFOQueue, PaddingFIFOQueue, PriorityQueue, QueueBase,
                                         RandomShuffleQueue)
from simdist.graph.math_ops import (add, add_n, argmax, cast, divide, matmul, multiply, negative,
                                    reduce_mean, reduce_sum, sigmoid, sqrt, square, subtract)
from simdist.graph.nn_ops import (relu, softmax_cross_entropy_with_logits,
                                  softmax_cross_entropy_with_logits_v2,
                                  sparse_softmax_cross_entropy_with_logits)
from simdist.graph.optimizers import (AdamOptimizer, GradientDescentOptimizer, MomentumOptimizer,
                                      Optimizer, create_global_step, get_global_step,
                                      get_or_create_global_step)
from simdist.graph.io_ops import read_record
from simdist.graph.basic_session_run_hooks import CheckpointSaverHook, StopAtStepHook
from simdist.graph.saver import Saver, get_checkpoint_state, latest_checkpoint
from simdist.graph.monitored_session import MonitoredSession, MonitoredTrainingSession
from simdist.graph.session_run_hook import (SessionRunArgs, SessionRunContext, SessionRunHook,
                                            SessionRunValues)
from simdist.graph.sync_replicas_optimizer import SyncReplicasOptimizer
from simdist.graph.script_ops import timed_py_func
from simdist.graph.placement import parse_placement_log
from simdist.graph.partitioned_variables import (PartitionedVariable,
                                                 create_partitioned_variables,
                                                 fixed_size_partitioner,
                                                 min_max_variable_partitioner,
                                                 variable_axis_size_partitioner)
from simdist.graph.run_metadata import RunMetadata, RunOptions
from simdist.graph.graph_def import GraphDef, NodeDef, import_graph_def
from simdist.graph import timeline
from simdist.graph.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from simdist.graph._sim.runtime import Machine
from simdist.graph._sim.clients import simulate_clients
from simdist.graph.server import Server, running_servers, stop_all_servers
from simdist.graph.session import Session, get_default_session
from simdist.graph.variables import (AUTO_REUSE, Variable, assign, assign_add, assign_sub,
                                     constant_initializer, get_variable, global_variables,
                                     global_variables_initializer, glorot_uniform_initializer,
                                     local_variables, local_variables_initializer,
                                     initialize_all_variables, is_variable_initialized,
                                     ones_initializer, random_normal_initializer,
                                     random_uniform_initializer, trainable_variables,
                                     variable_scope, variables_initializer, zeros_initializer)

sub, mul = subtract, multiply

train = SimpleNamespace(
    GradientDescentOptimizer=GradientDescentOptimizer, MomentumOptimizer=MomentumOptimizer,
    AdamOptimizer=AdamOptimizer, Optimizer=Optimizer, ClusterSpec=ClusterSpec, Server=Server,
    replica_device_setter=replica_device_setter,
    get_or_create_global_step=get_or_create_global_step, get_global_step=get_global_step,
    create_global_step=create_global_step, Coordinator=Coordinator, QueueRunner=QueueRunner,
    add_queue_runner=add_queue_runner, start_queue_runners=start_queue_runners,
    SyncReplicasOptimizer=SyncReplicasOptimizer, MonitoredTrainingSession=MonitoredTrainingSession,
    MonitoredSession=MonitoredSession, StopAtStepHook=StopAtStepHook,
    CheckpointSaverHook=CheckpointSaverHook, Saver=Saver, latest_checkpoint=latest_checkpoint,
    get_checkpoint_state=get_checkpoint_state,
    SessionRunHook=SessionRunHook, SessionRunArgs=SessionRunArgs,
    SessionRunContext=SessionRunContext, SessionRunValues=SessionRunValues,
    queue_runner=SimpleNamespace(QueueRunner=QueueRunner, add_queue_runner=add_queue_runner,
                                 start_queue_runners=start_queue_runners))
nn = SimpleNamespace(relu=relu, sigmoid=sigmoid, embedding_lookup=embedding_lookup,
                     softmax_cross_entropy_with_logits=softmax_cross_entropy_with_logits,
                     softmax_cross_entropy_with_logits_v2=softmax_cross_entropy_with_logits_v2,
                     sparse_softmax_cross_entropy_with_logits=(
                         sparse_softmax_cross_entropy_with_logits))
math = SimpleNamespace(add=add, subtract=subtract, multiply=multiply, divide=divide,
                       reduce_sum=reduce_sum, reduce_mean=reduce_mean, argmax=argmax,
                       sigmoid=sigmoid, square=square, sqrt=sqrt, negative=negative)
errors = SimpleNamespace(**{name: getattr(_errors, name) for name in dir(_errors)
                            if name.endswith("Error")})
distribute = SimpleNamespace(Server=Server, cluster_resolver=None)
data = SimpleNamespace(Dataset=Dataset, Iterator=Iterator, AUTOTUNE=-1,
                       make_one_shot_iterator=make_one_shot_iterator,
                       experimental=SimpleNamespace(AUTOTUNE=-1))
queue = SimpleNamespace(FIFOQueue=FIFOQueue, PaddingFIFOQueue=PaddingFIFOQueue,
                        PriorityQueue=PriorityQueue, QueueBase=QueueBase,
                        RandomShuffleQueue=RandomShuffleQueue)
contrib = SimpleNamespace(training=SimpleNamespace(
    GreedyLoadBalancingStrategy=GreedyLoadBalancingStrategy,
    byte_size_load_fn=byte_size_load_fn))


def disable_eager_execution():
    """A no-op: simdist.graph is always in graph mode (kept so TF1 snippets run unchanged)."""


disable_v2_behavior = disable_eager_execution

__all__ = [name for name in dir() if not name.startswith("_") and name != "SimpleNamespace"]
