"""Lesson 04, Devices and placement: reference solutions (same names as exercises.py)."""

VARIABLE_OPS = ("VariableV2", "VarHandleOp")  # TF1 reference and resource variables


def split_devices(variable_device="/cpu:0", compute_device="/gpu:0"):
    """A device function: variables on ``variable_device``, every other op on
    ``compute_device``."""
    def device_fn(op):
        return variable_device if op.type in VARIABLE_OPS else compute_device
    return device_fn


def predict_placement():
    """Where the placer puts each op of ``checks.placement_quiz`` (2 CPU devices, no GPU,
    soft placement on)."""
    cpu = "/job:localhost/replica:0/task:0/device:CPU:"
    return {
        "a": cpu + "1",        # the scope /cpu:1
        "b": cpu + "1",        # /cpu:1 merged with the inner partial spec: still CPU:1
        "c": cpu + "0",        # no scope: the default device
        "v": cpu + "1",        # the device function returns /cpu:1 for variables
        "d": cpu + "0",        # the function sends other ops to /cpu:0
        "e": cpu + "0",        # /gpu:0 does not exist: soft placement falls back to the CPU
    }


def ordered_sum(tf, x):
    """``big`` = x @ x runs only after ``p`` and ``q`` have finished; returns (p, q, big)."""
    p = tf.reduce_sum(x, name="p")
    q = tf.reduce_mean(x, name="q")
    with tf.control_dependencies([p, q]):
        big = tf.matmul(x, x, name="big")
    return p, q, big


def gpu_plan(tf):
    """Trainer 0 on GPU 0, trainer 1 on GPU 1, each capped at 60%; the evaluator beside
    either (here GPU 0), capped at 25%: 85% of GPU 0, 60% of GPU 1, nobody can grow past its
    cap into another's memory."""
    def capped(gpu, fraction):
        return tf.ConfigProto(gpu_options=tf.GPUOptions(
            visible_device_list=str(gpu), per_process_gpu_memory_fraction=fraction))
    return {"trainer0": capped(0, 0.6), "trainer1": capped(1, 0.6), "evaluator": capped(0, 0.25)}


def inter_op_threads(sessions, cores):
    """TF's DirectSession: its own pools, else one of its own, else the process's global
    pool, which keeps the size of the first session that made it; named pools likewise."""
    process = {}  # "" the global pool, else a global_name: its size
    threads = []
    for config, run_pool in sessions:
        default = config.inter_op_parallelism_threads or cores
        if config.session_inter_op_thread_pool:
            pools = []
            for option in config.session_inter_op_thread_pool:
                size = option.num_threads or default
                if option.global_name:
                    size = process.setdefault(option.global_name, size)
                pools.append(size)
        elif config.use_per_session_threads:
            pools = [default]
        else:
            pools = [process.setdefault("", default)]
        threads.append(1 if run_pool == -1 else pools[run_pool])  # -1: the caller's thread
    return threads
