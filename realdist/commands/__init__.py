"""The ``realdist`` command's subcommands with options of their own, one module each
(``run``, ``split``, ``queues``, ``ps``): ``add_arguments(parser)`` gives the subcommand's
parser (built by ``realdist/cli.py``, which dispatches) its options, ``cmd_NAME(args)`` runs
it and returns the exit status. They print; the realdist packages they drive compute.

May import every realdist package (TensorFlow's only inside a command, so that ``--help``
stays fast) and simdist's base, hardware, trace, registry, exercises and evaluation styles.
Nothing imports it but ``realdist.cli``.
"""


def save_trace(trace, path) -> None:
    """Write a trace to ``path`` (when given) and say where."""
    if path:
        print(f"realdist: trace written to {trace.save(path)} (open it in "
              "https://ui.perfetto.dev)")
