"""Lesson 05, Clusters, servers, sessions and containers: the checks of ``simdist check 05``.

They run the learner's code against simulated servers (``simdist.graph``): the shared counter
on a {ps: 1, worker: 2} cluster, replica_device_setter's choices, TF_CONFIG launching and
container resets. tests/test_lessons_tf1.py runs the counter and the ps assignment on real
TensorFlow too and finds the same numbers.
"""

import json

import numpy as np

import simdist.graph as sim
from simdist.cluster import ClusterSpec
from simdist.lessons import Check, CheckFailed

CLUSTER = {"ps": 1, "worker": 2}


def _servers(cluster=CLUSTER):
    sim.stop_all_servers()
    spec = ClusterSpec(cluster)
    return {t.name: sim.Server(spec, t.task_type, t.task_id) for t in spec.tasks()}


# -- exercise 1 ------------------------------------------------------------------------------


def check_shared(module):
    servers = _servers()
    try:
        first = module.counter_client(sim, servers["worker:0"].target, 0, True, 3)
        second = module.counter_client(sim, servers["worker:1"].target, 1, False, 2)
        ps = servers["ps:0"].runtime.resources
        stored = ps.lookup(("", "counter"))
    finally:
        sim.stop_all_servers()
    if [first, second] != [[1, 2, 3], [4, 5]]:
        hint = ("only the first client initializes: the second one shares its variable"
                if second[:1] == [1] else "both clients must name the variable 'counter' and "
                "put it on /job:ps/task:0, so that they share it")
        raise CheckFailed(f"client 0 saw {first} and client 1 saw {second}; expected [1, 2, 3] "
                          "then [4, 5]", hint)
    if stored is None or int(stored) != 5:
        raise CheckFailed(f"the ps task holds counter = {stored}, expected 5",
                          "put the variable on /job:ps/task:0")
    return "two clients share the counter on the ps: [1, 2, 3] then [4, 5]"


def check_local(module):
    servers = _servers()
    try:
        module.counter_client(sim, servers["worker:0"].target, 0, True, 2)
        local = module.counter_client(sim, "", 0, True, 3, device=None)
    finally:
        sim.stop_all_servers()
    if local != [1, 2, 3]:
        raise CheckFailed(f"a local session saw {local}, expected [1, 2, 3]",
                          "with device=None, give the ops no device at all")
    return "a local session keeps its own counter"


def check_uninitialized(module):
    servers = _servers()
    try:
        module.counter_client(sim, servers["worker:0"].target, 0, False, 1)
    except sim.errors.FailedPreconditionError:
        return "incrementing before anyone initialized is a FailedPreconditionError"
    finally:
        sim.stop_all_servers()
    raise CheckFailed("with initialize=False on a fresh cluster the increment ran",
                      "run counter.initializer only when initialize is True")


# -- exercise 2 ------------------------------------------------------------------------------

PS_CASES = [((40, 4, 4, 400, 8), 2, "round_robin"), ((4,) * 7, 3, "round_robin"),
            ((4000, 40, 40, 2000, 8, 8), 2, "greedy"), ((100, 100, 100, 100, 300), 3, "greedy")]


