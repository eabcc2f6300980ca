"""``simdist compare SIM REAL``: a simulated and a real run of one exercise, side by side.

It prints the loss of every step in both runs, the largest difference between their final
weights (parity: at most 1e-5 in float32 after 20 steps), and the step time the simulator
predicted next to the one measured; ``-o PNG`` draws the same as a figure. Exit status 0 when
the weights agree, 1 when they differ or cannot be compared (a run with fewer steps than its
exercise, or a NaN or inf loss or weight), 2 for bad input. Given the ``--results`` of
``simdist tf1`` and ``realdist tf1``, it sets what each task reported side by side and
agrees when both reached the same global step.
"""

from __future__ import annotations

import argparse
import sys

from simdist.training.compare import format_comparison, parity, plot_comparison
from simdist.training.exercises import RunResult
from simdist.base.files import check_outputs, read_json
from simdist.training.tf1_script import compare_results, is_results_file
from simdist.commands import reporting_errors


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="simdist compare", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: simdist run mirrored --result sim.json; realdist run mirrored "
               "--result real.json; simdist compare sim.json real.json -o compare.png")
    parser.add_argument("first", help="a RunResult JSON (from simdist run ... --result) or a "
                                      "tf1 --results file")
    parser.add_argument("second", help="another one (from realdist run ... --result, or a tf1 "
                                       "--results file)")
    parser.add_argument("-o", "--output", metavar="PNG", help="also draw the comparison here")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    return reporting_errors("simdist compare", _compare, args)


def _compare(args) -> int:
    check_outputs({"-o": (args.output, ".png")}, {"FIRST": args.first, "SECOND": args.second})
    first, second = (read_json(path, "run result") for path in (args.first, args.second))
    if is_results_file(first) and is_results_file(second):  # simdist tf1 / realdist tf1
        lines, agree = compare_results(first, second)
        print("\n".join(lines))
        return 0 if agree else 1
    a, b = RunResult.load(args.first), RunResult.load(args.second)
    print(format_comparison(a, b))
    if args.output:
        print(f"figure: {plot_comparison(a, b, args.output)}")
    return 0 if parity(a, b)[0] else 1
