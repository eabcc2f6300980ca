"""realdist run parameter_server refuses a cluster whose TensorFlow servers would not fit,
before TensorFlow starts (issue 30, item 5: --workers 500 aborted TF with "pthread_create
failed"); the sizes the course uses still run."""

import pytest

from simdist.base.errors import ResourceExhaustedError


def test_500_workers_are_refused_in_one_line_before_tensorflow_starts(capsys):
    from realdist.cli import main

    assert main(["run", "parameter_server", "--workers", "500"]) == 2
    out, err = capsys.readouterr()
    assert "starting TensorFlow" not in out
    assert err.strip() == (
        "realdist: error: --workers 500 --ps 1 in one process: about 22.7 GiB of memory (the "
        "coordinator's TensorFlow, about 700 MiB, and a server of about 45 MiB per task in "
        "it), more than DistLab's cap of 3 GiB for one run (it keeps a run inside a 4 GiB "
        "machine): give fewer workers or ps")


def test_a_process_per_task_is_counted_as_processes(capsys):
    from realdist.cli import main

    assert main(["run", "parameter_server", "--workers", "6", "--ps", "2", "--processes"]) == 2
    assert "--workers 6 --ps 2 in a process each: about 3.8 GiB" in capsys.readouterr().err


@pytest.mark.parametrize("workers, ps, processes", [(2, 2, True), (3, 2, True), (1, 2, False),
                                                    (32, 1, False), (50, 2, False)])
def test_the_sizes_measured_and_used_still_fit(workers, ps, processes):
    from realdist.training.parameter_server_runner import check_memory

    check_memory(workers, ps, processes)


def test_the_api_is_held_to_the_same_cap():
    from realdist.training.parameter_server_runner import run_parameter_server
    from simdist.training.exercises import Exercise

    with pytest.raises(ResourceExhaustedError, match="--workers 100 --ps 1 in one process"):
        run_parameter_server(Exercise(strategy="parameter_server", workers=100))
