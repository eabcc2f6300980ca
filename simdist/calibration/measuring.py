"""Measuring a plan of exercises on real TensorFlow, for ``simdist calibrate`` and ``simdist
bench predict``: a ``realdist measure`` process (simdist itself never imports TensorFlow) runs
the plan with the measuring protocol (``simdist.calibration.protocol``); its lines are read as
they come, each reported to a progress callback, and the CSV is written again, whole, as each
exercise ends."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from simdist.base.errors import UnavailableError
from simdist.base.files import write_csv
from simdist.calibration.fit import Measurement
from simdist.calibration.plan import label
from simdist.calibration.protocol import EXTRA_RUNS, REPEAT, pass_order

#: the CSV columns of a measured exercise
FIELDS = ["strategy", "workers", "replicas", "model", "dataset", "hidden", "global_batch",
          "steps", "steps_per_execution", "runs", "median_ms", "p25_ms", "p75_ms", "wall_s",
          "error"]

#: about how long an exercise takes to measure (s): a worker process each vs one process
#: (parameter_server: a localhost cluster, and tens of ms per scheduled function)
SECONDS = {"multi_worker_mirrored": 11.0, "parameter_server": 18.0}
SECONDS_IN_PROCESS = 1.2
START_S = 6.0  # TensorFlow's start


def row_of(exercise) -> dict:
    """An exercise's configuration columns."""
    return {"strategy": exercise.strategy, "workers": exercise.num_workers,
            "replicas": exercise.devices_per_worker, "model": exercise.model,
            "dataset": exercise.dataset, "hidden": exercise.hidden,
            "global_batch": exercise.global_batch, "steps": exercise.steps,
            "steps_per_execution": exercise.steps_per_execution}


def estimate_s(exercises) -> float:
    """About how long measuring ``exercises`` takes, TensorFlow's start included (s)."""
    return START_S + sum(SECONDS.get(e.strategy, SECONDS_IN_PROCESS) for e in exercises)


def measure_real(exercises, csv_path: Path | None, timeout: float = 300, repeat: int = REPEAT,
                 more=None, more_fields=(), extra: int = EXTRA_RUNS, on_progress=None
                 ) -> list[Measurement | None]:
    """Each exercise's measured step time (None where its run failed, with the error in
    the CSV), from one ``realdist measure`` process running the plan ``repeat`` times, then
    up to ``extra`` more runs of each exercise whose runs still spread; the CSV gets each
    row as its statistics come, with the columns ``more(index, measurement or None)`` adds
    (named in ``more_fields``). ``on_progress(done, total, what, eta_s)`` is called before
    the first run and after each: the runs done and planned, what runs next and about how
    many seconds are left."""
    exercises = list(exercises)
    n = len(exercises)
    runs = [exercises[i] for p in range(repeat)
            for i in pass_order(n, p)]
    done = 0

    def progress(what, eta_s):
        if on_progress is not None:
            on_progress(done, len(runs), what, eta_s)

    out: list[Measurement | None] = [None] * len(exercises)
    rows: list[dict] = []  # the CSV so far, written whole again at each row
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.json"
        plan.write_text(json.dumps([e.to_dict() for e in exercises]), encoding="utf-8")
        command = [sys.executable, "-m", "realdist", "measure", str(plan),
                   "--timeout", str(timeout), "--repeat", str(repeat), "--extra", str(extra)]
        progress(f"starting TensorFlow, then {label(exercises[0])}", estimate_s(runs))
        log = open(Path(tmp) / "stderr.txt", "w+", encoding="utf-8")  # TF's logging
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue
                got = json.loads(line)
                k = got["index"]
                done += 1
                if got.get("again"):  # one more run of it, in the order these lines come
                    runs.append(exercises[k])
                left = runs[done:]
                progress(label(left[0]) if left else "done",
                         estimate_s(left) - START_S if left else 0)
                if "median_ns" not in got and "error" not in got:
                    continue  # an earlier pass
                exercise = exercises[k]
                row = {**row_of(exercise), "runs": got.get("runs", ""),
                       "wall_s": got.get("wall_s"), "error": got.get("error", "")}
                if "median_ns" in got:
                    out[k] = Measurement(exercise, got["median_ns"], got["p25_ns"],
                                         got["p75_ns"])
                    row.update(median_ms=got["median_ns"] / 1e6, p25_ms=got["p25_ns"] / 1e6,
                               p75_ms=got["p75_ns"] / 1e6)
                if more is not None:
                    row.update(more(k, out[k]))
                rows.append(row)
                if csv_path is not None:
                    write_csv(csv_path, FIELDS + list(more_fields), rows)
            proc.wait()
            log.seek(0)
            errors = log.read()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    if proc.returncode != 0:
        last = [ln for ln in errors.splitlines() if ln.strip()][-1:] or ["no message"]
        raise UnavailableError(f"realdist measure exited with {proc.returncode}: {last[0]}")
    return out
