"""``simdist bench scale``: the quick matrix end to end, and its pieces (the fitted law, the
estimates that skip a point, the progress bar)."""

import csv
import io

import pytest

from simdist.commands.bench import scale
from simdist.commands.cli import main as simdist_main
from simdist.commands.progress import ProgressBar


def test_quick_matrix_writes_csv_table_ratios_and_growth_laws(capsys, tmp_path):
    out = tmp_path / "scale.csv"
    assert simdist_main(["bench", "scale", "--quick", "--csv", str(out)]) == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 8 and {r["status"] for r in rows} == {"measured"}
    assert {(r["devices"], r["fidelity"], r["trace"]) for r in rows} == {
        (d, f, t) for d in ("8", "32") for f in ("message", "flow") for t in ("on", "off")}
    for r in rows:
        assert float(r["wall_s"]) > 0 and float(r["peak_mb"]) > 1 and int(r["events"]) > 0
    flow32 = next(r for r in rows if r["devices"] == "32" and r["fidelity"] == "flow")
    message32 = next(r for r in rows if r["devices"] == "32" and r["fidelity"] == "message")
    assert message32["messages"] == str(2 * 2 * 31 * 32) and flow32["flows"] == "2"
    assert "flow vs message" in text and "events ratio" in text
    # the ring's messages grow as D^2, the flows' events as D
    assert "message  trace off 1 rank(s): events = 4.55 D^1.97" in text
    assert "flow     trace off 1 rank(s): events = 8 D^1.00" in text


def test_fit_power_law_recovers_an_exact_law():
    c, b = scale.fit_power_law([64, 256, 1024], [3 * d ** 2 for d in (64, 256, 1024)])
    assert c == pytest.approx(3) and b == pytest.approx(2)


def test_a_point_the_law_puts_too_far_is_estimated_not_run():
    rows = [{"devices": d, "fidelity": "message", "trace": False, "ranks": 1,
             "status": "measured", "wall_s": 0.001 * d ** 2, "events": d * d} for d in (64, 128)]
    point = scale.Point(1024, "message", False, 1)
    assert scale.estimate_seconds(rows, point, 5) == pytest.approx(0.001 * 1024 ** 2)
    assert scale.estimate_seconds(rows[:1], point, 5) == pytest.approx(
        rows[0]["wall_s"] * scale.events_model(1024, 5, "message")
        / scale.events_model(64, 5, "message"))
    assert scale.estimate_seconds(rows, scale.Point(1024, "flow", False, 1), 5) is None
    table = scale.format_table(rows + [{"devices": 1024, "fidelity": "message", "trace": False,
                                        "ranks": 1, "status": "skipped",
                                        "estimate_s": 1048.6}])
    assert "not run: ~1,049 s estimated" in table


def test_progress_bar_shows_points_and_eta():
    stream = io.StringIO()
    bar = ProgressBar(4, stream=stream, width=8)
    bar.done = 2
    bar.show("64 devices, flow", 95)
    assert stream.getvalue().startswith("[####....] 2/4 points, 0s elapsed, ETA 1m35s: 64 dev")


def test_bad_devices_are_one_line_errors(capsys):
    with pytest.raises(SystemExit):
        simdist_main(["bench", "scale", "--devices", "64,one"])
    assert "--devices '64,one': expected comma-separated whole numbers >= 2" in \
        capsys.readouterr().err