def actual_ps_tasks(sizes, num_ps, strategy):
    """What simdist's replica_device_setter does with float32 variables of those sizes."""
    chosen = (sim.GreedyLoadBalancingStrategy(num_ps, sim.byte_size_load_fn)
              if strategy == "greedy" else None)
    graph = sim.Graph()
    with graph.as_default(), sim.device(sim.train.replica_device_setter(
            ps_tasks=num_ps, ps_strategy=chosen)):
        variables = [sim.get_variable(f"v{i}", shape=(size // 4,)) for i, size in
                     enumerate(sizes)]
    return [int(v.device.rsplit(":", 1)[1]) for v in variables]


def check_ps_tasks(module):
    for sizes, num_ps, strategy in PS_CASES:
        predicted = module.predict_ps_tasks(list(sizes), num_ps, strategy)
        actual = actual_ps_tasks(sizes, num_ps, strategy)
        if list(predicted) != actual:
            raise CheckFailed(f"{strategy} over {num_ps} ps, sizes {list(sizes)} bytes: you "
                              f"predicted {list(predicted)}, replica_device_setter chose "
                              f"{actual}",
                              "round-robin cycles 0, 1, ..., n-1; greedy picks the ps with "
                              "the fewest bytes so far (the lowest index on a tie)")
    return f"{len(PS_CASES)} variable layouts predicted right"


# -- exercise 3 ------------------------------------------------------------------------------


def check_tf_config(module):
    cluster = {"ps": ["localhost:3000"], "worker": ["localhost:3001", "localhost:3002"]}
    tfjob = {"master": ["localhost:3010"], "worker": ["localhost:3011"]}
    sim.stop_all_servers()
    try:
        for spec, job, index in ((cluster, "worker", 1), (cluster, "ps", 0),
                                 (tfjob, "master", 0)):
            text = json.dumps({"cluster": spec, "task": {"type": job, "index": index}})
            server = module.server_from_tf_config(sim, text)
            if not isinstance(server, sim.Server):
                raise CheckFailed(f"server_from_tf_config returned {server!r}, expected a "
                                  "tf.train.Server")
            expected = "grpc://" + spec[job][index]
            if (server.job_name, server.task_index, server.target) != (job, index, expected):
                raise CheckFailed(f"for task {job}:{index} you started the server of "
                                  f"{server.job_name}:{server.task_index} at {server.target}")
            if server.cluster != ClusterSpec(spec):
                raise CheckFailed(f"the server's cluster is {server.cluster}, expected {spec}")
    finally:
        sim.stop_all_servers()
    return "the right server starts for worker:1, ps:0 and a TFJob master:0"


# -- exercise 4 ------------------------------------------------------------------------------


def check_reset(module):
    servers = _servers({"ps": 1, "worker": 1})
    target = servers["worker:0"].target
    try:
        graph = sim.Graph()
        with graph.as_default(), sim.device("/job:ps/task:0"):
            kept = sim.Variable(np.float32(1.0), name="kept")
            with sim.container("experiment"):
                trial = sim.Variable(np.float32(2.0), name="trial")
            with sim.container("other"):
                other = sim.Variable(np.float32(3.0), name="other")
        sess = sim.Session(target, graph=graph)
        sess.run([kept.initializer, trial.initializer, other.initializer])
        module.reset_experiment(sim, target)
        sess = sim.Session(target, graph=graph)  # Session.reset closed the old one, as TF
        for variable in (kept, other):
            try:
                sess.run(variable)
            except sim.errors.FailedPreconditionError:
                raise CheckFailed(
                    f"reset_experiment freed more than the 'experiment' container: "
                    f"{variable.op.name!r} (container {variable.op.container or 'default'!r}) "
                    "is uninitialized now", "pass the list of containers to reset") from None
        try:
            sess.run(trial)
        except sim.errors.FailedPreconditionError:
            return "only the 'experiment' container was freed"
        raise CheckFailed("the variable in container 'experiment' is still initialized",
                          "tf.Session.reset(target, containers) frees containers")
    finally:
        sim.stop_all_servers()


CHECKS = [
    Check("shared", "counter_client", "counter_client: two clients share the counter",
          check_shared),
    Check("local", "counter_client", "counter_client: a local session keeps its own",
          check_local),
    Check("uninitialized", "counter_client", "counter_client: initialize only when asked",
          check_uninitialized),
    Check("ps_tasks", "predict_ps_tasks", "predict_ps_tasks: round-robin and greedy",
          check_ps_tasks),
    Check("tf_config", "server_from_tf_config", "server_from_tf_config: the task's server",
          check_tf_config),
    Check("reset", "reset_experiment", "reset_experiment: one container freed", check_reset),
]
