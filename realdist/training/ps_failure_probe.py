"""A ps failure under a real ``ParameterServerStrategy`` (lesson 13): what TF's
``ClusterCoordinator`` does when the ps's process dies while functions are pending.

A chief (the coordinator) and one process per worker and ps, on
``realdist.runtime.localcluster``'s private network. The coordinator creates a variable on
the ps, runs a first function (the cluster works), schedules ``functions`` more, each a few
ms of work that ends by adding one to the variable, then asks the launcher to SIGKILL ps:0
(never restarted). It reports what ``join`` raised, and what ``fetch`` of each pending
function's ``RemoteValue`` gave: a value (it ended before the kill), ``UnavailableError`` or
``AbortedError`` (it met the dead ps) or ``CancelledError`` (the coordinator cancelled it).
The restart from a checkpoint that follows is the program's own (simdist's ps_loop, the
tutorial's loop); here the run ends.
"""

from __future__ import annotations

import json

from simdist.base import errors

from realdist.runtime.localcluster import Task, run_cluster

_CHIEF = r"""
tf1.enable_eager_execution()  # the prelude is TF1's; ParameterServerStrategy is TF2
from realdist.training.parameter_server_loop import order_kill
job = json.loads(JOB)
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
    tf.train.ClusterSpec(CLUSTER), task_type="chief", task_id=0, rpc_layer="grpc")
strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    counter = tf.Variable(0.0)

@tf.function
def step_fn():
    _, x = tf.while_loop(lambda i, x: i < job["spin"], lambda i, x: (i + 1, x + 1.0),
                         (tf.constant(0), tf.constant(0.0)))  # a few ms of work
    counter.assign_add(1.0 + 0.0 * x)
    return counter.read_value()

first = coordinator.schedule(step_fn)
coordinator.join()
emit("first", float(first.fetch()))
pending = [coordinator.schedule(step_fn) for _ in range(job["functions"])]
order_kill(CONTROL, "ps:0", None)
try:
    coordinator.join()
    joined = None
except Exception as error:  # what join raises: the first function's error
    joined = {"error": type(error).__name__, "message": str(error).strip().splitlines()[0]}
emit("join", joined)
fetched = []
for value in pending:
    try:
        value.fetch()
        fetched.append("value")
    except Exception as error:
        fetched.append(type(error).__name__)
emit("fetch", fetched)
sys.stdout.flush()
os._exit(0)  # the servers' threads would keep the process alive
"""

_SERVER = r"""
from realdist.training.parameter_server_loop import serve
job, index = TASK.split(":")
serve(tf, CLUSTER, job, int(index))
"""


def kill_ps_mid_schedule(workers: int = 1, functions: int = 12, spin: int = 200_000,
                         timeout: float = 200) -> dict:
    """Run the probe (see the module docstring): {"first": the first function's value,
    "join": {"error", "message"} or None, "fetch": one outcome per pending function,
    "kills": the launcher's kills}."""
    for name, value in (("workers", workers), ("functions", functions), ("spin", spin)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise errors.InvalidArgumentError(f"{name} must be an int >= 1, got {value!r}")
    job = {"functions": functions, "spin": spin}
    tasks = [Task("chief", f"JOB = {json.dumps(json.dumps(job))}\n" + _CHIEF)]
    tasks += [Task(f"worker:{i}", _SERVER, server=True, survivable=True)
              for i in range(workers)]
    tasks += [Task("ps:0", _SERVER, server=True, survivable=True)]
    report = run_cluster({"chief": 1, "worker": workers, "ps": 1}, tasks, timeout)
    chief = report["outputs"]["chief"]
    return {"first": chief.get("first"), "join": chief.get("join"),
            "fetch": chief.get("fetch", []), "kills": report["failures"]}
