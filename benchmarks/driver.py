"""``python -m benchmarks``: run the studies point by point with a progress bar and an ETA,
write each study's CSV (whole again as each point ends), draw its figure, print its summary
table, and write benchmarks/RESULTS.md. This module reads the wall clock (for the bar and
the timings): it measures the simulator from outside; the simulator itself never does."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from simdist.commands.progress import ProgressBar
from simdist.base.errors import InvalidArgumentError, SimdistError
from simdist.base.files import check_output_folder, check_outputs, write_csv

from .page import read_rows, text_table, write_page
from .studies import STUDIES

HERE = Path(__file__).resolve().parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", metavar="NAME[,NAME]",
                        help=f"run these studies only (of {', '.join(STUDIES)}); the page "
                             "keeps the others from their CSVs")
    parser.add_argument("--quick", action="store_true",
                        help="a small version of every study (a few seconds; for the tests)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="where the CSVs and PNGs go (default benchmarks/results)")
    parser.add_argument("--page", metavar="FILE", default=None,
                        help="the results page (default benchmarks/RESULTS.md; with --out: "
                             "DIR/RESULTS.md)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return run(args)
    except SimdistError as error:
        print(f"python -m benchmarks: error: {error}", file=sys.stderr)
        return 2


def chosen(only: str | None) -> list:
    if not only:
        return list(STUDIES.values())
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in STUDIES]
    if unknown or not names:
        raise InvalidArgumentError(f"--only {only!r}: expected study names from "
                                   f"{', '.join(STUDIES)}, separated by commas")
    return [STUDIES[n] for n in names]


def run(args) -> int:
    studies = chosen(args.only)
    out = Path(args.out) if args.out else HERE / "results"
    page = Path(args.page) if args.page else (out / "RESULTS.md" if args.out
                                              else HERE / "RESULTS.md")
    check_output_folder(out, "--out")
    check_outputs({"--page": page})
    out.mkdir(parents=True, exist_ok=True)
    plan = [(study, point) for study in studies for point in study.points(args.quick)]
    total_weight = sum(point["weight"] for _, point in plan)
    print(f"python -m benchmarks: {len(studies)} stud{'y' if len(studies) == 1 else 'ies'}, "
          f"{len(plan)} points{' (quick)' if args.quick else ''}; CSVs and figures in {out}",
          flush=True)
    bar = ProgressBar(len(plan))
    began = time.perf_counter()
    seconds, done_weight = {}, 0.0
    for study in studies:
        mine = [point for s, point in plan if s is study]
        start = time.perf_counter()
        written = []  # the study's CSV so far, written whole again as each point ends
        for point in mine:
            elapsed = time.perf_counter() - began
            eta = elapsed * (total_weight - done_weight) / done_weight if done_weight \
                else None
            bar.show(f"{study.name}: {_label(point)}", eta)
            written.append(study.measure(point))
            write_csv(out / f"{study.name}.csv", study.fields, written, extrasaction="ignore")
            bar.done += 1
            done_weight += point["weight"]
        seconds[study.name] = time.perf_counter() - start
        rows = read_rows(out / f"{study.name}.csv")
        study.draw(rows, out / f"{study.name}.png")
    bar.show("done", 0)
    bar.close()
    for study in studies:
        header, table = study.summary(read_rows(out / f"{study.name}.csv"))
        print(f"\n{study.title} ({seconds[study.name]:.1f} s)\n{text_table(header, table)}")
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    shown = write_page(page, out, list(STUDIES.values()), seconds, command, args.quick)
    print(f"\n{len(plan)} points in {time.perf_counter() - began:.1f} s; page: {page} "
          f"({len(shown)} studies); CSVs and figures: {out}")
    return 0


def _label(point: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in point.items() if k != "weight" and v is not None)
