"""Models tf.distribute.Server (tf.train.Server): one task of a cluster, serving its devices.

A server is one simulated TF process (a ``TaskRuntime``): its devices and its resource
containers, where the variables placed on its devices live. Sessions connect to a server by
its ``target`` ("grpc://host:port") and can then run ops on every task of the cluster whose
server is running, so sessions of different clients share those variables. Servers are
registered by address in this Python process, which stands for the whole simulated network.
"""

from __future__ import annotations

from contextlib import contextmanager
from itertools import count

from simdist.hardware.cluster import ClusterSpec
from simdist.base.errors import InvalidArgumentError, UnavailableError, UnknownError
from simdist.graph._sim.runtime import Machine, TaskRuntime

_RUNNING: dict[str, Server] = {}  # "host:port" -> the server listening there
_LAUNCHED: set[str] = set()  # addresses whose server a launcher started (launched_servers)
_LOCAL_PORTS = count(20000)


class Server:
    """tf.distribute.Server(cluster, job_name, task_index, config=..., start=True)."""

    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol="grpc",
                 config=None, start=True, machine: Machine | None = None):
        cluster = server_or_cluster_def
        self.cluster = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        if job_name is None:
            jobs = self.cluster.jobs
            if len(jobs) != 1 or self.cluster.num_tasks(jobs[0]) != 1:
                raise InvalidArgumentError(
                    f"Server(): job_name is required for a cluster of several tasks "
                    f"({self.cluster.as_dict()}): pass job_name= and task_index=")
            job_name = jobs[0]
        task_index = 0 if task_index is None else task_index
        if protocol != "grpc":
            raise InvalidArgumentError(f"protocol {protocol!r} is not supported: use 'grpc'")
        self.address = self.cluster.task_address(job_name, task_index)  # checks both
        host, colon, port = self.address.rpartition(":")
        if not colon or not port.isdigit():
            raise InvalidArgumentError(
                f"Could not parse port for local server from {self.address!r}: the address "
                f"of /job:{job_name}/task:{task_index} needs a port, such as "
                f"'{self.address if not colon else host}:2222'")
        self.job_name, self.task_index = job_name, task_index
        self.machine = machine or Machine()
        self.config = config
        self.runtime: TaskRuntime | None = None
        self._adopted = False  # it stands for a launcher's server (launched_servers)
        if start:
            self.start()

    @property
    def target(self) -> str:
        return f"grpc://{self.address}"

    @property
    def server_def(self) -> dict:
        return {"cluster": self.cluster.as_dict(), "job_name": self.job_name,
                "task_index": self.task_index, "protocol": "grpc"}

    def start(self):
        other = _RUNNING.get(self.address)
        if other is self:
            return
        if other is not None and self.address in _LAUNCHED and other.cluster == self.cluster \
                and (other.job_name, other.task_index) == (self.job_name, self.task_index):
            from simdist.graph._sim.clients import current_client

            client = current_client()
            mine = client.task if client is not None else None
            if mine is not None and mine != f"{self.job_name}:{self.task_index}":
                # TF: that task's process holds the port; this process cannot bind it
                raise UnknownError(
                    f"Could not start gRPC server: {mine}'s process starts the server of "
                    f"/job:{self.job_name}/task:{self.task_index}, whose address "
                    f"{self.address} is in use by that task's own process (each process "
                    f"starts the server of its own task: TF_CONFIG's \"task\")")
            self.runtime, self._adopted = other.runtime, True  # the launcher's, for its task
            return
        if other is not None:
            raise UnavailableError(
                f"cannot start the server of /job:{self.job_name}/task:{self.task_index}: "
                f"address {self.address} is already in use by the server of "
                f"/job:{other.job_name}/task:{other.task_index} (stop it, or give this task "
                "another port)")
        self.runtime = TaskRuntime(self.job_name, self.task_index, self.machine, self.config)
        _RUNNING[self.address] = self

    def join(self):
        """A ps task's main loop: blocks for good. In a client of ``simulate_clients`` it
        blocks that client as TF's does (the run ends around it); called from plain Python,
        where the servers keep serving inside this process, it returns at once so that the
        program can go on to start other tasks."""
        if self.runtime is None:
            raise UnavailableError(f"server {self.target} was not started")
        from simdist.graph._sim.clients import current_client

        client = current_client()
        if client is not None:
            client.wait(client.env.never(desc=f"server.join() of {self.target}"))

    def stop(self):
        """Shut the task down: its variables and GPU memory are lost (simdist extension)."""
        if self._adopted:  # the launcher's server goes on serving
            self.runtime = None
            return
        if _RUNNING.get(self.address) is self:
            del _RUNNING[self.address]
        if self.runtime is not None:
            from simdist.graph._sim.world import forget_cluster_worlds

            forget_cluster_worlds(self.runtime)
            self.runtime.close()
            self.runtime = None

    @staticmethod
    def create_local_server(config=None, start=True) -> Server:
        """A one-task cluster {"localhost": ["localhost:PORT"]} on a fresh port."""
        while True:
            address = f"localhost:{next(_LOCAL_PORTS)}"
            if address not in _RUNNING:
                break
        return Server({"localhost": [address]}, "localhost", 0, config=config, start=start)

    def __repr__(self):
        return f"<simdist Server {self.target} /job:{self.job_name}/task:{self.task_index}>"


