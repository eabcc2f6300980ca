"""Each rank prices only its own machines' ports when nobody traces the network
(``Simulation.apart``, issue 26): the results are the same as one process's, at 1, 2 and 4
ranks, and a layout that splits a machine over ranks runs the whole model on every rank."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from simdist.sim import transports

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import json, sys
sys.path.insert(0, {root!r})
from types import SimpleNamespace
from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
from simdist.sim.scheduler import Simulation
from simdist.sim.transports import MPITransport
from tests.programs.chatter import main as chatter

per_machine = int(sys.argv[1])
hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(per_machine))
sim = Simulation({{"worker": 8}}, lambda ctx: chatter(ctx, SimpleNamespace(messages=300)),
                 hardware=hw, seed=5, trace=False, transport=MPITransport())
sim.advance()
r = sim.result()
if r.rank == 0:
    print(json.dumps([sim.apart, r.end_time, r.messages, r.bytes_sent, r.windows, r.events,
                      sorted(map(str, r.returns.items()))]))
"""


def _inprocess(per_machine: int, trace: bool) -> list:
    from simdist.hardware.devices import Hardware, HardwareCatalog, Layout
    from simdist.sim.scheduler import simulate
    from tests.programs.chatter import main as chatter

    hw = Hardware.from_catalog(HardwareCatalog.default(), "cpu", Layout(per_machine))
    r = simulate({"worker": 8}, lambda ctx: chatter(ctx, SimpleNamespace(messages=300)),
                 hardware=hw, seed=5, trace=trace)
    return [r.end_time, r.messages, r.bytes_sent, r.windows, r.events,
            sorted(map(str, r.returns.items()))]


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize("per_machine", [2, 3])
def test_ranks_that_price_their_own_ports_give_one_process_s_results(per_machine, tmp_path):
    from simdist.sim.launcher import run_mpi

    expected = _inprocess(per_machine, trace=True)
    assert _inprocess(per_machine, trace=False) == expected and expected[1] == 300
    script = tmp_path / "apart.py"
    script.write_text(PROGRAM.format(root=str(ROOT)))
    for ranks in (1, 2, 4):
        proc = run_mpi(ranks, [str(script), str(per_machine)], timeout=240)
        assert proc.returncode == 0, proc.stderr[-2000:]
        apart, *got = json.loads(proc.stdout.strip().splitlines()[-1])
        assert got == expected, (ranks, per_machine)
        # 3 tasks a machine: 2 and 4 ranks of 8 tasks split a machine, so every rank runs
        # the whole network model
        assert apart == (ranks > 1 and per_machine == 2)


class _Comm:
    def __init__(self, ranks_here):
        self.ranks_here = ranks_here

    def Split_type(self, kind):
        comm = self

        class Host:
            def Get_size(self):
                return comm.ranks_here

            def Free(self):
                pass
        return Host()


class _MPI:
    COMM_TYPE_SHARED = object()


def test_a_waiting_rank_polls_longer_only_when_each_rank_has_a_core(monkeypatch):
    monkeypatch.setattr(transports.os, "sched_getaffinity", lambda pid: {0, 1})
    assert [transports._ranks_on_host(_Comm(n), _MPI) for n in (1, 2, 4)] == [1, 2, 4]
    assert transports._spin_seconds(2) == transports._SPIN_S_OWN_CORE > 0
    assert transports._spin_seconds(1) == transports._SPIN_S_OWN_CORE
    assert transports._spin_seconds(4) == 0.0  # oversubscribed: sleep soon
