"""``realdist queues facts|padded|loader-trainer|ensemble``: TF1 queues on real TF, their
recorded facts, PaddingFIFOQueue's batches, a loader/trainer and an ensemble on a localhost
cluster (each with simdist's side by side where it has one).
"""

from __future__ import annotations

from simdist.base.errors import InvalidArgumentError
from simdist.base.files import check_outputs

from realdist.commands import save_trace


def add_arguments(queues) -> None:
    """``realdist queues``' subcommands and their options."""
    sub = queues.add_subparsers(dest="queue_command", required=True)
    facts = sub.add_parser("facts", help="record what real TF1 queues do (op names, shapes, "
                                         "errors) as JSON; print it unless --write/--check")
    facts.add_argument("--write", action="store_true", help="write it to --output")
    facts.add_argument("--check", action="store_true",
                       help="compare it with --output; exit 1 where they differ")
    facts.add_argument("--output", metavar="FILE", help="the fact sheet (default: "
                       "tests/data/tf_queue_facts.json of this checkout)")
    facts.add_argument("--timeout", type=float, default=180, metavar="S")
    padded = sub.add_parser("padded", help="the batch real TF's PaddingFIFOQueue.dequeue_many "
                                           "gives for some elements")
    padded.add_argument("values", metavar="VALUES",
                        help="the elements as a JSON list, e.g. '[[1], [2, 3, 4], [5, 6]]'")
    padded.add_argument("--shape", help="the queue's element shape, e.g. 'None' or "
                                        "'None,2' (default: None in every dimension)")
    padded.add_argument("--dtype", help="int32, float32, string, bool (default: from the "
                                        "first element)")
    padded.add_argument("--timeout", type=float, default=120, metavar="S")
    loader = sub.add_parser("loader-trainer", help="a loader client fills a shared FIFOQueue "
                                                   "while a trainer client consumes it")
    loader.add_argument("--capacity", type=int, default=8, help="queue capacity (examples)")
    loader.add_argument("--loaders", type=int, default=2, help="enqueue threads")
    loader.add_argument("--steps", type=int, default=20)
    loader.add_argument("--batch", type=int, default=2, help="examples per training step")
    loader.add_argument("--load-ms", type=float, default=20.0, help="time to read an example")
    loader.add_argument("--train-ms", type=float, default=10.0, help="time of a step")
    loader.add_argument("--tf-data", action="store_true",
                        help="also run the same trainer fed by tf.data (shuffle buffer = "
                             "--capacity), for comparison")
    loader.add_argument("--compare", action="store_true",
                        help="also simulate the same program in simdist and print both "
                             "(steps/s, starvation, queue size) with their ratio")
    loader.add_argument("--plot", metavar="PNG",
                        help="with --compare: draw the queue's occupancy and the trainer's "
                             "waits, simulated above real")
    ensemble = sub.add_parser("ensemble", help="the between-graph ensemble: predictor "
                                               "clients, an aggregator with a timeout")
    ensemble.add_argument("--predictors", type=int, default=2)
    ensemble.add_argument("--inputs", type=int, default=3)
    ensemble.add_argument("--slow", type=int, help="this predictor takes --slow-ms")
    ensemble.add_argument("--predict-ms", type=float, default=5.0)
    ensemble.add_argument("--slow-ms", type=float, default=1500.0)
    ensemble.add_argument("--timeout-ms", type=int, default=500,
                          help="the aggregator's operation_timeout_in_ms")
    for program in (loader, ensemble):
        program.add_argument("--timeout", type=float, default=120, metavar="S")
        program.add_argument("--trace", metavar="FILE",
                             help="write the Chrome/Perfetto trace JSON here")


def cmd_queues(args) -> int:
    return {"facts": _queue_facts, "padded": _padded, "loader-trainer": _loader_trainer,
            "ensemble": _ensemble}[args.queue_command](args)


def _queue_facts(args) -> int:
    import json

    from realdist.graph import queues

    path = args.output or queues.FACTS_PATH
    if args.write:
        check_outputs({"--output": path})
    recorded = queues.load_facts(path) if args.check else None  # a missing file fails first
    facts = queues.queue_facts(timeout=args.timeout)
    if args.check:
        changes = queues.differences(recorded, facts)
        for line in changes:
            print(line)
        print(f"realdist: {len(changes)} difference(s) between real TF and {path}")
        return 1 if changes else 0
    if args.write:
        print(f"realdist: TF {facts['tensorflow']}'s queue facts written to "
              f"{queues.write_facts(facts, path)}")
    else:
        print(json.dumps(facts, indent=1, sort_keys=True))
    return 0


