"""realdist.training.ps_failure_probe (lesson 13 §5 runs it on real TF: join raises
UnavailableError, the other pending functions' fetch CancelledError): its arguments are
checked before any process starts."""

import pytest

from realdist.training.ps_failure_probe import kill_ps_mid_schedule
from simdist.base.errors import InvalidArgumentError


@pytest.mark.parametrize("options, message", [
    ({"functions": 0}, "functions must be an int >= 1, got 0"),
    ({"workers": True}, "workers must be an int >= 1, got True"),
    ({"spin": 2.5}, "spin must be an int >= 1, got 2.5"),
])
def test_bad_arguments_are_refused_before_any_process_starts(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        kill_ps_mid_schedule(**options)
