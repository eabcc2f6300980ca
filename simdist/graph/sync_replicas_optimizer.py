"""Models tf.compat.v1.train.SyncReplicasOptimizer: synchronous training on parameter servers.

Built as TF builds it (``tensorflow/python/training/sync_replicas_optimizer.py``), from the
pieces simdist already has, so every wait happens in simulated time:

- per trainable variable, a ``ConditionalAccumulator`` on the variable's device
  (``shared_name = var.name + "/grad_accum"``); a replica's ``train_op`` applies its
  gradients there, tagged with its local step, and the accumulator silently drops a gradient
  whose local step is older than its own global step (a straggler's, or a backup worker's);
- the chief's queue runner runs ``sync_op``: take ``replicas_to_aggregate`` gradients from
  every accumulator (each take moves the accumulator's step on), apply their mean with the
  wrapped optimizer, increment the global step, and put ``max(total_num_replicas,
  replicas_to_aggregate)`` tokens holding the new global step into ``sync_token_q`` (a
  shared FIFOQueue on the global step's device);
- after applying its gradients a replica takes a token and sets its local step to it, so it
  cannot start step k + 1 before the chief has finished step k; the chief puts the first
  ``replicas_to_aggregate`` tokens in (``get_init_tokens_op``).

``make_session_run_hook(is_chief)`` gives the hook that ``MonitoredTrainingSession`` runs:
the local initializations, the initial tokens and the chief's queue runner.
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError, check_ints
from simdist.graph.accumulator import ConditionalAccumulator, SparseConditionalAccumulator
from simdist.graph.array_ops import fill
from simdist.graph.control_flow_ops import group, no_op
from simdist.graph.data_flow_ops import FIFOQueue
from simdist.graph.graph import get_default_graph
from simdist.graph.indexed_slices import IndexedSlices
from simdist.graph.queue_runner import QueueRunner
from simdist.graph.session_run_hook import SessionRunHook
from simdist.graph.variables import LOCAL_VARIABLES, Variable, assign


class SyncReplicasOptimizer:
    """tf.compat.v1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate,
    total_num_replicas=None, use_locking=False, name="sync_replicas")."""

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas=None,
                 variable_averages=None, variables_to_average=None, use_locking=False,
                 name="sync_replicas"):
        if variable_averages is not None:
            raise InvalidArgumentError("SyncReplicasOptimizer: variable_averages is not "
                                       "simulated by simdist; leave it None")
        check_ints("SyncReplicasOptimizer", **{
            label: value for label, value in (("replicas_to_aggregate", replicas_to_aggregate),
                                              ("total_num_replicas", total_num_replicas))
            if value is not None})
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        self._opt, self._name = opt, name
        self._replicas_to_aggregate = replicas_to_aggregate
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._gradients_applied = False
        self._global_step = self._sync_token_queue = self._chief_queue_runner = None
        self._accumulator_list: list = []

    def compute_gradients(self, *args, **kwargs):
        return self._opt.compute_gradients(*args, **kwargs)

    def minimize(self, loss, global_step=None, var_list=None, name=None):
        return self.apply_gradients(self.compute_gradients(loss, var_list), global_step, name)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The replica's ``train_op``: apply the gradients to the accumulators, then wait
        for a token and take its value as the local step. Builds the chief's ``sync_op``."""
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        graph = get_default_graph()
        self._global_step = global_step
        local_anchor = no_op()  # on this worker: so the local step stays off the ps
        with graph.colocate_with(local_anchor):
            self._local_step = Variable(0, trainable=False, collections=[LOCAL_VARIABLES],
                                        dtype=global_step.dtype, name="sync_rep_local_step")
        self.local_step_init_op = assign(self._local_step, global_step).op
        chief_init_ops = [self.local_step_init_op]
        train_ops, aggregated, var_list = [], [], []
        with graph.name_scope(self._name):
            for grad, var in grads_and_vars:
                var_list.append(var)
                with graph.device(var.device):
                    if grad is None:
                        aggregated.append(None)
                        continue
                    if isinstance(grad, IndexedSlices):  # an embedding's rows
                        accumulator = SparseConditionalAccumulator(
                            grad.dtype, shape=(), shared_name=var.name + "/grad_accum")
                        train_ops.append(accumulator.apply_indexed_slices_grad(
                            grad, local_step=self._local_step))
                        aggregated.append(accumulator.take_indexed_slices_grad(
                            self._replicas_to_aggregate))
                    else:
                        accumulator = ConditionalAccumulator(
                            grad.dtype, shape=var.shape, shared_name=var.name + "/grad_accum")
                        train_ops.append(accumulator.apply_grad(
                            grad, local_step=self._local_step))
                        aggregated.append(accumulator.take_grad(self._replicas_to_aggregate))
                    self._accumulator_list.append((accumulator, var.device))
            with graph.device(global_step.device), graph.name_scope(None):
                update_op = self._opt.apply_gradients(list(zip(aggregated, var_list)),
                                                      global_step)
                self._sync_token_queue = FIFOQueue(-1, global_step.dtype, shapes=[()],
                                                   name="sync_token_q",
                                                   shared_name="sync_token_q")
                with graph.control_dependencies(train_ops):
                    token = self._sync_token_queue.dequeue()
                train_op = assign(self._local_step, token).op
                with graph.control_dependencies([update_op]):
                    # the step after the update: TF reads a resource variable here, which
                    # runs after its control dependencies; a fresh read does the same
                    tokens = fill([self._tokens_per_step], global_step.read_value())
                    sync_op = self._sync_token_queue.enqueue_many((tokens,))
            # TF 2.x runs sync_op on the token queue itself (TF 1.x used a dummy queue):
            # when the chief stops, the runner's cancel op closes sync_token_q, so a
            # replica that waits for a token then ends with OutOfRangeError
            self._chief_queue_runner = QueueRunner(self._sync_token_queue, [sync_op])
            for accumulator, device in self._accumulator_list:
                with graph.device(device):
                    chief_init_ops.append(accumulator.set_global_step(global_step,
                                                                      name="SetGlobalStep"))
            self.chief_init_op = group(*chief_init_ops)
        self._gradients_applied = True
        return train_op

    def get_chief_queue_runner(self):
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_init_tokens_op(self, num_tokens=-1):
        """Put ``num_tokens`` tokens (default ``replicas_to_aggregate``) in the token queue
        for the replicas' first step."""
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(f"Too few tokens to finish the first step: {num_tokens} (given) "
                             f"vs {tokens_needed} (needed)")
        graph = get_default_graph()
        if num_tokens > 0:
            with graph.device(self._global_step.device), graph.name_scope(None):
                tokens = fill([num_tokens], self._global_step)
                return self._sync_token_queue.enqueue_many((tokens,))
        return no_op(name="no_init_tokens")

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        """The hook that runs the local initializations (and, on the chief, the initial
        tokens and the chief queue runner) once the session exists."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _SyncReplicasOptimizerHook(SessionRunHook):
    """TF's _SyncReplicasOptimizerHook."""

    def __init__(self, sync_optimizer, is_chief, num_tokens):
        self._sync_optimizer, self._is_chief = sync_optimizer, is_chief
        self._num_tokens = num_tokens

    def begin(self):
        optimizer = self._sync_optimizer
        if not optimizer._gradients_applied:
            raise ValueError("SyncReplicasOptimizer.apply_gradient should be called before "
                             "using the hook.")
        if self._is_chief:
            self._local_init_op = optimizer.chief_init_op
            self._q_runner = optimizer.get_chief_queue_runner()
            self._init_tokens_op = optimizer.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = optimizer.local_step_init_op
            self._q_runner = self._init_tokens_op = None

    def after_create_session(self, session, coord):
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