def _shape(text: str) -> list:
    """'None,2' (or '[None, 2]', '?' or -1 for None) -> [None, 2]."""
    dims = [d.strip() for d in text.strip("[]()").split(",") if d.strip()]
    try:
        return [None if d in ("None", "?", "-1") else int(d) for d in dims]
    except ValueError:
        raise InvalidArgumentError(f"--shape {text!r}: expected dimensions separated by "
                                   "commas, each an int or None, e.g. 'None,2'") from None


def _padded(args) -> int:
    import json

    import numpy as np

    from realdist.graph.queues import padded_batch

    try:
        values = json.loads(args.values)
    except ValueError as error:
        raise InvalidArgumentError(f"VALUES {args.values!r} is not JSON ({error}); expected "
                                   "a list of elements such as '[[1], [2, 3, 4]]'") from None
    if not isinstance(values, list) or not values:
        raise InvalidArgumentError(f"VALUES must be a non-empty JSON list of elements, got "
                                   f"{args.values!r}")
    shape = [None] * np.ndim(values[0]) if args.shape is None else _shape(args.shape)
    batch = padded_batch([shape], values, None if args.dtype is None else [args.dtype],
                         timeout=args.timeout)
    print(f"PaddingFIFOQueue(shapes=[{tuple(shape)}]).dequeue_many({len(values)}) on "
          f"real TF: shape {tuple(batch.shape)}, dtype {batch.dtype}")
    print(batch)
    return 0


def _loader_trainer(args) -> int:
    from realdist.training.queue_programs import (check_loader_trainer, describe_pipeline,
                                                  real_dataset_trainer, real_loader_trainer)

    check_loader_trainer(args.capacity, args.loaders, args.steps, args.batch, args.load_ms,
                         args.train_ms)
    check_outputs({"--trace": args.trace, "--plot": (args.plot, ".png")})
    options = dict(loaders=args.loaders, steps=args.steps, batch=args.batch,
                   load_ms=args.load_ms, train_ms=args.train_ms, timeout=args.timeout)
    print(f"realdist: a loader (worker:1, {args.loaders} QueueRunner threads) and a trainer "
          f"(worker:0) sharing FIFOQueue 'examples' (capacity {args.capacity}) on ps:0; "
          "starting TensorFlow...", flush=True)
    run = real_loader_trainer(capacity=args.capacity, **options)
    for line in describe_pipeline(run):
        print("  " + line)
    if args.compare:
        _compare_pipeline(run, args.plot)
    if args.tf_data:
        print(f"realdist: the same trainer fed by tf.data (map with {args.loaders} parallel "
              f"reads, shuffle({args.capacity}), batch, prefetch)...", flush=True)
        for line in describe_pipeline(real_dataset_trainer(buffer=args.capacity, **options)):
            print("  " + line)
    save_trace(run.trace, args.trace)
    return 0


def _compare_pipeline(run, plot) -> None:
    from simdist.trace.plots import plot_queue_comparison

    from realdist.training.queue_compare import compare_pipelines, format_comparison, simulate_like

    print("simdist: the same program simulated (reads and steps of the same length)...",
          flush=True)
    simulated = simulate_like(run.trace.metadata["options"])
    for line in format_comparison(compare_pipelines(simulated, run)):
        print("  " + line)
    if plot:
        plot_queue_comparison({"simulated": simulated.trace, "real TF": run.trace}, "examples",
                              plot, "the loader/trainer queue, simulated and on real TF")
        print(f"realdist: occupancy plot written to {plot}")


def _ensemble(args) -> int:
    from realdist.training.queue_programs import check_ensemble, real_ensemble

    check_ensemble(args.predictors, args.inputs, args.slow, args.predict_ms, args.slow_ms,
                   args.timeout_ms)
    check_outputs({"--trace": args.trace})
    print(f"realdist: {args.predictors} predictor clients, an aggregator with "
          f"operation_timeout_in_ms={args.timeout_ms}; starting TensorFlow...", flush=True)
    run = real_ensemble(args.predictors, args.inputs, args.slow, args.predict_ms,
                        args.slow_ms, args.timeout_ms, args.timeout)
    for i, (got, mean) in enumerate(zip(run.received, run.means)):
        print(f"  input {i}: predictions {got} -> mean {mean}")
    print(f"  timed-out waits: {run.timeouts}; late predictions dropped (input, predictor): "
          f"{run.late}; predictors stopped by: {run.ended_by}")
    save_trace(run.trace, args.trace)
    return 0
