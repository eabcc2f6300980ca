"""A real-TF MultiWorkerMirroredStrategy worker for the differential tests (started by
``realdist.distribute.multiworker.launch``): each worker's ``distribute_datasets_from_function`` gives
it ``counts[worker]`` ids in batches of ``batch``; every step's ids per local replica go to
``workerI.json``. Uneven counts show what TF does when one worker runs out first."""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import tensorflow as tf  # noqa: E402

tmp = Path(sys.argv[1])
job = json.loads((tmp / "job.json").read_text())
task_id = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
options = tf.distribute.experimental.CommunicationOptions(
    implementation=tf.distribute.experimental.CommunicationImplementation.RING,
    timeout_seconds=job["timeout"])
strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def dataset_fn(ctx):
    first = 100 * ctx.input_pipeline_id
    ids = tf.range(first, first + job["counts"][ctx.input_pipeline_id], dtype=tf.int32)
    return tf.data.Dataset.from_tensor_slices((ids, ids)).batch(job["batch"])


@tf.function
def step(inputs):  # every step is a collective: a worker that stopped early would hang it
    sizes = strategy.run(lambda x, y: tf.size(x), args=inputs)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, sizes, axis=None)


steps = []
for inputs in strategy.distribute_datasets_from_function(dataset_fn):
    steps.append([x.numpy().tolist() for x in strategy.experimental_local_results(inputs[0])])
    step(inputs)
(tmp / f"worker{task_id}.json").write_text(json.dumps({"steps": steps}))
