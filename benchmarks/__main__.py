"""``python -m benchmarks``: run the scaling studies and write benchmarks/RESULTS.md."""

import sys

from .driver import main

sys.exit(main())
