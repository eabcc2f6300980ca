"""The TF1 world over MPI ranks: ``simdist tf1`` spreads a job's tasks over the ranks (each
rank runs its own tasks' clients, servers, variables and ops; partitions, tensors and the
master's requests travel as messages) and gives the same trace and results as one process."""

import json

import pytest

from simdist.training.tf1_script import run_script

from tests.conftest import ROOT, mpi_simdist

SCRIPTS = ROOT / "lessons" / "scripts"
pytestmark = [pytest.mark.mpi, pytest.mark.usefixtures("fresh_tf1")]


def _run(n, tmp_path, script, cluster, *extra):
    trace, results = tmp_path / f"trace{n}.json", tmp_path / f"results{n}.json"
    proc = mpi_simdist(n, ["tf1", str(SCRIPTS / script), "--cluster", cluster, "--trace",
                           str(trace), "--results", str(results), *extra], timeout=240)
    return proc, trace.read_bytes(), json.loads(results.read_text())


@pytest.mark.timeout(600)
def test_a_between_graph_job_gives_the_same_trace_at_1_2_and_4_ranks(tmp_path):
    one = run_script(SCRIPTS / "between_graph_trainer.py", {"ps": 1, "worker": 3})
    runs = {n: _run(n, tmp_path, "between_graph_trainer.py", "ps=1,worker=3")
            for n in (1, 2, 4)}
    for n, (proc, trace, results) in runs.items():
        assert trace == runs[1][1], f"the trace at {n} ranks differs from 1 rank's"
        assert results["results"] == runs[1][2]["results"]
        assert proc.stdout.count("simulated time:") == 1  # rank 0 reports, once
    assert "over 4 MPI ranks" in runs[4][0].stdout
    # and the same as in this process: the backup worker's late gradients dropped
    assert {t: r["runs"] for t, r in runs[4][2]["results"].items()} == \
        {t: r["runs"] for t, r in one.results.items()} == {
            "worker:0": 8, "worker:1": 8, "worker:2": 3}
    trace = json.loads(runs[4][1])
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "RegisterGraph (worker:1 graph 1)" in names  # a partition registered on the ps


@pytest.mark.timeout(300)
def test_in_graph_replication_over_ranks_gives_the_same_weights(tmp_path):
    runs = {n: _run(n, tmp_path, "in_graph_trainer.py", "ps=1,worker=2") for n in (1, 3)}
    assert runs[3][1] == runs[1][1]
    assert runs[3][2]["results"]["worker:0"]["weights"] == \
        runs[1][2]["results"]["worker:0"]["weights"]


@pytest.mark.timeout(300)
def test_a_script_error_on_one_rank_is_one_line_from_rank_0(tmp_path):
    from simdist.sim.launcher import run_mpi

    script = tmp_path / "bad.py"
    script.write_text("import json, os\nfrom distlab import tf\n"
                      "config = json.loads(os.environ['TF_CONFIG'])\n"
                      "if config['task']['type'] == 'worker':\n"
                      "    raise ValueError('worker cannot start: no data')\n"
                      "tf.train.Server(tf.train.ClusterSpec(config['cluster']), 'ps', 0).join()\n")
    proc = run_mpi(2, ["-m", "simdist", "tf1", str(script), "--cluster", "ps=1,worker=1"],
                   timeout=200)
    assert proc.returncode != 0
    assert proc.stderr.count("worker cannot start: no data") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def _ps(n, tmp_path, *args):
    trace = tmp_path / f"ps{n}-{abs(hash(args))}.json"
    proc = mpi_simdist(n, ["ps", *args, "--trace", str(trace)], timeout=240)
    report = proc.stdout.replace(str(trace), "TRACE")
    return report, trace.read_bytes()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("args", [
    ("--workers", "3", "--steps", "8"),  # sync, one backup worker
    ("--mode", "async", "--workers", "3", "--steps", "8"),
    ("--workers", "4", "--replicas-to-aggregate", "3", "--steps", "8", "--stall-us", "3000",
     "--stall-probability", "0.3", "--stragglers", "lognormal:0.3"),  # stragglers
    ("--workers", "3", "--steps", "10", "--fail", "worker:1@5ms+3ms"),
], ids=["sync", "async", "stragglers", "worker-fails"])
def test_simdist_ps_gives_the_same_trace_and_report_at_1_2_and_4_ranks(tmp_path, args):
    runs = {n: _ps(n, tmp_path, *args) for n in (1, 2, 4)}
    for n, (report, trace) in runs.items():
        assert (report, trace) == runs[1], f"simdist ps {' '.join(args)} differs at {n} ranks"
    assert runs[4][0].count("global step") == 1  # rank 0 reports


@pytest.mark.timeout(300)
def test_a_failed_ps_restores_its_checkpoint_the_same_way_over_ranks(tmp_path):
    runs = {}
    for n in (1, 3):
        folder = tmp_path / f"ckpt{n}"
        folder.mkdir()
        report, trace = _ps(n, tmp_path, "--workers", "2", "--step-us", "1000,1700",
                            "--steps", "12", "--fail", "ps:0@8ms+2ms", "--checkpoint-dir",
                            str(folder), "--save-checkpoint-steps", "3")
        runs[n] = (report.replace(str(folder), "DIR"), trace.replace(
            str(folder).encode(), b"DIR"))
        assert (folder / "model.ckpt-3.npz").is_file() and "restored DIR/model.ckpt-3" in \
            runs[n][0]
    assert runs[3] == runs[1]


@pytest.mark.timeout(120)
def test_a_bad_argument_under_mpiexec_is_said_once():
    from simdist.sim.launcher import run_mpi

    proc = run_mpi(3, ["-m", "simdist", "ps", "--fail", "ps:0,8000,2000"], timeout=100)
    assert proc.returncode != 0 and proc.stderr.count("usage: simdist ps") == 1, proc.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("program,ranks", [("loader_trainer", 3), ("ensemble", 5),
                                           ("in_graph", 4)])
def test_the_queue_and_replication_programs_give_the_same_trace_over_ranks(program, ranks):
    import subprocess
    import sys

    from simdist.sim.launcher import run_mpi

    runner = str(ROOT / "tests" / "tf1" / "api_over_ranks.py")
    one = subprocess.run([sys.executable, runner, program], capture_output=True, text=True,
                         timeout=200, cwd=ROOT)
    assert one.returncode == 0, one.stderr
    for n in (2, ranks):
        many = run_mpi(n, [runner, "--mpi", program], timeout=200, cwd=ROOT)
        assert many.returncode == 0, many.stderr
        assert many.stdout == one.stdout, f"{program} at {n} ranks: {many.stdout}"
