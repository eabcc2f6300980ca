"""Every mpiexec DistLab starts, and every mpiexec command its README, lessons and command
help show, keeps the ranks off the network: ``--mca btl ^tcp`` (issue 30, item 10)."""

import re
from pathlib import Path

import pytest

from simdist.sim import launcher

ROOT = Path(__file__).resolve().parents[2]
#: a whole mpiexec command line: mpiexec (or mpirun), its flags, then the program's python
COMMAND = re.compile(r"(?:mpiexec|mpirun)\s[^`\n]*?python")


def _shown():
    files = [ROOT / "README.md", *sorted(ROOT.glob("lessons/*/lesson*.md")),
             *sorted(ROOT.glob("lessons/01_collectives/*.py")),
             ROOT / "simdist/commands/bench/allreduce.py", ROOT / "simdist/sim/launcher.py"]
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for command in COMMAND.findall(line):
                yield f"{path.relative_to(ROOT)}:{number}", command


def test_every_mpiexec_command_shown_has_the_safe_form():
    shown = list(_shown())
    assert len(shown) >= 5
    unsafe = [f"{where}: {command}" for where, command in shown if "--mca btl ^tcp" not in
              command and "{safe}" not in command]
    assert not unsafe, unsafe


def test_every_launch_passes_the_safe_flags():
    try:
        path = launcher.mpiexec_path()
    except Exception:  # noqa: BLE001 - no MPI here: nothing DistLab starts
        pytest.skip("no mpiexec installed")
    if not launcher._is_open_mpi(path):
        pytest.skip("not Open MPI: it gets no Open MPI flags")
    command = launcher.mpiexec_command(2, ["-m", "simdist", "list"])
    flags = command[:command.index("-n")]
    assert " ".join(flags[1:]).count("--mca btl ^tcp") == 1


def test_bench_allreduce_says_the_command_it_launches(capsys, monkeypatch):
    from subprocess import CompletedProcess

    from simdist.commands.bench import allreduce

    if "--mca" not in launcher.mpiexec_flags():
        pytest.skip("not Open MPI")
    monkeypatch.setattr(launcher, "run_mpi", lambda *a, **k: CompletedProcess(a, 0, "", ""))
    assert allreduce.main(["--sizes", "1KiB", "--iters", "1"]) == 0
    assert "launching mpiexec --mca btl ^tcp -n 2 python" in capsys.readouterr().out