@contextmanager
def launched_servers(cluster: ClusterSpec, machine: Machine | None = None):
    """Start a server for every task of ``cluster`` (yields {"job:index": Server}): a
    launcher's, such as ``simdist tf1``'s. A script's own ``Server(cluster, job, index)``
    then stands for its task's running server, as each task's process has one in TF. All
    are stopped at the end."""
    servers = {}
    try:
        for job in cluster.jobs:
            for index in range(cluster.num_tasks(job)):
                server = Server(cluster, job, index, machine=machine)
                servers[f"{job}:{index}"] = server
                _LAUNCHED.add(server.address)
        yield servers
    finally:
        for server in servers.values():
            _LAUNCHED.discard(server.address)
            server.stop()


def running_servers() -> list[str]:
    return [s.target for s in _RUNNING.values()]


def stop_all_servers():
    """Stop every simulated server of this process (a fresh start for tests and lessons)."""
    for server in list(_RUNNING.values()):
        server.stop()


def cluster_of_running_servers():
    """(a ClusterSpec of every running server's task, {task name: its runtime}); the
    running servers must belong to one cluster."""
    servers = list(_RUNNING.values())
    if not servers:
        raise UnavailableError("no server is running: start the cluster's servers with "
                               "Server(cluster, job_name, task_index) first")
    cluster = servers[0].cluster
    if any(server.cluster != cluster for server in servers):
        raise InvalidArgumentError(
            "the running servers belong to different clusters: stop the others "
            "(stop_all_servers()) so that one cluster runs")
    servers.sort(key=lambda s: cluster.task_order(f"{s.job_name}:{s.task_index}"))
    jobs: dict = {}
    runtimes = {}
    for server in servers:
        name = f"{server.job_name}:{server.task_index}"
        jobs.setdefault(server.job_name, {})[server.task_index] = f"sim:{name}"
        runtimes[name] = server.runtime
    return ClusterSpec(jobs), runtimes


def connect(target: str):
    """The server a session target names, and the runtimes of its cluster's running tasks."""
    if not isinstance(target, str) or not target.startswith("grpc://"):
        raise InvalidArgumentError(
            f"session target {target!r} is not valid: expected '' (a local session) or "
            "'grpc://host:port' (a server's target)")
    server = _RUNNING.get(target[len("grpc://"):])
    if server is None:
        running = ", ".join(running_servers()) or "none"
        raise UnavailableError(
            f"no server serves the session target {target!r}: start one with "
            f"Server(cluster, job_name, task_index) (running server targets: {running})")
    runtimes, missing = {}, {}
    for task in server.cluster.tasks():
        address = server.cluster.task_address(task.task_type, task.task_id)
        other = _RUNNING.get(address)
        if other is not None and other.cluster == server.cluster:
            runtimes[task.name] = other.runtime
        else:
            missing[task.name] = address
    return server, runtimes, missing
