"""``simdist calibrate``'s table of fitted parameters: one aligned row per parameter."""

from simdist.calibration.fit import PARAMETERS
from simdist.commands.calibrate import parameters_table


def test_every_row_lines_up_under_the_header_whatever_the_longest_name():
    lines = parameters_table({p.name: 1234.5 for p in PARAMETERS}).splitlines()
    head, rows = lines[1], lines[3:]
    assert len(rows) == len(PARAMETERS)
    value_end = head.index("value") + len("value")
    assert all(row[value_end - len("1,234.5"):value_end] == "1,234.5" for row in rows), rows
    assert max(len(p.name) for p in PARAMETERS) > 18  # names longer than the old fixed column
