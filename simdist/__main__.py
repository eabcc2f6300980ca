"""``python -m simdist`` (and ``mpiexec -n N python -m mpi4py -m simdist``)."""

import sys

from simdist.commands.cli import main

sys.exit(main())
